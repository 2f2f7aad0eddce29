package crash

// The sandbox provisioner and the platform die mid tool call (SIGKILL):
//   - the provisioner is killed while execute's command runs: the call
//     fails with sandbox_unavailable, is retried (never hangs), and once a
//     provisioner is back on the same volume the command runs again and
//     the run completes with its result;
//   - the platform is killed after the user approved an execute call, just
//     after the command ran and before its result was recorded: after the
//     restart the call is delivered again and the provisioner answers it
//     from its idempotency record: the command ran exactly once.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const provisionerToken = "crash-test-provisioner-token-0123456789abcdef"

// provisionerEnv is the environment of a bwrap provisioner on volume dir.
func provisionerEnv(t *testing.T, dir, port string) testkit.Env {
	t.Helper()
	// The sandbox's uid must reach the volume below the test's temp dir.
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	return testkit.Env{"SANDBOX_PROVISIONER_TOKEN": provisionerToken, "PROVISIONER_BACKEND": "bwrap",
		"SANDBOX_VOLUME_DIR": filepath.Join(dir, "volume"), "PORT": port}
}

// execModel runs one execute call, then answers with its result.
func execModel(query, command string) func(req llmtest.ChatRequest) llmtest.Reply {
	return func(req llmtest.ChatRequest) llmtest.Reply {
		if req.LastUserMessage() != query {
			return llmtest.Text("?")
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return llmtest.Text("exec said: " + strings.TrimSpace(last.Content))
		}
		return llmtest.Calls(llmtest.ToolCall{ID: "call_exec", Name: "execute", Arguments: `{"command":"` + command + `"}`})
	}
}

func waitForFile(t *testing.T, path, content string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if b, err := os.ReadFile(path); err == nil && string(b) == content {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("timed out waiting for %s to hold %q (has %q)", path, content, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProvisionerSIGKILLMidExecIsRetried(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err != nil {
		t.Skip("no cgroup v1 pids hierarchy on this host") // the CI host has one
	}
	bins := testkit.BuildAll(t, "./infra/local/cmd/yuxi-server", "./infra/sandbox-provisioner/cmd/sandbox-provisioner")
	dir := t.TempDir()
	penv := provisionerEnv(t, dir, testkit.FreePort(t))
	prov := testkit.StartProc(t, bins["./infra/sandbox-provisioner/cmd/sandbox-provisioner"], penv, "/health")

	const query = "run the slow job"
	st := testkit.NewStack(t)
	st.LLM.Handle(execModel(query, `echo started >> outputs/starts.log; sleep 2; echo finished`))
	srv := testkit.StartProc(t, bins["./infra/local/cmd/yuxi-server"], st.Env(testkit.Env{"PORT": testkit.FreePort(t),
		"SANDBOX_PROVISIONER_URL": prov.URL, "SANDBOX_PROVISIONER_TOKEN": provisionerToken}), "/api/system/health")
	c := (&testkit.Client{T: t, Base: srv.URL}).Login("admin", "admin-password")
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "kill the provisioner"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th,
		"tool_approval_mode": "always_trust"})["run_id"].(string)

	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	starts := filepath.Join(dir, "volume", "threads", th, "user-data", "outputs", "starts.log")
	waitForFile(t, starts, "started\n", 60*time.Second)
	prov.Kill() // mid-exec: the command sleeps
	if !prov.Exited(10 * time.Second) {
		t.Fatal("the provisioner survived SIGKILL")
	}
	// The call fails (sandbox_unavailable) and is retried while no
	// provisioner answers; the run is neither ended nor hung: it waits.
	time.Sleep(1500 * time.Millisecond)
	if n := count(t, pool, `SELECT count(*) FROM agent_runs WHERE id = $1 AND finished_at IS NULL`, runID); n != 1 {
		t.Fatalf("the run ended while the provisioner was down")
	}
	testkit.StartProc(t, bins["./infra/sandbox-provisioner/cmd/sandbox-provisioner"], penv, "/health")

	r := testkit.Render(c.Collect(runID, 90*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" || strings.Join(r.Texts(), "") != "exec said: finished\n[exit code 0]" {
		t.Fatalf("run %s after the provisioner came back: %+v %q\n%s", runID, r, r.Texts(), srv.Logs.String())
	}
	// Retried: the command started again on the new provisioner.
	if b, _ := os.ReadFile(starts); string(b) != "started\nstarted\n" {
		t.Fatalf("starts.log %q: want the killed start and the retried one", b)
	}
	if n := count(t, pool, `SELECT count(*) FROM tool_calls WHERE run_id = $1 AND tool_name = 'execute' AND status = 'success'`, runID); n != 1 {
		t.Fatalf("%d recorded execute results, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM event_failures`); n != 0 {
		t.Fatalf("%d permanent event failures", n)
	}
}

func TestApprovedExecRunsOnceAcrossAPlatformSIGKILL(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err != nil {
		t.Skip("no cgroup v1 pids hierarchy on this host")
	}
	bins := testkit.BuildAll(t, "./infra/local/cmd/yuxi-server", "./infra/sandbox-provisioner/cmd/sandbox-provisioner")
	dir := t.TempDir()
	prov := testkit.StartProc(t, bins["./infra/sandbox-provisioner/cmd/sandbox-provisioner"], provisionerEnv(t, dir, testkit.FreePort(t)), "/health")

	const query = "count a run"
	st := testkit.NewStack(t)
	st.LLM.Handle(execModel(query, `echo ran >> outputs/runs.log; echo counted`))
	port := testkit.FreePort(t)
	env := st.Env(testkit.Env{"PORT": port, "SANDBOX_PROVISIONER_URL": prov.URL, "SANDBOX_PROVISIONER_TOKEN": provisionerToken})
	crashEnv := st.Env(testkit.Env{"PORT": port, "SANDBOX_PROVISIONER_URL": prov.URL, "SANDBOX_PROVISIONER_TOKEN": provisionerToken,
		// hit 1 records the approval interrupt; hit 2 is the approved call,
		// after its command ran and before its result is recorded.
		"YUXI_CRASH_AT": "tool.before_complete:2"})
	bin := bins["./infra/local/cmd/yuxi-server"]
	p1 := testkit.StartProc(t, bin, crashEnv, "/api/system/health")
	c := (&testkit.Client{T: t, Base: p1.URL}).Login("admin", "admin-password")
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "approve then crash"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th})["run_id"].(string)
	if r := testkit.Render(c.Collect(runID, 60*time.Second)); r.EndStatus != "interrupted" {
		t.Fatalf("first run: %+v", r)
	}
	runs := filepath.Join(dir, "volume", "threads", th, "user-data", "outputs", "runs.log")
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Fatalf("the command ran before approval: %v", err)
	}
	resume := c.OK("POST", "/api/agent/runs", map[string]any{"agent_slug": "default-chatbot", "thread_id": th, "created_by_run_id": runID,
		"resume": map[string]any{"decisions": []map[string]any{{"type": "approve"}}}})["run_id"].(string)
	if !p1.Exited(60 * time.Second) {
		t.Fatalf("crash point never reached\n%s", p1.Logs.String())
	}
	waitForFile(t, runs, "ran\n", time.Second) // it ran before the crash

	p2 := testkit.StartProc(t, bin, env, "/api/system/health")
	c2 := c.As(c.Token)
	c2.Base = p2.URL
	r := testkit.Render(c2.Collect(resume, 90*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" || strings.Join(r.Texts(), "") != "exec said: counted\n[exit code 0]" {
		t.Fatalf("resume run %s: %+v %q\n%s", resume, r, r.Texts(), p2.Logs.String())
	}
	if b, _ := os.ReadFile(runs); string(b) != "ran\n" {
		t.Fatalf("runs.log %q: the approved command must run exactly once", b)
	}
	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n := count(t, pool, `SELECT count(*) FROM tool_calls WHERE tool_name = 'execute' AND status = 'success'`); n != 1 {
		t.Fatalf("%d recorded execute results, want 1", n)
	}
}
