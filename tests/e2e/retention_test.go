package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// A client that comes after a finished run's stream expired (YUXI_STREAM_TAIL)
// still gets exactly one end, with the run's status, and the final message
// from Postgres (the run's result and the thread history).
func TestClientAfterTheStreamTailReadsTheFinalMessageFromPostgres(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, testkit.Env{"YUXI_STREAM_TAIL": "300ms"})
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Kept "}, {Content: "in Postgres"}}})
	c := p.Admin
	th := c.Thread()
	runID := c.Submit(th, "remember", nil)["run_id"].(string)
	if r := testkit.Render(c.Collect(runID, 20*time.Second)); r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("live stream: %+v", r)
	}
	key := p.P.App.Stream.Config().RunKey(runID)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for p.P.App.Redis.Exists(ctx, key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stream %s still there after its tail", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
	late := testkit.Render(c.Collect(runID, 10*time.Second))
	if late.Ends != 1 || late.EndStatus != "completed" || len(late.Texts()) != 0 {
		t.Fatalf("after the tail: %+v, want exactly one end and no replayed messages", late)
	}
	res := c.OK("GET", "/api/agent/runs/"+runID+"/result", nil)
	if res["status"] != "completed" || res["output"] != "Kept in Postgres" {
		t.Fatalf("result after the tail: %v", res)
	}
	hist := c.OK("GET", "/api/chat/thread/"+th+"/history", nil)["history"].([]any)
	if len(hist) != 2 || hist[1].(map[string]any)["content"] != "Kept in Postgres" {
		t.Fatalf("history after the tail: %v", hist)
	}
}

// A temp object left by a process killed mid-write (here: planted, an hour
// old) is removed by the sweep; one being written right now is not.
func TestSweepRemovesTempObjectsOfDeadWrites(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	stale := filepath.Join(p.BlobDir, "kb~", "kb_1~", "upload~", "~tmp-deadbeef")
	fresh := filepath.Join(p.BlobDir, "kb~", "kb_1~", "~tmp-inflight")
	for _, f := range []string{stale, fresh} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("half an upload"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(stale); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweep never removed the stale temp object")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a fresh temp object was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(stale)); !os.IsNotExist(err) {
		t.Errorf("the directory the stale temp object left empty is still there: %v", err)
	}
}
