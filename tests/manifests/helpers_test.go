package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// objectMeta is the part of metadata the checks read.
type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// doc is one YAML document of a file under knative/.
type doc struct {
	File       string     `json:"-"`
	Index      int        `json:"-"` // 0-based position in its file
	JSON       []byte     `json:"-"`
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
}

func (d doc) String() string {
	return fmt.Sprintf("%s #%d (%s %s)", d.File, d.Index+1, d.Kind, d.Metadata.Name)
}

// ref is a Knative KReference (subscriber, sink, subject).
type ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
}

type destination struct {
	Ref *ref   `json:"ref"`
	URI string `json:"uri"`
}

type delivery struct {
	Retry          *int32       `json:"retry"`
	BackoffPolicy  string       `json:"backoffPolicy"`
	BackoffDelay   string       `json:"backoffDelay"`
	Timeout        string       `json:"timeout"`
	DeadLetterSink *destination `json:"deadLetterSink"`
}

type probe struct {
	HTTPGet *struct {
		Path string `json:"path"`
	} `json:"httpGet"`
}

type container struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Env   []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `json:"name"`
		} `json:"configMapRef"`
		SecretRef *struct {
			Name string `json:"name"`
		} `json:"secretRef"`
	} `json:"envFrom"`
	Resources struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	} `json:"resources"`
	ReadinessProbe  *probe           `json:"readinessProbe"`
	LivenessProbe   *probe           `json:"livenessProbe"`
	SecurityContext *securityContext `json:"securityContext"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `json:"runAsNonRoot"`
	RunAsUser                *int64 `json:"runAsUser"`
	RunAsGroup               *int64 `json:"runAsGroup"`
	AllowPrivilegeEscalation *bool  `json:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `json:"readOnlyRootFilesystem"`
	Privileged               *bool  `json:"privileged"`
	Capabilities             *struct {
		Add  []string `json:"add"`
		Drop []string `json:"drop"`
	} `json:"capabilities"`
	SeccompProfile *struct {
		Type string `json:"type"`
	} `json:"seccompProfile"`
}

type knService struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Template struct {
			Metadata objectMeta `json:"metadata"`
			Spec     struct {
				ContainerConcurrency *int64      `json:"containerConcurrency"`
				TimeoutSeconds       *int64      `json:"timeoutSeconds"`
				Containers           []container `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type trigger struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Broker string `json:"broker"`
		Filter *struct {
			Attributes map[string]string `json:"attributes"`
		} `json:"filter"`
		Subscriber destination `json:"subscriber"`
		Delivery   *delivery   `json:"delivery"`
	} `json:"spec"`
}

type broker struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Delivery *delivery `json:"delivery"`
	} `json:"spec"`
}

type pingSource struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Schedule    string      `json:"schedule"`
		ContentType string      `json:"contentType"`
		Data        string      `json:"data"`
		DataBase64  string      `json:"dataBase64"`
		Sink        destination `json:"sink"`
	} `json:"spec"`
}

type sinkBinding struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Subject struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Namespace  string `json:"namespace"`
			Selector   any    `json:"selector"`
		} `json:"subject"`
		Sink destination `json:"sink"`
	} `json:"spec"`
}

type configMap struct {
	Metadata objectMeta        `json:"metadata"`
	Data     map[string]string `json:"data"`
}

type secret struct {
	Metadata   objectMeta        `json:"metadata"`
	Data       map[string]string `json:"data"`
	StringData map[string]string `json:"stringData"`
}

type kustomization struct {
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
}

// funcYAML is the subset of the Knative func descriptor (specVersion 0.36.0)
// these files use; decoded strictly, so a misspelt field fails the test.
type funcYAML struct {
	SpecVersion string `json:"specVersion"`
	Name        string `json:"name"`
	Runtime     string `json:"runtime"`
	Registry    string `json:"registry"`
	Namespace   string `json:"namespace"`
	Created     string `json:"created"`
	Invoke      string `json:"invoke"`
	Build       struct {
		Builder string `json:"builder"`
	} `json:"build"`
	Run struct {
		Envs []struct {
			Name  string `json:"name,omitempty"`
			Value string `json:"value"`
		} `json:"envs"`
	} `json:"run"`
	Deploy struct {
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
		Labels      []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"labels"`
		Options struct {
			Scale struct {
				Min    *int64   `json:"min"`
				Max    *int64   `json:"max"`
				Metric string   `json:"metric"`
				Target *float64 `json:"target"`
			} `json:"scale"`
			Resources struct {
				Requests struct {
					CPU    string `json:"cpu"`
					Memory string `json:"memory"`
				} `json:"requests"`
				Limits struct {
					CPU         string `json:"cpu"`
					Memory      string `json:"memory"`
					Concurrency *int64 `json:"concurrency"`
				} `json:"limits"`
			} `json:"resources"`
		} `json:"options"`
		HealthEndpoints struct {
			Liveness  string `json:"liveness"`
			Readiness string `json:"readiness"`
		} `json:"healthEndpoints"`
		Subscriptions []any `json:"subscriptions"`
	} `json:"deploy"`
}

// repoRoot is the module root: the nearest parent directory with a go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// modulePath reads the module line of go.mod.
func modulePath(t testing.TB, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

// functionNames lists the folders under functions/ that hold a main.go.
func functionNames(t testing.TB, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "functions"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "functions", e.Name(), "main.go")); err == nil {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("no functions/<name>/main.go found")
	}
	sort.Strings(out)
	return out
}

// splitYAML splits a multi-document YAML stream at its markers ("---",
// possibly followed by content, starts a document; "..." ends one), dropping
// documents that hold only comments or whitespace.
func splitYAML(raw []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == "...":
			flush()
			continue
		case line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t"):
			flush()
			line = line[3:]
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func hasContent(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		s := strings.TrimSpace(line)
		if s != "" && !strings.HasPrefix(s, "#") {
			return true
		}
	}
	return false
}

// manifests is every document under knative/, by kind.
type manifests struct {
	docs          []doc
	files         []string // base names of every file in knative/
	services      map[string]knService
	triggers      map[string]trigger
	brokers       map[string]broker
	pingSources   map[string]pingSource
	sinkBindings  map[string]sinkBinding
	configMaps    map[string]configMap
	secrets       map[string]secret
	kustomization *kustomization
}

// loadManifests parses every .yaml/.yml/.json file in knative/. A document
// that does not parse, or a kind/name that appears twice, fails the test.
func loadManifests(t testing.TB, root string) *manifests {
	t.Helper()
	dir := filepath.Join(root, "knative")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("knative/: %v", err)
	}
	m := &manifests{
		services: map[string]knService{}, triggers: map[string]trigger{}, brokers: map[string]broker{},
		pingSources: map[string]pingSource{}, sinkBindings: map[string]sinkBinding{},
		configMaps: map[string]configMap{}, secrets: map[string]secret{},
	}
	seen := map[string]doc{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m.files = append(m.files, e.Name())
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for i, part := range splitYAML(raw) {
			js, err := yaml.YAMLToJSON(part)
			if err != nil {
				t.Fatalf("knative/%s document %d: %v", e.Name(), i+1, err)
			}
			d := doc{File: e.Name(), Index: i, JSON: js}
			decode(t, d, &d)
			if d.Kind == "" || d.APIVersion == "" {
				t.Fatalf("%s: missing apiVersion or kind", d)
			}
			if d.Kind == "Kustomization" {
				var k kustomization
				decode(t, d, &k)
				if m.kustomization != nil {
					t.Fatalf("%s: a second Kustomization", d)
				}
				m.kustomization = &k
				m.docs = append(m.docs, d)
				continue
			}
			key := d.Kind + "/" + d.Metadata.Name
			if prev, dup := seen[key]; dup {
				t.Fatalf("%s: %s is also defined in %s", d, key, prev)
			}
			seen[key] = d
			m.docs = append(m.docs, d)
			switch d.Kind {
			case "Service":
				var v knService
				decode(t, d, &v)
				m.services[d.Metadata.Name] = v
			case "Trigger":
				var v trigger
				decode(t, d, &v)
				m.triggers[d.Metadata.Name] = v
			case "Broker":
				var v broker
				decode(t, d, &v)
				m.brokers[d.Metadata.Name] = v
			case "PingSource":
				var v pingSource
				decode(t, d, &v)
				m.pingSources[d.Metadata.Name] = v
			case "SinkBinding":
				var v sinkBinding
				decode(t, d, &v)
				m.sinkBindings[d.Metadata.Name] = v
			case "ConfigMap":
				var v configMap
				decode(t, d, &v)
				m.configMaps[d.Metadata.Name] = v
			case "Secret":
				var v secret
				decode(t, d, &v)
				m.secrets[d.Metadata.Name] = v
			}
		}
	}
	sort.Strings(m.files)
	return m
}

func decode(t testing.TB, d doc, into any) {
	t.Helper()
	if err := json.Unmarshal(d.JSON, into); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
}

// loadFuncYAML strictly decodes functions/<name>/func.yaml.
func loadFuncYAML(t testing.TB, root, name string) (funcYAML, bool) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "functions", name, "func.yaml"))
	if os.IsNotExist(err) {
		return funcYAML{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var f funcYAML
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatalf("functions/%s/func.yaml: %v", name, err)
	}
	return f, true
}

var isoDuration = regexp.MustCompile(`^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$`)

// parseISODuration reads the ISO 8601 durations Knative delivery specs use
// (PT1S, PT0.5S, PT15M, PT1H30M).
func parseISODuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "PT" {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration like PT30S", s)
	}
	var d time.Duration
	if m[1] != "" {
		h, _ := strconv.Atoi(m[1])
		d += time.Duration(h) * time.Hour
	}
	if m[2] != "" {
		mi, _ := strconv.Atoi(m[2])
		d += time.Duration(mi) * time.Minute
	}
	if m[3] != "" {
		sec, _ := strconv.ParseFloat(m[3], 64)
		d += time.Duration(sec * float64(time.Second))
	}
	return d, nil
}

// envNames returns the environment variable names a Go file mentions: its
// string literals shaped like one (FOO_BAR). shared/bootstrap/config.go reads
// some through getenv("X") and some through a table of {"X", …} entries, so
// every such literal counts.
func envNames(t testing.TB, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		if v, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(v) {
			out[v] = true
		}
		return true
	})
	return out
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{2,}$`)

// goFiles lists the .go files under dir (recursively).
func goFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != dir {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// imports returns the import paths of a Go file.
func imports(t testing.TB, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []string
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, p)
	}
	return out
}

// isStdlib reports whether an import path belongs to the standard library
// (its first element has no dot).
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}
