package approval_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	pol := map[string]string{"read_file": "confirm", "execute": "allow", "web_search": "block", "ask_user_question": "confirm", "ls": "bogus"}
	for _, c := range []struct {
		mode, tool, want string
	}{
		{"default", "write_file", approval.Confirm},
		{"", "edit_file", approval.Confirm},
		{"always_trust", "write_file", approval.Allow},
		{"default", "execute", approval.Allow}, // the agent's policy wins over the default set
		{"default", "read_file", approval.Confirm},
		{"always_trust", "read_file", approval.Allow},
		{"always_trust", "web_search", approval.Block}, // block stays block
		{"default", "ask_user_question", approval.Allow},
		{"default", "ls", approval.Allow}, // an invalid policy falls back to the default
	} {
		if got := approval.Decide(c.mode, pol, c.tool); got != c.want {
			t.Errorf("Decide(%q, %q) = %q, want %q", c.mode, c.tool, got, c.want)
		}
	}
}

func TestDecisionsAndMatch(t *testing.T) {
	t.Parallel()
	if _, ok, err := approval.Decisions(json.RawMessage(`{"q-1":"yes"}`)); ok || err != nil {
		t.Fatalf("answer read as decisions: %v %v", ok, err)
	}
	for _, bad := range []string{`{"decisions":[]}`, `{"decisions":[{"type":"maybe"}]}`, `{"decisions":"approve"}`} {
		if _, ok, err := approval.Decisions(json.RawMessage(bad)); !ok || err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	ds, ok, err := approval.Decisions(json.RawMessage(`{"decisions":[{"type":"reject","message":"no"}]}`))
	if !ok || err != nil || len(ds) != 1 || ds[0].Message != "no" {
		t.Fatalf("decisions: %v %v %v", ds, ok, err)
	}
	all, err := approval.Match(ds, 3)
	if err != nil || len(all) != 3 || all[2].Type != approval.Reject {
		t.Fatalf("one decision for three calls: %v %v", all, err)
	}
	two := []approval.Decision{{Type: "approve"}, {Type: "reject"}}
	if _, err := approval.Match(two, 3); !errors.Is(err, approval.ErrDecisionCount) {
		t.Fatalf("2 decisions for 3 calls: %v", err)
	}
	if fe, ok := failure.As(approval.ErrExpired); !ok || fe.Code != "approval_expired" || fe.Kind != failure.KindConflict {
		t.Fatalf("expired error: %v", approval.ErrExpired)
	}
}

func TestPendingRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := approval.NewPending("execute", "call_1", `{"command":"ls"}`, now, 0)
	b, _ := json.Marshal(p)
	s := string(b)
	got, ok := approval.Parse(&s)
	if !ok || !got.ExpiresAt.Equal(now.Add(approval.DefaultTTL)) || got.Approval.ActionRequests[0].Name != "execute" ||
		string(got.Approval.ActionRequests[0].Args) != `{"command":"ls"}` || approval.Approved(&s) {
		t.Fatalf("pending: %+v", got)
	}
	got.Decision = approval.Approve
	b, _ = json.Marshal(got)
	s = string(b)
	if !approval.Approved(&s) {
		t.Fatal("approved call not recognised")
	}
	other := `{"questions":[]}`
	if _, ok := approval.Parse(&other); ok {
		t.Fatal("a question read as an approval")
	}
	raw := approval.NewPending("write_file", "c", "not json", now, time.Hour)
	if string(raw.Approval.ActionRequests[0].Args) != `"not json"` {
		t.Fatalf("invalid args kept as %s", raw.Approval.ActionRequests[0].Args)
	}
}
