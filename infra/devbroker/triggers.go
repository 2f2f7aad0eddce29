package devbroker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/types"
	"sigs.k8s.io/yaml"
)

// Trigger subscribes Subscriber to the events whose type is Type, as a
// Knative Trigger does. An empty Type matches every event.
type Trigger struct {
	Name       string
	Type       string
	Subscriber string // URL the events are POSTed to, in binary mode
	// Attributes are further exact-match filters (source, subject, an
	// extension such as runid…), from spec.filter.attributes.
	Attributes map[string]string
}

// Matches reports whether ev passes the trigger's filter.
func (t Trigger) Matches(ev cloudevents.Event) bool {
	if t.Type != "" && ev.Type() != t.Type {
		return false
	}
	for name, want := range t.Attributes {
		got, ok := attribute(ev, name)
		if !ok || got != want {
			return false
		}
	}
	return true
}

func attribute(ev cloudevents.Event, name string) (string, bool) {
	switch name {
	case "specversion":
		return ev.SpecVersion(), true
	case "id":
		return ev.ID(), true
	case "source":
		return ev.Source(), true
	case "type":
		return ev.Type(), true
	case "subject":
		return ev.Subject(), ev.Subject() != ""
	case "datacontenttype":
		return ev.DataContentType(), ev.DataContentType() != ""
	case "dataschema":
		return ev.DataSchema(), ev.DataSchema() != ""
	}
	v, ok := ev.Extensions()[name]
	if !ok {
		return "", false
	}
	s, err := types.ToString(v)
	return s, err == nil
}

// LoadTriggers reads the Knative Trigger manifests (apiVersion
// eventing.knative.dev/v1, kind Trigger) in the .yaml and .yml files under dir,
// recursively; files may hold several documents and other kinds are ignored.
// resolve maps a subscriber ref (a Knative Service name) to its URL; when the
// subscriber also has a uri, it is resolved against that URL, as Knative does.
//
// Only spec.filter.attributes is understood; a Trigger using spec.filters
// (the CESQL/dialect filters) is an error rather than being silently
// over-delivered. spec.broker and spec.delivery are ignored: one broker,
// with the retry policy of its Options.
func LoadTriggers(dir string, resolve func(serviceName string) (url string, ok bool)) ([]Trigger, error) {
	var out []Trigger
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		ts, err := triggersInFile(path, resolve)
		if err != nil {
			return err
		}
		out = append(out, ts...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load triggers from %s: %w", dir, err)
	}
	return out, nil
}

type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Filter *struct {
			Attributes map[string]string `json:"attributes"`
		} `json:"filter"`
		Filters    []json.RawMessage `json:"filters"`
		Subscriber struct {
			Ref *struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"ref"`
			URI string `json:"uri"`
		} `json:"subscriber"`
	} `json:"spec"`
}

func triggersInFile(path string, resolve func(string) (string, bool)) ([]Trigger, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Trigger
	for i, doc := range splitDocuments(raw) {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if json.Unmarshal(js, &head) != nil {
			continue // not a Kubernetes object (a list, a scalar)
		}
		if head.Kind != "Trigger" || !strings.HasPrefix(head.APIVersion, "eventing.knative.dev/") {
			continue
		}
		var m manifest
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		t, err := toTrigger(m, resolve)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// splitDocuments splits a YAML stream at its document markers: a line that
// is "---" (possibly followed by content or a comment) starts a document and
// "..." ends one. Block scalars are indented, so a marker at column 0 is
// never content.
func splitDocuments(stream []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	flush := func() {
		if len(bytes.TrimSpace(cur)) > 0 {
			docs = append(docs, cur)
		}
		cur = nil
	}
	for line := range bytes.Lines(stream) {
		bare := bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.Equal(bare, []byte("...")):
			flush()
		case bytes.HasPrefix(bare, []byte("---")) && (len(bare) == 3 || bare[3] == ' ' || bare[3] == '\t'):
			flush()
			cur = append(cur, bare[3:]...)
			cur = append(cur, '\n')
		default:
			cur = append(cur, line...)
		}
	}
	flush()
	return docs
}

func toTrigger(m manifest, resolve func(string) (string, bool)) (Trigger, error) {
	name := m.Metadata.Name
	if name == "" {
		return Trigger{}, errors.New("trigger without metadata.name")
	}
	if len(m.Spec.Filters) > 0 {
		return Trigger{}, fmt.Errorf("trigger %s: spec.filters is not supported by devbroker; use spec.filter.attributes", name)
	}
	t := Trigger{Name: name}
	if m.Spec.Filter != nil {
		for k, v := range m.Spec.Filter.Attributes {
			switch {
			case v == "":
				// Knative: an empty value matches any value.
			case k == "type":
				t.Type = v
			default:
				if t.Attributes == nil {
					t.Attributes = map[string]string{}
				}
				t.Attributes[k] = v
			}
		}
	}
	sub := m.Spec.Subscriber
	switch {
	case sub.Ref != nil:
		base, ok := resolve(sub.Ref.Name)
		if !ok {
			return Trigger{}, fmt.Errorf("trigger %s: subscriber %s %q cannot be resolved", name, sub.Ref.Kind, sub.Ref.Name)
		}
		u, err := url.Parse(base)
		if err != nil || !u.IsAbs() {
			return Trigger{}, fmt.Errorf("trigger %s: subscriber %q resolved to %q, not an absolute URL", name, sub.Ref.Name, base)
		}
		if sub.URI != "" {
			rel, err := url.Parse(sub.URI)
			if err != nil {
				return Trigger{}, fmt.Errorf("trigger %s: subscriber uri: %w", name, err)
			}
			u = u.ResolveReference(rel)
		}
		t.Subscriber = u.String()
	case sub.URI != "":
		u, err := url.Parse(sub.URI)
		if err != nil || !u.IsAbs() {
			return Trigger{}, fmt.Errorf("trigger %s: subscriber uri %q is not an absolute URL", name, sub.URI)
		}
		t.Subscriber = u.String()
	default:
		return Trigger{}, fmt.Errorf("trigger %s: no subscriber ref or uri", name)
	}
	return t, nil
}
