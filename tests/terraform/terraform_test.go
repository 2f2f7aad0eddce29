// Package terraform checks the Terraform under terraform/ without Terraform:
// neither Terraform nor its providers can be installed on the machines that
// run make test. Every .tf file is parsed with hashicorp/hcl/v2; every
// reference (variables, locals, resources, data sources, modules, each,
// count, dynamic-block iterators) must resolve; every resource and data
// source type, argument, nested block and referenced attribute must be in the
// hand-curated schema of schema_test.go, pinned to the provider versions the
// configurations declare. When a terraform binary is on PATH with its
// providers available, `terraform validate` runs as well.
package terraform

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

func repoRoot(t *testing.T) string {
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
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

var configurations = []string{"aws", "gcp"}

type module struct {
	dir       string
	vars      map[string]bool // declared → used
	locals    map[string]bool
	modules   map[string]bool
	resources map[string]map[string]*hclsyntax.Block
	data      map[string]map[string]*hclsyntax.Block
	providers map[string]string // local name → version constraint
	blocks    []*hclsyntax.Block
}

func load(t *testing.T, dir string) *module {
	t.Helper()
	m := &module{dir: dir, vars: map[string]bool{}, locals: map[string]bool{}, modules: map[string]bool{},
		resources: map[string]map[string]*hclsyntax.Block{}, data: map[string]map[string]*hclsyntax.Block{}, providers: map[string]string{}}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	if len(files) == 0 {
		t.Fatalf("%s has no .tf files", dir)
	}
	p := hclparse.NewParser()
	for _, f := range files {
		file, diags := p.ParseHCLFile(f)
		if diags.HasErrors() {
			t.Fatalf("parse: %s", diags.Error())
		}
		for _, b := range file.Body.(*hclsyntax.Body).Blocks {
			m.blocks = append(m.blocks, b)
			switch b.Type {
			case "variable":
				m.vars[b.Labels[0]] = false
			case "locals":
				for name := range b.Body.Attributes {
					m.locals[name] = true
				}
			case "module":
				m.modules[b.Labels[0]] = true
			case "resource":
				add(m.resources, b)
			case "data":
				add(m.data, b)
			case "terraform":
				for _, rb := range b.Body.Blocks {
					if rb.Type != "required_providers" {
						continue
					}
					for name, attr := range rb.Body.Attributes {
						v, diags := attr.Expr.Value(nil)
						if diags.HasErrors() || !v.Type().IsObjectType() || !v.Type().HasAttribute("version") {
							t.Errorf("%s: required_providers.%s needs a literal source and version", f, name)
							continue
						}
						m.providers[name] = v.GetAttr("version").AsString()
					}
				}
			case "output", "provider":
			default:
				t.Errorf("%s: unexpected top-level block %q", f, b.Type)
			}
		}
	}
	return m
}

func add(into map[string]map[string]*hclsyntax.Block, b *hclsyntax.Block) {
	if into[b.Labels[0]] == nil {
		into[b.Labels[0]] = map[string]*hclsyntax.Block{}
	}
	into[b.Labels[0]][b.Labels[1]] = b
}

func TestTerraformProvidersArePinnedToTheCuratedSchema(t *testing.T) {
	for _, c := range configurations {
		m := load(t, filepath.Join(repoRoot(t), "terraform", c))
		if len(m.providers) == 0 {
			t.Errorf("terraform/%s declares no required_providers", c)
		}
		for name, version := range m.providers {
			if pinnedProviders[name] != version {
				t.Errorf("terraform/%s pins %s %q, the curated schema is for %q: update schema_test.go from the provider docs of the new version", c, name, version, pinnedProviders[name])
			}
		}
	}
}

func TestTerraformResourcesMatchTheCuratedSchema(t *testing.T) {
	for _, c := range configurations {
		m := load(t, filepath.Join(repoRoot(t), "terraform", c))
		for _, b := range m.blocks {
			var sc *schema
			switch b.Type {
			case "resource":
				sc = resources[b.Labels[0]]
			case "data":
				sc = dataSources[b.Labels[0]]
			default:
				continue
			}
			where := c + ": " + b.Type + " " + strings.Join(b.Labels, ".")
			if sc == nil {
				t.Errorf("%s: type %s is not in the curated schema", where, b.Labels[0])
				continue
			}
			provider, _, _ := strings.Cut(b.Labels[0], "_")
			if _, ok := m.providers[provider]; !ok {
				t.Errorf("%s: provider %s is not in required_providers", where, provider)
			}
			checkBody(t, where, b.Body, sc, true)
		}
	}
}

var metaArgs = []string{"count", "for_each", "depends_on", "provider"}

func checkBody(t *testing.T, where string, body *hclsyntax.Body, sc *schema, top bool) {
	t.Helper()
	for name := range body.Attributes {
		if top && slices.Contains(metaArgs, name) {
			continue
		}
		if !slices.Contains(sc.args, name) {
			t.Errorf("%s: argument %q is not in the curated schema", where, name)
		}
	}
	for _, nb := range body.Blocks {
		switch {
		case top && nb.Type == "lifecycle":
		case nb.Type == "dynamic":
			inner, ok := sc.blocks[nb.Labels[0]]
			if !ok {
				t.Errorf("%s: dynamic block %q is not in the curated schema", where, nb.Labels[0])
				continue
			}
			for _, cb := range nb.Body.Blocks {
				if cb.Type == "content" {
					checkBody(t, where+"."+nb.Labels[0], cb.Body, inner, false)
				}
			}
		default:
			inner, ok := sc.blocks[nb.Type]
			if !ok {
				t.Errorf("%s: block %q is not in the curated schema", where, nb.Type)
				continue
			}
			checkBody(t, where+"."+nb.Type, nb.Body, inner, false)
		}
	}
}

// scope is what names an expression may use besides the module's
// declarations: each/count of its resource, dynamic-block iterators.
type scope struct {
	each, count bool
	iterators   []string
}

func TestTerraformReferencesResolve(t *testing.T) {
	for _, c := range configurations {
		m := load(t, filepath.Join(repoRoot(t), "terraform", c))
		for _, b := range m.blocks {
			sc := scope{}
			if b.Type == "resource" || b.Type == "data" || b.Type == "module" {
				_, sc.each = b.Body.Attributes["for_each"]
				_, sc.count = b.Body.Attributes["count"]
			}
			where := c + ": " + b.Type + " " + strings.Join(b.Labels, ".")
			body := b.Body
			if b.Type == "variable" {
				// A variable's type is a type constraint, not references.
				body = &hclsyntax.Body{Attributes: hclsyntax.Attributes{}, Blocks: b.Body.Blocks}
				for name, attr := range b.Body.Attributes {
					if name != "type" {
						body.Attributes[name] = attr
					}
				}
			}
			m.walk(t, where, body, sc)
		}
		var unused []string
		for v, used := range m.vars {
			if !used {
				unused = append(unused, v)
			}
		}
		sort.Strings(unused)
		if len(unused) > 0 {
			t.Errorf("terraform/%s: variables declared and never used: %v", c, unused)
		}
	}
}

func (m *module) walk(t *testing.T, where string, body *hclsyntax.Body, sc scope) {
	t.Helper()
	for name, attr := range body.Attributes {
		for _, tr := range hclsyntax.Variables(attr.Expr) {
			m.resolve(t, where+"."+name, tr, sc)
		}
	}
	for _, nb := range body.Blocks {
		inner := sc
		if nb.Type == "dynamic" {
			it := nb.Labels[0]
			if a, ok := nb.Body.Attributes["iterator"]; ok {
				if tr, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() {
					it = tr.RootName()
				}
			}
			inner.iterators = append(slices.Clone(sc.iterators), it)
			// for_each of the dynamic block is evaluated outside it.
			if fe, ok := nb.Body.Attributes["for_each"]; ok {
				for _, tr := range hclsyntax.Variables(fe.Expr) {
					m.resolve(t, where+".dynamic."+nb.Labels[0]+".for_each", tr, sc)
				}
			}
			for _, cb := range nb.Body.Blocks {
				m.walk(t, where+"."+nb.Labels[0], cb.Body, inner)
			}
			continue
		}
		m.walk(t, where+"."+nb.Type, nb.Body, inner)
	}
}

func (m *module) resolve(t *testing.T, where string, tr hcl.Traversal, sc scope) {
	t.Helper()
	root := tr.RootName()
	attrAt := func(i int) (string, bool) {
		if len(tr) <= i {
			return "", false
		}
		a, ok := tr[i].(hcl.TraverseAttr)
		return a.Name, ok
	}
	switch root {
	case "var":
		name, _ := attrAt(1)
		if _, ok := m.vars[name]; !ok {
			t.Errorf("%s: var.%s is not declared", where, name)
			return
		}
		m.vars[name] = true
	case "local":
		if name, _ := attrAt(1); !m.locals[name] {
			t.Errorf("%s: local.%s is not defined", where, name)
		}
	case "module":
		if name, _ := attrAt(1); !m.modules[name] {
			t.Errorf("%s: module.%s is not declared", where, name)
		}
	case "each":
		if name, _ := attrAt(1); !sc.each || (name != "key" && name != "value") {
			t.Errorf("%s: each.%s outside a for_each resource (or not key/value)", where, name)
		}
	case "count":
		if name, _ := attrAt(1); !sc.count || name != "index" {
			t.Errorf("%s: count.%s outside a count resource", where, name)
		}
	case "path":
		if name, _ := attrAt(1); name != "module" && name != "root" && name != "cwd" {
			t.Errorf("%s: path.%s", where, name)
		}
	case "terraform":
	case "data":
		typ, _ := attrAt(1)
		name, _ := attrAt(2)
		b := m.data[typ][name]
		if b == nil {
			t.Errorf("%s: data.%s.%s is not declared", where, typ, name)
			return
		}
		m.checkAttr(t, where, "data."+typ+"."+name, dataSources[typ], b, tr[3:])
	default:
		if slices.Contains(sc.iterators, root) {
			if name, _ := attrAt(1); name != "key" && name != "value" {
				t.Errorf("%s: iterator %s.%s (key or value)", where, root, name)
			}
			return
		}
		name, _ := attrAt(1)
		b := m.resources[root][name]
		if b == nil {
			t.Errorf("%s: %s.%s is neither a declared resource nor a known name", where, root, name)
			return
		}
		m.checkAttr(t, where, root+"."+name, resources[root], b, tr[2:])
	}
}

// checkAttr checks the attribute a reference reads from a resource: after an
// index for counted or for_each resources, an argument, nested block or
// exported attribute of its type.
func (m *module) checkAttr(t *testing.T, where, ref string, sc *schema, b *hclsyntax.Block, rest hcl.Traversal) {
	t.Helper()
	if sc == nil {
		return // reported by the schema test
	}
	_, counted := b.Body.Attributes["count"]
	_, each := b.Body.Attributes["for_each"]
	if len(rest) == 0 {
		return // the whole object (or map of instances), e.g. in a for expression
	}
	if counted || each {
		if _, ok := rest[0].(hcl.TraverseIndex); !ok {
			t.Errorf("%s: %s has count or for_each and is read without an index", where, ref)
			return
		}
		if idx := rest[0].(hcl.TraverseIndex).Key; counted && idx.Type() != cty.Number {
			t.Errorf("%s: %s has count and is indexed by a %s", where, ref, idx.Type().FriendlyName())
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return
	}
	a, ok := rest[0].(hcl.TraverseAttr)
	if !ok {
		t.Errorf("%s: %s is indexed where an attribute is expected", where, ref)
		return
	}
	if !slices.Contains(sc.args, a.Name) && !slices.Contains(sc.exports, a.Name) && sc.blocks[a.Name] == nil {
		t.Errorf("%s: %s.%s is not an attribute of %s in the curated schema", where, ref, a.Name, b.Labels[0])
	}
}

// TestTerraformValidate runs terraform validate when Terraform is installed
// with its providers (never on the machines make test runs on here).
func TestTerraformValidate(t *testing.T) {
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("SKIP: terraform is not installed (it cannot be installed here); the HCL checks above stand in")
	}
	// terraform fmt needs no providers: it always runs when terraform does.
	if out, err := exec.Command(bin, "fmt", "-check", "-recursive", "-diff", filepath.Join(repoRoot(t), "terraform")).CombinedOutput(); err != nil {
		t.Errorf("terraform fmt -check: %v\n%s", err, out)
	}
	for _, c := range configurations {
		dir := filepath.Join(repoRoot(t), "terraform", c)
		tmp := t.TempDir()
		for _, args := range [][]string{{"init", "-backend=false", "-input=false"}, {"validate", "-no-color"}} {
			cmd := exec.Command(bin, append([]string{"-chdir=" + dir}, args...)...)
			cmd.Env = append(os.Environ(), "TF_DATA_DIR="+tmp)
			if out, err := cmd.CombinedOutput(); err != nil {
				if args[0] == "init" {
					t.Skipf("SKIP: terraform init (providers unavailable): %s", out)
				}
				t.Errorf("terraform/%s: terraform %s: %v\n%s", c, args[0], err, out)
			}
		}
	}
}

// TestTerraformTemplatesGetTheirVariables checks every templatefile call:
// the template exists, and the variables it references are exactly the keys
// the call passes (a missing key fails at apply, an extra one is a typo).
func TestTerraformTemplatesGetTheirVariables(t *testing.T) {
	calls := 0
	for _, c := range configurations {
		dir := filepath.Join(repoRoot(t), "terraform", c)
		m := load(t, dir)
		for _, b := range m.blocks {
			hclsyntax.VisitAll(b.Body, func(n hclsyntax.Node) hcl.Diagnostics {
				fc, ok := n.(*hclsyntax.FunctionCallExpr)
				if !ok || fc.Name != "templatefile" {
					return nil
				}
				calls++
				where := c + ": " + b.Type + " " + strings.Join(b.Labels, ".")
				if len(fc.Args) != 2 {
					t.Errorf("%s: templatefile needs a path and a map", where)
					return nil
				}
				pathTmpl, ok := fc.Args[0].(*hclsyntax.TemplateExpr)
				if !ok || len(pathTmpl.Parts) != 2 {
					t.Errorf("%s: templatefile path must be \"${path.module}/<file>\"", where)
					return nil
				}
				lit, _ := pathTmpl.Parts[1].(*hclsyntax.LiteralValueExpr)
				if lit == nil {
					t.Errorf("%s: templatefile path must end in a literal file name", where)
					return nil
				}
				file := filepath.Join(dir, strings.TrimPrefix(lit.Val.AsString(), "/"))
				src, err := os.ReadFile(file)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					return nil
				}
				tmpl, diags := hclsyntax.ParseTemplate(src, file, hcl.InitialPos)
				if diags.HasErrors() {
					t.Errorf("%s: %s", where, diags.Error())
					return nil
				}
				used := map[string]bool{}
				for _, tr := range tmpl.Variables() {
					used[tr.RootName()] = true
				}
				given := map[string]bool{}
				obj, ok := fc.Args[1].(*hclsyntax.ObjectConsExpr)
				if !ok {
					t.Errorf("%s: templatefile's variables must be an object literal", where)
					return nil
				}
				for _, item := range obj.Items {
					k, diags := item.KeyExpr.Value(nil)
					if diags.HasErrors() {
						t.Errorf("%s: a template variable name is not literal", where)
						continue
					}
					given[k.AsString()] = true
				}
				for k := range used {
					if !given[k] {
						t.Errorf("%s: %s references ${%s}, which the call does not pass", where, filepath.Base(file), k)
					}
				}
				for k := range given {
					if !used[k] {
						t.Errorf("%s: passes %s, which %s never uses", where, k, filepath.Base(file))
					}
				}
				return nil
			})
		}
	}
	if calls == 0 {
		t.Fatal("no templatefile call found: the check checks nothing")
	}
}
