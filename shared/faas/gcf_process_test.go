//go:build unix

package faas_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestFunctionsFrameworkProcess builds testdata/gcffn and runs it as Cloud
// Run functions do (FUNCTION_TARGET and PORT set), so the real
// functions-framework-go server and registry are exercised, then posts
// CloudEvents to it.
func TestFunctionsFrameworkProcess(t *testing.T) {
	t.Parallel()
	goTool := needTool(t, "go")
	bin := buildTestFunction(t, goTool, "gcffn")
	port := freePort(t)
	cmd := exec.CommandContext(t.Context(), bin)
	cmd.Env = childEnv("FUNCTION_TARGET=YuxiTestFunction", "PORT="+port)
	proc := start(t, cmd)
	proc.waitLine("ready")
	url := "http://" + net.JoinHostPort("127.0.0.1", port) + "/"

	post := func(id, runID string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url,
			strings.NewReader(`{"run_id":"`+runID+`","thread_id":"thread_42","step_no":2}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", id)
		req.Header.Set("Ce-Source", "//pubsub.googleapis.com/projects/yuxi/topics/agent-step")
		req.Header.Set("Ce-Type", "io.yuxi.agent.step.ready.v1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if status, body := post("ev-ok", "run_ok"); status != http.StatusOK {
		t.Fatalf("ack: status %d %s", status, body)
	}
	proc.waitLine("handled run_ok")

	if status, body := post("ev-retry", "run_retry"); status < 500 {
		t.Errorf("retry: status %d %s, want 5xx so Eventarc redelivers", status, body)
	}

	if status, body := post("ev-perm", "run_perm"); status != http.StatusOK {
		t.Errorf("permanent failure: status %d %s, want 200 (acknowledged, recorded)", status, body)
	}
	proc.waitLine("recorded ev-perm")

	// An Eventarc Pub/Sub trigger's messagePublished event: the Yuxi event in
	// message.data is delivered, an unroutable one recorded and acknowledged.
	eventarc := func(headers map[string]string, body []byte, path ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+strings.Join(path, ""), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	headers, body := eventarcFixture(t)
	if status, b := eventarc(headers, body); status != http.StatusOK {
		t.Errorf("eventarc messagePublished: status %d %s", status, b)
	}
	proc.waitLine("handled run_ok_structured")
	unroutable := readFixture(t, "pubsub_push_unroutable.json")
	if status, b := eventarc(asEventarc(t, unroutable), unroutable); status != http.StatusOK {
		t.Errorf("eventarc unroutable: status %d %s, want 200 (acknowledged, recorded)", status, b)
	}
	proc.waitLine("recorded 7e8f9a0b1c2d43e5f60718293a4b5c6d")
	// A plain Pub/Sub push POST: the framework turns it into a messagePublished
	// event (its legacy push conversion, which wants the topic in the push
	// endpoint's path), and the router unwraps that.
	if status, b := eventarc(pushHeaders, readFixture(t, "pubsub_push_binary.json"), "projects/yuxi-prod/topics/yuxi-events"); status != http.StatusOK {
		t.Errorf("pub/sub push: status %d %s", status, b)
	}
	proc.waitLine("handled run_ok_binary")

	// The framework itself refuses requests that are not CloudEvents.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("not a CloudEvent: status %d, want 4xx", resp.StatusCode)
	}

	// SIGTERM ends Serve and the process exits cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}
