package terraform

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/yuxi-serverless/yuxi/infra/devbroker"
)

// The configurations deploy every function main and route each io.yuxi.*
// event type to the functions the Knative Triggers route it to.
func TestTerraformDefaultsFollowTheFunctionsAndTriggers(t *testing.T) {
	root := repoRoot(t)
	triggers, err := devbroker.LoadTriggers(filepath.Join(root, "knative"), func(s string) (string, bool) { return "http://" + s + "/", true })
	if err != nil {
		t.Fatal(err)
	}
	mains, _ := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	for _, c := range configurations {
		m := load(t, filepath.Join(root, "terraform", c))
		defaults := map[string]*hclsyntax.Attribute{}
		for _, b := range m.blocks {
			if b.Type == "variable" {
				if d, ok := b.Body.Attributes["default"]; ok {
					defaults[b.Labels[0]] = d
				}
			}
		}
		fns, diags := defaults["functions"].Expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("%s: var.functions default: %s", c, diags.Error())
		}
		for _, mf := range mains {
			fn := filepath.Base(filepath.Dir(mf))
			if !fns.Type().HasAttribute(fn) {
				t.Errorf("terraform/%s: var.functions lacks functions/%s", c, fn)
			}
		}
		cons, diags := defaults["consumers"].Expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("%s: var.consumers default: %s", c, diags.Error())
		}
		routes := map[string][]string{}
		for fn, types := range cons.AsValueMap() {
			for _, v := range types.AsValueSlice() {
				routes[fn] = append(routes[fn], v.AsString())
			}
		}
		for _, tr := range triggers {
			fn := strings.Trim(strings.TrimPrefix(tr.Subscriber, "http://"), "/")
			if strings.HasPrefix(tr.Type, "io.yuxi.") && !slices.Contains(routes[fn], tr.Type) {
				t.Errorf("terraform/%s: Trigger %s sends %s to %s; var.consumers does not (%v)", c, tr.Name, tr.Type, fn, routes[fn])
			}
		}
	}
}
