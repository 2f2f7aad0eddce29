package sandbox_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// Thread ids the provisioner refuses are mapped to a stable id it accepts;
// the others are kept, so existing threads keep their files.
func TestThreadScopeMapsIDsTheProvisionerRefuses(t *testing.T) {
	ok := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	for _, id := range []string{"0f3a9c", "invocation_ab12", "channel_ff", "openai_0e", "t-1.x"} {
		if got := sandbox.ThreadScope("alice", id); got.FileThread != id || got.UID != "alice" {
			t.Errorf("%q mapped to %+v", id, got)
		}
	}
	seen := map[string]string{}
	for _, id := range []string{"ops chat:42", "-lead", "shared", "日本語", strings.Repeat("x", 129), "a/b", "..", "x\x00y"} {
		got := sandbox.FileThreadID(id)
		if !ok.MatchString(got) || got == "shared" || !strings.HasPrefix(got, "t-") {
			t.Errorf("%q → %q: not a provisioner id", id, got)
		}
		if got != sandbox.FileThreadID(id) {
			t.Errorf("%q: not stable", id)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q share %q", prev, id, got)
		}
		seen[got] = id
	}
	// A chosen id shaped like a mapped one is mapped again: it never lands
	// in the thread whose mapped id it copies.
	victim := sandbox.FileThreadID("ops chat:42")
	if got := sandbox.FileThreadID(victim); got == victim || !ok.MatchString(got) {
		t.Errorf("a chosen %q reaches %q", victim, got)
	}
	if sandbox.FileThreadID("") != "" {
		t.Error("an empty thread (the workspace scope) must stay empty")
	}
}
