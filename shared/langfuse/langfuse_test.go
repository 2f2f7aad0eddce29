package langfuse

import (
	"encoding/json"
	"testing"
)

func TestTaskText(t *testing.T) {
	for raw, want := range map[string]string{
		`"plain task"`:                        "plain task",
		`{"input": "from input"}`:             "from input",
		`{"question": "from question"}`:       "from question",
		`{"prompt": " p ", "other": 1}`:       "p",
		`{"output": "expected"}`:              "expected",
		`{"nothing": "here"}`:                 "",
		`42`:                                  "",
		`{"query": "", "question": "second"}`: "second",
	} {
		if got := TaskText(json.RawMessage(raw)); got != want {
			t.Errorf("TaskText(%s) = %q, want %q", raw, got, want)
		}
	}
	if DeriveID("trace", "srun_1", 0) != DeriveID("trace", "srun_1", 0) || DeriveID("trace", "srun_1", 0) == DeriveID("trace", "srun_1", 1) {
		t.Error("derived ids are not stable per (kind, run, item)")
	}
	if New("", "pk", "sk") != nil || New("http://x", "pk", "sk") == nil {
		t.Error("New: all three settings or nothing")
	}
}
