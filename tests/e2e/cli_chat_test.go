package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestCLIChatProxiesTheAgentWithoutExposingTheKey runs `yuxi chat --no-open`
// against the platform and talks to its local page over HTTP as the page's
// script does: messages go to the channel route, answers stream through the
// local proxy, /state answers, and the API key never appears in anything the
// local server sends. Requests without the page's token or with another Host
// are refused.
func TestCLIChatProxiesTheAgentWithoutExposingTheKey(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, "./infra/cli/cmd/yuxi")
	p := testkit.StartLocal(t, nil)
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	key := p.Admin.APIKey("cli-chat")
	for _, args := range [][]string{{"remote", "add", "local", p.URL}, {"login", "--api-key", key}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("yuxi %v: %v\n%s", args, err, out)
		}
	}

	cmd := exec.Command(bin, "chat", "--no-open", "--agent-slug", "default-chatbot")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	lines := bufio.NewScanner(stdout)
	var link string
	for lines.Scan() {
		if m := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?t=[0-9a-f]+`).FindString(lines.Text()); m != "" {
			link = m
			break
		}
	}
	if link == "" {
		t.Fatalf("yuxi chat printed no address; stderr: %s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout); exited <- cmd.Wait() }()
	base, token, _ := strings.Cut(link, "/?t=")
	leaks := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(key)) {
			t.Fatalf("%s contains the API key", what)
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	do := func(method, path string, hdr map[string]string, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		leaks(method+" "+path, b)
		for k, vs := range resp.Header {
			leaks("header "+k, []byte(strings.Join(vs, " ")))
		}
		return resp.StatusCode, b
	}
	code := func(b []byte) string {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return e.Error.Code
	}

	// The page: only with the token, only for 127.0.0.1/localhost.
	if st, b := do("GET", "/", nil, ""); st != 403 || code(b) != "bad_token" {
		t.Fatalf("page without token: %d %s", st, b)
	}
	if st, b := do("GET", "/?t=wrong", nil, ""); st != 403 || code(b) != "bad_token" {
		t.Fatalf("page with a wrong token: %d %s", st, b)
	}
	port := base[strings.LastIndex(base, ":")+1:]
	if st, b := do("GET", "/?t="+token, map[string]string{"Host": "attacker.example:" + port}, ""); st != 403 || code(b) != "bad_host" {
		t.Fatalf("page under another host name (DNS rebinding): %d %s", st, b)
	}
	st, page := do("GET", "/?t="+token, nil, "")
	if st != 200 || !bytes.Contains(page, []byte("default-chatbot")) || !bytes.Contains(page, []byte(token)) {
		t.Fatalf("page: %d %.300s", st, page)
	}
	if st, _ := do("GET", "/?t="+token, map[string]string{"Host": "localhost:" + port}, ""); st != 200 {
		t.Fatalf("page as localhost: %d", st)
	}

	// Sending needs the token in a header (a form post from another site cannot set one).
	send := func(chatID, text string) (int, map[string]any, []byte) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"chat_id": chatID, "text": text})
		st, b := do("POST", "/api/send", map[string]string{"X-Yuxi-Chat-Token": token, "Content-Type": "application/json"}, string(body))
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return st, m, b
	}
	if st, b := do("POST", "/api/send?t="+token, map[string]string{"Content-Type": "application/json"}, `{"chat_id":"s1","text":"hi"}`); st != 403 {
		t.Fatalf("send with the token only in the query: %d %s", st, b)
	}
	if st, _, b := send("../etc", "hi"); st != 422 || code(b) != "invalid_chat_id" {
		t.Fatalf("bad chat id: %d %s", st, b)
	}
	if st, b := do("POST", "/api/send", map[string]string{"X-Yuxi-Chat-Token": token}, "{"); st != 400 || code(b) != "invalid_json" {
		t.Fatalf("malformed body: %d %s", st, b)
	}
	if st, _, b := send("s1", "   "); st != 422 || code(b) != "empty_query" {
		t.Fatalf("empty message (the platform's refusal passed through): %d %s", st, b)
	}

	p.LLM.Enqueue(llmtest.Text("Hello ", "from ", "the agent."))
	st, out, raw := send("s1", "hi there")
	if st != 200 || out["kind"] != "run" || out["stream_url"] == nil {
		t.Fatalf("send: %d %s", st, raw)
	}
	wantThread := invoke.HashID("channel_", "admin:cli:yuxi-chat:s1")
	if out["thread_id"] != wantThread || out["channel"] != "cli" {
		t.Fatalf("thread: %v (want %s)", out, wantThread)
	}

	// The run's stream through the local proxy, token in the query (EventSource cannot send headers).
	local := &testkit.Client{T: t, Base: base, Token: "not-the-key"}
	streamURL := out["stream_url"].(string)
	if st, b := do("GET", streamURL, nil, ""); st != 403 {
		t.Fatalf("stream without token: %d %s", st, b)
	}
	if st, b := do("GET", "/api/agent/runs/x/../../threads/events?t="+token, nil, ""); st != 404 {
		t.Fatalf("a path outside the run streams: %d %s", st, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var text strings.Builder
	var lastID, endStatus string
	if _, err := local.Stream(ctx, streamURL+"?t="+token, "", func(e testkit.Event) bool {
		leaks("event "+e.Event, e.Data)
		lastID = e.ID
		if e.Event == "messages" {
			for _, it := range e.Payload()["items"].([]any) {
				se, _ := it.(map[string]any)["stream_event"].(map[string]any)
				if se["type"] == "message_delta" {
					text.WriteString(se["content"].(string))
				}
			}
		}
		if e.Event == "end" {
			endStatus, _ = e.Payload()["status"].(string)
			return false
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if text.String() != "Hello from the agent." || endStatus != "completed" {
		t.Fatalf("streamed %q, end %q", text.String(), endStatus)
	}
	// Resuming after the last id sends nothing twice: the stream has only what follows (nothing).
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	replayed := 0
	_, _ = local.Stream(ctx2, streamURL+"?t="+token, lastID, func(e testkit.Event) bool {
		if e.Event == "messages" {
			replayed++
		}
		return e.Event != "end"
	})
	if replayed != 0 {
		t.Fatalf("resume after %s replayed %d message events", lastID, replayed)
	}

	// Slash commands go to the same thread.
	st, state, raw := send("s1", "/state")
	lr, _ := state["state"].(map[string]any)["latest_run"].(map[string]any)
	if st != 200 || state["kind"] != "command" || lr == nil || lr["status"] != "completed" {
		t.Fatalf("/state: %d %s", st, raw)
	}
	if st, _, b := send("s1", "/approve"); st != 409 || code(b) != "no_pending_approval" {
		t.Fatalf("/approve with nothing pending: %d %s", st, b)
	}
	// A new session is a new thread.
	p.LLM.Enqueue(llmtest.Text("fresh"))
	if _, out2, raw := send("s2", "hello again"); out2["thread_id"] == wantThread || out2["kind"] != "run" {
		t.Fatalf("new session: %s", raw)
	}

	// Ctrl-C stops the server and exits 0.
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("yuxi chat exit: %v; stderr %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("yuxi chat did not stop on SIGINT")
	}
}
