// Package multiprocess runs every function as its own process, wired the way
// Knative wires them: each function publishes to a broker (K_SINK) over
// CloudEvents HTTP, and the broker delivers to subscribers by the Triggers in
// knative/ (loaded from the real manifests). A PingSource stand-in sends the
// dispatcher its sweep ticks.
package multiprocess

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/infra/devbroker"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

var functions = []string{"intake", "dispatcher", "agent-step", "tool-invoke", "doc-parse", "kb-index", "kb-graph", "evaluate"}

// ingressLog records the types of events the broker accepted.
type ingressLog struct {
	mu    sync.Mutex
	types map[string]int
	next  http.Handler
}

func (l *ingressLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if t := r.Header.Get("Ce-Type"); t != "" {
		l.mu.Lock()
		l.types[t]++
		l.mu.Unlock()
	}
	l.next.ServeHTTP(w, r)
}

func (l *ingressLog) count(t string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.types[t]
}

type cluster struct {
	stack   testkit.Stack
	env     testkit.Env
	ports   map[string]string
	bins    map[string]string
	procs   map[string]*testkit.Proc
	ingress *ingressLog
	broker  string
}

func (c *cluster) start(t *testing.T, name string) {
	health := "/healthz"
	if name == "intake" {
		health = "/api/system/health"
	}
	env := testkit.Env{"PORT": c.ports[name]}
	for k, v := range c.env {
		env[k] = v
	}
	c.procs[name] = testkit.StartProc(t, c.bins[name], env, health)
}

// newCluster starts every function, with extra environment for all of them.
func newCluster(t *testing.T, extra ...testkit.Env) *cluster {
	c := &cluster{stack: testkit.NewStack(t), ports: map[string]string{}, bins: map[string]string{}, procs: map[string]*testkit.Proc{}}
	pkgs := make([]string, len(functions))
	for i, f := range functions {
		pkgs[i] = "./functions/" + f
	}
	bins := testkit.BuildAll(t, pkgs...)
	for _, f := range functions {
		c.bins[f] = bins["./functions/"+f]
		c.ports[f] = testkit.FreePort(t)
	}
	triggers, err := devbroker.LoadTriggers(filepath.Join(testkit.RepoRoot(t), "knative"), func(service string) (string, bool) {
		port, ok := c.ports[service]
		return "http://127.0.0.1:" + port + "/", ok
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(triggers) < 5 {
		t.Fatalf("knative/ defines %d triggers", len(triggers))
	}
	broker := devbroker.New(triggers, devbroker.Options{MaxAttempts: 30, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	t.Cleanup(func() {
		// Deliveries still retrying against stopped processes are abandoned.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = broker.Shutdown(ctx)
	})
	c.ingress = &ingressLog{types: map[string]int{}, next: broker}
	srv := httptest.NewServer(c.ingress)
	t.Cleanup(srv.Close)
	c.broker = srv.URL
	env := testkit.Env{"K_SINK": srv.URL, "YUXI_STEP_LEASE": "2s"}
	for _, x := range extra {
		for k, v := range x {
			env[k] = v
		}
	}
	c.env = c.stack.Env(env)
	for _, f := range functions {
		c.start(t, f)
	}
	// PingSource stand-in: a sweep tick for the dispatcher through the broker.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		client, _ := cloudevents.NewClientHTTP(cloudevents.WithTarget(srv.URL))
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				ev := cloudevents.NewEvent()
				ev.SetID(events.NewID())
				ev.SetSource("/apis/v1/namespaces/yuxi/pingsources/dispatcher-sweep")
				ev.SetType(events.TypeKnativePing)
				_ = ev.SetData(cloudevents.ApplicationJSON, map[string]string{"reason": "schedule"})
				_ = client.Send(binding.WithForceBinary(ctx), ev)
			}
		}
	}()
	return c
}

func (c *cluster) client(t *testing.T) *testkit.Client {
	return (&testkit.Client{T: t, Base: c.procs["intake"].URL}).Login("admin", "admin-password")
}

func TestFunctionsRunAsSeparateProcessesOverCloudEvents(t *testing.T) {
	c := newCluster(t)
	c.stack.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user" && last.Content == "plan":
			return llmtest.Calls(llmtest.ToolCall{ID: "note", Name: "mark_for_improvement", Arguments: `{"reason":"over HTTP"}`})
		case last.Role == "tool" && last.ToolCallID == "note":
			return llmtest.Calls(llmtest.ToolCall{ID: "ask", Name: "ask_user_question", Arguments: `{"questions":[{"question":"Proceed?"}]}`})
		case last.Role == "tool" && last.ToolCallID == "ask":
			return llmtest.Text("Proceeding as you said.")
		default:
			return llmtest.Text("echo: " + last.Content)
		}
	})
	start := time.Now()
	api := c.client(t)
	th := api.Thread()
	runID := api.Submit(th, "plan", nil)["run_id"].(string)
	queued := api.Submit(th, "after", nil)
	if queued["status"] != "queued" {
		t.Fatalf("second message: %v", queued)
	}
	r := testkit.Render(api.Collect(runID, 30*time.Second))
	if r.EndStatus != "interrupted" {
		t.Fatalf("first run: %+v\n%s", r, c.logs())
	}
	t.Logf("first run done after %s", time.Since(start))
	resume := api.OK("POST", "/api/agent/runs", map[string]any{"agent_slug": "default-chatbot", "thread_id": th,
		"resume": map[string]any{"q-1": "yes"}, "created_by_run_id": runID})
	r2 := testkit.Render(api.Collect(resume["run_id"].(string), 30*time.Second))
	if r2.EndStatus != "completed" || strings.Join(r2.Texts(), "") != "Proceeding as you said." {
		t.Fatalf("resume run: %+v\n%s", r2, c.logs())
	}
	t.Logf("resume done after %s", time.Since(start))
	// The queued message runs after the resume completed (dispatcher, over HTTP).
	next := api.WaitDispatched(queued["request_id"].(string), 30*time.Second)
	if r3 := testkit.Render(api.Collect(next, 30*time.Second)); strings.Join(r3.Texts(), "") != "echo: after" {
		t.Fatalf("queued run: %+v", r3)
	}
	t.Logf("queued done after %s", time.Since(start))
	t.Logf("queued done after %s", time.Since(start))
	pool, err := postgres.Open(context.Background(), c.stack.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var marks, failures int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM improvement_marks`).Scan(&marks)
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM event_failures`).Scan(&failures)
	if marks != 1 || failures != 0 {
		t.Errorf("improvement marks %d (want 1), event failures %d (want 0)", marks, failures)
	}

	// A killed agent-step process is replaced; its run still ends.
	hold := make(chan struct{})
	c.stack.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		return llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "slow"}, {Content: " answer"}}, Block: hold, BlockAfter: 1}
	})
	th2 := api.Thread()
	slow := api.Submit(th2, "take your time", nil)["run_id"].(string)
	api.WaitStatus(slow, "running", 30*time.Second)
	t.Logf("slow running after %s", time.Since(start))
	c.procs["agent-step"].Kill()
	close(hold)
	c.start(t, "agent-step")
	r4 := testkit.Render(api.Collect(slow, 40*time.Second))
	t.Logf("slow done after %s", time.Since(start))
	for _, typ := range []string{events.TypeStepReady, events.TypeToolCallRequested, events.TypeRunFinished, events.TypeKnativePing} {
		if c.ingress.count(typ) == 0 {
			t.Errorf("no %s event crossed the broker", typ)
		}
	}

	if r4.EndStatus != "completed" || strings.Join(r4.Texts(), "") != "slow answer" {
		t.Fatalf("run after agent-step was killed: %+v\n%s", r4, c.logs())
	}
}

func TestInvalidCloudEventsAreRejectedAndNeverRetried(t *testing.T) {
	c := newCluster(t)
	url := "http://127.0.0.1:" + c.ports["agent-step"] + "/"
	cases := map[string]func(*http.Request){
		"missing id":   func(r *http.Request) { r.Header.Del("Ce-Id") },
		"bad data":     func(r *http.Request) {},
		"unknown type": func(r *http.Request) { r.Header.Set("Ce-Type", "io.yuxi.nothing.happened.v1") },
	}
	for name, mutate := range cases {
		body := `{"run_id":"r","thread_id":"t","step_no":1}`
		if name == "bad data" {
			body = `{"run_id":"r"}`
		}
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", "bad-"+strings.ReplaceAll(name, " ", "-"))
		req.Header.Set("Ce-Source", "/test")
		req.Header.Set("Ce-Type", events.TypeStepReady)
		mutate(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Malformed events are 400; an event of a type nobody handles is
		// recorded and answered 422 no_handler. The broker retries neither.
		want := http.StatusBadRequest
		if name == "unknown type" {
			want = http.StatusUnprocessableEntity
		}
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", name, resp.StatusCode, want)
		}
	}
}

func (c *cluster) logs() string {
	var b strings.Builder
	for name, p := range c.procs {
		b.WriteString("--- " + name + "\n" + p.Logs.String())
	}
	return b.String()
}
