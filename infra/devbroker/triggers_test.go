package devbroker_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/infra/devbroker"
)

func resolver(services map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		u, ok := services[name]
		return u, ok
	}
}

func TestLoadTriggers(t *testing.T) {
	t.Parallel()
	got, err := devbroker.LoadTriggers("testdata/knative", resolver(map[string]string{
		"agent-step": "http://127.0.0.1:9001",
		"dispatcher": "http://127.0.0.1:9002/",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []devbroker.Trigger{
		// testdata/knative/extra/audit.yml (walked in lexical order)
		{Name: "audit-thread-42", Subscriber: "http://audit.example.test/ingest", Attributes: map[string]string{"threadid": "thread_42"}},
		// testdata/knative/triggers.yaml
		{Name: "agent-step-step-ready", Type: events.TypeStepReady, Subscriber: "http://127.0.0.1:9001"},
		{Name: "dispatcher-run-finished", Type: events.TypeRunFinished, Subscriber: "http://127.0.0.1:9002/events"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("triggers:\n got %+v\nwant %+v", got, want)
	}
}

func TestLoadTriggersErrors(t *testing.T) {
	t.Parallel()
	trigger := func(spec string) string {
		return "apiVersion: eventing.knative.dev/v1\nkind: Trigger\nmetadata:\n  name: t1\nspec:\n" + spec
	}
	cases := map[string]string{
		"unresolvable ref": trigger("  filter:\n    attributes:\n      type: x\n  subscriber:\n    ref:\n      kind: Service\n      name: nowhere\n"),
		"relative uri":     trigger("  subscriber:\n    uri: /events\n"),
		"no subscriber":    trigger("  filter:\n    attributes:\n      type: x\n"),
		"cesql filters":    trigger("  filters:\n    - cesql: \"type = 'x'\"\n  subscriber:\n    uri: http://a.test/\n"),
		"bad yaml":         trigger("  subscriber: [unclosed\n"),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "t.yaml"), []byte("---\n"+doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := devbroker.LoadTriggers(dir, resolver(nil))
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), "t.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	if _, err := devbroker.LoadTriggers(filepath.Join(t.TempDir(), "missing"), resolver(nil)); err == nil {
		t.Error("missing directory: want an error")
	}
}

func TestTriggerMatches(t *testing.T) {
	t.Parallel()
	step, err := events.New(events.Source("tool-invoke"), "ev-1", events.StepReady{RunID: "run_1", ThreadID: "thread_42", StepNo: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		trigger devbroker.Trigger
		want    bool
	}{
		{devbroker.Trigger{}, true},
		{devbroker.Trigger{Type: events.TypeStepReady}, true},
		{devbroker.Trigger{Type: events.TypeRunFinished}, false},
		{devbroker.Trigger{Attributes: map[string]string{"threadid": "thread_42"}}, true},
		{devbroker.Trigger{Attributes: map[string]string{"threadid": "thread_7"}}, false},
		{devbroker.Trigger{Type: events.TypeStepReady, Attributes: map[string]string{"source": "/yuxi/tool-invoke", "runid": "run_1"}}, true},
		{devbroker.Trigger{Attributes: map[string]string{"subject": "x"}}, false},
		{devbroker.Trigger{Attributes: map[string]string{"missingext": "x"}}, false},
	}
	for _, tc := range cases {
		if got := tc.trigger.Matches(step); got != tc.want {
			t.Errorf("%+v.Matches = %v, want %v", tc.trigger, got, tc.want)
		}
	}
}
