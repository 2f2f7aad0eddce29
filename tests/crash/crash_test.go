// Package crash kills the platform process (SIGKILL) at every interesting
// moment of a run — at named crash points and at random times — restarts it
// on the same database and Redis, and checks that the run continues from its
// last committed step and ends, with nothing lost or duplicated, and that a
// client resuming its stream with Last-Event-ID renders each final message
// exactly once.
package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const finalAnswer = "The answer, after checking twice, is 42."

// model answers from the transcript, so that a repeated call after a crash
// gets the same answer: first two tool calls, then a slowly streamed text.
func model(req llmtest.ChatRequest) llmtest.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		var chunks []llmtest.Chunk
		for _, w := range strings.SplitAfter(finalAnswer, " ") {
			chunks = append(chunks, llmtest.Chunk{Content: w, Delay: 50 * time.Millisecond})
		}
		return llmtest.Reply{Chunks: chunks}
	}
	if last.Role == "user" && strings.HasPrefix(last.Content, "follow-up") {
		return llmtest.Text("follow-up done")
	}
	return llmtest.Reply{ToolCalls: []llmtest.ToolCall{
		{ID: "call_note_1", Name: "mark_for_improvement", Arguments: `{"reason":"first lesson"}`},
		{ID: "call_note_2", Name: "mark_for_improvement", Arguments: `{"reason":"second lesson"}`},
	}, Delay: 20 * time.Millisecond}
}

type scenario struct {
	name    string
	crashAt string        // named crash point, or ""
	killAt  time.Duration // external SIGKILL after submission when crashAt is ""
}

func TestRunsSurviveSIGKILL(t *testing.T) {
	bin := testkit.Build(t, "./infra/local/cmd/yuxi-server")
	scenarios := []scenario{
		{name: "after-claim", crashAt: "step.claimed"},
		{name: "mid-stream", crashAt: "step.streaming"},
		{name: "before-step-commit", crashAt: "step.before_commit"},
		{name: "after-step-commit", crashAt: "step.after_commit"},
		{name: "before-tool-result", crashAt: "tool.before_complete"},
		{name: "between-tool-result-and-next-step", crashAt: "tool.after_complete:2"},
		{name: "before-next-dispatch", crashAt: "dispatch.before_next"},
		{name: "second-step-claim", crashAt: "step.claimed:2"},
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 0; i < 6; i++ {
		d := time.Duration(20+rng.IntN(650)) * time.Millisecond
		scenarios = append(scenarios, scenario{name: fmt.Sprintf("random-kill-%d-%s", i, d), killAt: d})
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, bin, sc)
		})
	}
}

func runScenario(t *testing.T, bin string, sc scenario) {
	st := testkit.NewStack(t)
	st.LLM.Handle(model)
	port := testkit.FreePort(t)
	env := st.Env(testkit.Env{"PORT": port})
	crashEnv := st.Env(testkit.Env{"PORT": port, "YUXI_CRASH_AT": sc.crashAt})

	p1 := testkit.StartProc(t, bin, crashEnv, "/api/system/health")
	c := (&testkit.Client{T: t, Base: p1.URL}).Login("admin", "admin-password")
	th := c.Thread()
	// The process may die while answering: a client then does not know whether
	// its message was taken, and retries it (with the same request id) later.
	runID := ""
	if first, err := trySubmit(c, th, "what is the answer?", "req-crash-1"); err == nil {
		runID = first["run_id"].(string)
	}
	_, _ = trySubmit(c, th, "follow-up please", "req-crash-2")

	// A client follows the stream until the process dies.
	var mu sync.Mutex
	var seen []testkit.Event
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		if runID == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.Stream(ctx, "/api/agent/runs/"+runID+"/events", "", func(e testkit.Event) bool {
			mu.Lock()
			seen = append(seen, e)
			mu.Unlock()
			return e.Event != "end"
		})
	}()

	if sc.crashAt == "" {
		time.Sleep(sc.killAt)
		p1.Kill()
	} else if !p1.Exited(20 * time.Second) {
		t.Fatalf("crash point %s was never reached\n%s", sc.crashAt, p1.Logs.String())
	}
	<-streamDone

	// Restart on the same port, database and Redis; the client resumes.
	p2 := testkit.StartProc(t, bin, env, "/api/system/health")
	c2 := c.As(c.Token)
	c2.Base = p2.URL
	// Retrying the submissions is safe: request ids make them idempotent.
	again := c2.Submit(th, "what is the answer?", map[string]any{"meta": map[string]any{"request_id": "req-crash-1"}})
	if runID != "" && again["run_id"] != runID {
		t.Fatalf("resubmission after the crash changed the run: %v", again)
	}
	runID, _ = again["run_id"].(string)
	if runID == "" {
		t.Fatalf("first message not dispatched after restart: %v", again)
	}
	second := c2.Submit(th, "follow-up please", map[string]any{"meta": map[string]any{"request_id": "req-crash-2"}})

	mu.Lock()
	partial := testkit.Render(seen)
	lastID := ""
	if len(seen) > 0 {
		lastID = seen[len(seen)-1].ID
	}
	ended := len(seen) > 0 && seen[len(seen)-1].Event == "end"
	mu.Unlock()
	if !ended {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		_, err := c2.Stream(ctx, "/api/agent/runs/"+runID+"/events", lastID, func(e testkit.Event) bool {
			seen = append(seen, e)
			return e.Event != "end"
		})
		cancel()
		if err != nil {
			t.Fatalf("resume stream: %v\n%s", err, p2.Logs.String())
		}
	}
	r := testkit.Render(seen)
	if r.Ends != 1 || r.EndStatus != "completed" {
		var trail []string
		for _, e := range seen {
			trail = append(trail, e.Event+"@"+e.ID)
		}
		t.Fatalf("run %s: ends=%d status=%q (resumed after %q, ended before the crash %v; events %v)\n%s",
			runID, r.Ends, r.EndStatus, lastID, ended, trail, p2.Logs.String())
	}
	var texts []string
	for _, s := range r.Texts() {
		if s != "" {
			texts = append(texts, s)
		}
	}
	if len(texts) != 1 || texts[0] != finalAnswer {
		t.Fatalf("rendered messages %q; want exactly one %q", texts, finalAnswer)
	}
	if sc.crashAt == "step.streaming" {
		// The client saw part of the answer before the crash; the retried step
		// streamed it again, and only the retry marker keeps it from showing twice.
		if got := strings.Join(partial.Texts(), ""); got == "" || got == finalAnswer {
			t.Errorf("mid-stream crash should leave a partial answer before the crash, got %q", got)
		}
		if r.Retries < 1 {
			t.Errorf("no retry marker after a mid-stream crash")
		}
	}

	// The queued follow-up ran after the crash too.
	secondRun := c2.WaitDispatched(second["request_id"].(string), 40*time.Second)
	if r2 := testkit.Render(c2.Collect(secondRun, 40*time.Second)); r2.EndStatus != "completed" {
		t.Fatalf("follow-up: %+v", r2)
	}

	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	checkFacts(t, pool, runID, th)
}

// trySubmit posts a message, reporting a dropped connection as an error.
func trySubmit(c *testkit.Client, threadID, query, requestID string) (map[string]any, error) {
	body := fmt.Sprintf(`{"query":%q,"agent_slug":"default-chatbot","thread_id":%q,"meta":{"request_id":%q}}`, query, threadID, requestID)
	req, _ := http.NewRequest("POST", c.Base+"/api/agent/runs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %d: %v", resp.StatusCode, err)
	}
	return out, nil
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// checkFacts verifies that nothing was lost or duplicated in the database.
func checkFacts(t *testing.T, pool *pgxpool.Pool, runID, threadID string) {
	t.Helper()
	facts := map[string][2]int{
		"requests":            {count(t, pool, `SELECT count(*) FROM agent_run_requests`), 2},
		"user messages":       {count(t, pool, `SELECT count(*) FROM messages WHERE role = 'user'`), 2},
		"runs":                {count(t, pool, `SELECT count(*) FROM agent_runs`), 2},
		"completed runs":      {count(t, pool, `SELECT count(*) FROM agent_runs WHERE status = 'completed'`), 2},
		"steps of the run":    {count(t, pool, `SELECT count(*) FROM agent_run_steps WHERE run_id = $1`, runID), 2},
		"contiguous steps":    {count(t, pool, `SELECT count(*) FROM agent_run_steps WHERE run_id = $1 AND step_no IN (1, 2)`, runID), 2},
		"assistant messages":  {count(t, pool, `SELECT count(*) FROM messages WHERE role = 'assistant' AND run_id = $1`, runID), 2},
		"tool calls":          {count(t, pool, `SELECT count(*) FROM tool_calls WHERE run_id = $1 AND status = 'success'`, runID), 2},
		"improvement marks":   {count(t, pool, `SELECT count(*) FROM improvement_marks WHERE run_id = $1`, runID), 2},
		"final answer stored": {count(t, pool, `SELECT count(*) FROM agent_runs r JOIN messages m ON m.id = r.output_message_id WHERE r.id = $1 AND m.content = $2`, runID, finalAnswer), 1},
		"transcript entries":  {count(t, pool, `SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE c.thread_id = $1 AND m.transcript_seq IS NOT NULL`, threadID), 5},
		"permanent failures":  {count(t, pool, `SELECT count(*) FROM event_failures`), 0},
		"unfinished attempts": {count(t, pool, `SELECT count(*) FROM agent_run_attempts WHERE finished_at IS NULL`), 0},
		"dispatched requests": {count(t, pool, `SELECT count(*) FROM agent_run_requests WHERE status = 'dispatched'`), 2},
	}
	for name, f := range facts {
		if f[0] != f[1] {
			t.Errorf("%s: %d, want %d", name, f[0], f[1])
		}
	}
}
