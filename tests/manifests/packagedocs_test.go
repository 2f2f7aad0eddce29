package manifests

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Package docs checked against imports (STYLE.md: "A package's May import
// line is checked by a test against go list").
//
// Every package with non-test Go files — except commands (package main
// under functions/*, infra/*/cmd and tests/bench, whose imports are their
// wiring) — starts with a doc comment holding two lines:
//
//	Imported by: <who>.
//	May import: <list>.
//
// The May import list is checked for every import outside the standard
// library (which is always allowed; naming it is optional). Its grammar:
//
//	list  = item { ("," | "and" | ", and") item } ["only"] "."
//	item  = "the standard library" | "stdlib" | "testing"   the standard library
//	      | "events" | "shared/*" | "shared/<name>[/<sub>]"  packages of this module by path, where "*"
//	      | "functions/*/<handler package>"                  or "<…>" is one or more segments and a
//	                                                         plain path is that package only
//	      | "anything"                                       no constraint (test kits)
//	      | <alias>                                          a third-party module, see thirdParty
//	      | <host>/<path>                                    a third-party import path prefix
//
// Text in parentheses is a remark and ignored, and the list ends at the
// first sentence end (". " or the end of the comment), so a line may go on
// with prose ("It never imports another shared domain package."). An item
// the grammar does not know fails the test: the line must stay checkable.
// Each direct import of the package's non-test files (go list's Imports)
// must match an item. Test files may import more.
//
// Imported by is prose about callers ("every domain package and the HTTP
// edge", "tests only"), so only its concrete paths are checked: each item
// that names a path of this module (shared/queue, functions/intake,
// infra/local, tests, …) must import the package — directly, from its
// non-test or test files — so the line cannot name importers that went
// away. The other direction (every importer listed) cannot be checked
// against prose categories; the May import lines of the importers already
// bound who may import what.

// thirdParty maps the names docs use for third-party modules to import
// path prefixes.
var thirdParty = map[string][]string{
	"pgx":                                 {"github.com/jackc/pgx/"},
	"robfig/cron":                         {"github.com/robfig/cron/"},
	"go-redis":                            {"github.com/redis/go-redis/"},
	"golang-jwt":                          {"github.com/golang-jwt/jwt/"},
	"x/crypto":                            {"golang.org/x/crypto/"},
	"go-oidc":                             {"github.com/coreos/go-oidc/"},
	"x/oauth2":                            {"golang.org/x/oauth2"},
	"go-jose":                             {"github.com/go-jose/go-jose/"},
	"minio-go":                            {"github.com/minio/minio-go/"},
	"openai-go":                           {"github.com/openai/openai-go/"},
	"aws-lambda-go":                       {"github.com/aws/aws-lambda-go/"},
	"functions-framework-go":              {"github.com/GoogleCloudPlatform/functions-framework-go/"},
	"yaml.v3":                             {"gopkg.in/yaml.v3"},
	"sigs.k8s.io/yaml":                    {"sigs.k8s.io/yaml"},
	"the cloudevents sdk":                 {"github.com/cloudevents/sdk-go/"},
	"the cloudevents sdk's event package": {"github.com/cloudevents/sdk-go/v2/event"},
	"the json schema validator":           {"github.com/santhosh-tekuri/jsonschema/"},
	"html-to-markdown v2":                 {"github.com/JohannesKaufmann/html-to-markdown/v2"},
	"golang.org/x/text encodings":         {"golang.org/x/text/encoding"},
	"the milvus go client":                {"github.com/milvus-io/milvus/client/v2"},
	"its proto types":                     {"github.com/milvus-io/milvus-proto/"},
	"the neo4j go driver":                 {"github.com/neo4j/neo4j-go-driver/v5/"},
	"the aws sdk":                         {"github.com/aws/aws-sdk-go-v2/"},
	"the google cloud pub/sub client":     {"cloud.google.com/go/pubsub/"},
	"the mcp go sdk":                      {"github.com/modelcontextprotocol/go-sdk/"},
}

var (
	remark      = regexp.MustCompile(`\([^()]*\)`)
	sentenceEnd = regexp.MustCompile(`\.(\s|$)`)
	listSep     = regexp.MustCompile(`\s*,\s*(?:and\s+)?|\s+and\s+`)
	modulePaths = regexp.MustCompile(`^(events|shared|functions|infra|tests)(/([A-Za-z0-9_.*-]+|<[^<>/]+>))*$`)
)

// docLine returns the text after label in doc up to the sentence end,
// without remarks; ok is false when doc has no such line.
func docLine(doc, label string) (string, bool) {
	i := strings.Index(doc, label)
	if i < 0 {
		return "", false
	}
	s := strings.Join(strings.Fields(doc[i+len(label):]), " ")
	for remark.MatchString(s) {
		s = remark.ReplaceAllString(s, "")
	}
	if loc := sentenceEnd.FindStringIndex(s); loc != nil {
		s = s[:loc[0]]
	}
	return strings.TrimSpace(s), true
}

// allowRule matches an import path (module-relative for this module's
// packages) against one May import item.
type allowRule func(imp string, internal bool) bool

// parseMayImport turns a May import list into rules; unknown items are
// returned as errors.
func parseMayImport(list string) (rules []allowRule, unknown []string) {
	list = strings.TrimSuffix(strings.TrimSpace(list), " only")
	for _, item := range listSep.Split(list, -1) {
		item = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(item), " only"))
		low := strings.ToLower(item)
		switch {
		case item == "":
		case low == "the standard library" || low == "standard library" || low == "stdlib" || low == "testing":
			rules = append(rules, func(imp string, internal bool) bool { return !internal && isStdlib(imp) })
		case low == "anything":
			rules = append(rules, func(string, bool) bool { return true })
		case modulePaths.MatchString(item):
			pattern := item
			rules = append(rules, func(imp string, internal bool) bool { return internal && pathMatch(pattern, imp) })
		case thirdParty[low] != nil:
			prefixes := thirdParty[low]
			rules = append(rules, func(imp string, internal bool) bool {
				return !internal && slices.ContainsFunc(prefixes, func(p string) bool { return imp == strings.TrimSuffix(p, "/") || strings.HasPrefix(imp, p) })
			})
		case strings.Contains(strings.SplitN(item, "/", 2)[0], ".") && strings.Contains(item, "/"):
			prefix := item
			rules = append(rules, func(imp string, internal bool) bool {
				return !internal && (imp == prefix || strings.HasPrefix(imp, prefix+"/"))
			})
		default:
			unknown = append(unknown, item)
		}
	}
	return rules, unknown
}

// pathMatch matches a module-relative path against a pattern whose "*"
// or "<…>" segments stand for one or more segments; a pattern also
// matches the packages below it ("shared/docparse" matches
// shared/docparse/pdf only if written "shared/docparse/*").
func pathMatch(pattern, p string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(p, "/")
	for i, seg := range ps {
		if i >= len(xs) {
			return false
		}
		if seg == "*" || strings.HasPrefix(seg, "<") {
			if i == len(ps)-1 {
				return true
			}
			continue
		}
		if seg != xs[i] {
			return false
		}
	}
	return len(ps) == len(xs)
}

type listedPackage struct {
	ImportPath   string
	Name         string
	Doc          string
	GoFiles      []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listPackages runs go list over the module.
func listPackages(t *testing.T, root string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// fullDoc is the package's doc comment: go list's Doc is its first
// sentence only, so the comment is read from the files.
func fullDoc(t *testing.T, root, modPath string, p listedPackage) string {
	t.Helper()
	dir := root + "/" + strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modPath), "/")
	var docs []string
	for _, f := range p.GoFiles {
		if d := fileDoc(t, dir+"/"+f); d != "" {
			docs = append(docs, d)
		}
	}
	return strings.Join(docs, "\n")
}

func fileDoc(t *testing.T, file string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if f.Doc == nil {
		return ""
	}
	return f.Doc.Text()
}

func TestPackageDocsStateTheirImports(t *testing.T) {
	root := repoRoot(t)
	mod := modulePath(t, root)
	pkgs := listPackages(t, root)
	rels := func(imp string) (string, bool) {
		if imp == mod {
			return "", true
		}
		r, ok := strings.CutPrefix(imp, mod+"/")
		return r, ok
	}
	// importers: module-relative package → the module-relative packages
	// importing it (from non-test or test files).
	importers := map[string][]string{}
	for _, p := range pkgs {
		self, _ := rels(p.ImportPath)
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if r, ok := rels(imp); ok && r != self {
				importers[r] = append(importers[r], self)
			}
		}
	}
	checked := 0
	for _, p := range pkgs {
		self, _ := rels(p.ImportPath)
		if len(p.GoFiles) == 0 || p.Name == "main" && !strings.HasPrefix(self, "shared/") {
			continue // test-only packages; commands (their imports are their wiring)
		}
		doc := fullDoc(t, root, mod, p)
		may, ok := docLine(doc, "May import:")
		if !ok {
			t.Errorf("%s: the package doc has no \"May import:\" line", self)
			continue
		}
		rules, unknown := parseMayImport(may)
		for _, u := range unknown {
			t.Errorf("%s: May import names %q, which the grammar of packagedocs_test.go does not know", self, u)
		}
		for _, imp := range p.Imports {
			r, internal := rels(imp)
			if !internal {
				r = imp
			}
			if !internal && isStdlib(imp) {
				continue // the standard library is always allowed
			}
			if !slices.ContainsFunc(rules, func(rule allowRule) bool { return rule(r, internal) }) {
				t.Errorf("%s imports %s, which its doc's \"May import: %s\" does not allow", self, r, may)
			}
		}
		checked++

		by, ok := docLine(doc, "Imported by:")
		if !ok {
			t.Errorf("%s: the package doc has no \"Imported by:\" line", self)
			continue
		}
		for _, item := range listSep.Split(by, -1) {
			item = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(item), " only"))
			if item == "tests" || !modulePaths.MatchString(item) {
				continue // prose: "tests" (any package's tests), "function mains", …
			}
			if !slices.ContainsFunc(importers[self], func(imp string) bool { return importerMatch(item, imp) }) {
				t.Errorf("%s: its doc says it is imported by %s, but nothing there imports it (importers: %v)", self, item, sorted(importers[self]))
			}
		}
	}
	if checked < 40 {
		t.Errorf("checked %d package docs; expected every package of the module", checked)
	}
}

// importerMatch: an Imported by item names a path; it matches the
// packages at and below it ("functions/intake" covers its handler package).
func importerMatch(item, imp string) bool {
	if strings.Contains(item, "*") || strings.Contains(item, "<") {
		return pathMatch(item, imp) || pathMatch(item+"/*", imp)
	}
	return imp == item || strings.HasPrefix(imp, item+"/") || path.Dir(imp) == item
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}
