package llm_test

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestStreamDeliversTextDeltasBeforeTheResponseEnds(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	release := make(chan struct{})
	reply := llmtest.Text("Hel", "lo, ", "world")
	reply.Block, reply.BlockAfter = release, 1 // the server holds after the first chunk
	s.Enqueue(reply)
	m := fakeModel(t, s)

	first := make(chan string, 1)
	var deltas []string
	type result struct {
		resp llm.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := m.Stream(testCtx(t), userTurn("hi"), func(d llm.Delta) error {
			if len(deltas) == 0 {
				first <- d.Content
			}
			deltas = append(deltas, d.Content)
			return nil
		})
		done <- result{resp, err}
	}()

	select {
	case got := <-first:
		if got != "Hel" {
			t.Fatalf("first delta = %q, want %q", got, "Hel")
		}
	case r := <-done:
		t.Fatalf("Stream returned before any delta was observed: %+v", r)
	}
	// The server is still holding the rest of the response, so Stream
	// cannot have returned: the delta arrived while the stream was open.
	select {
	case r := <-done:
		t.Fatalf("Stream returned while the server still held the response: %+v", r)
	default:
	}
	close(release)

	r := <-done
	if r.err != nil {
		t.Fatalf("Stream: %v", r.err)
	}
	if r.resp.Content != "Hello, world" {
		t.Errorf("content = %q", r.resp.Content)
	}
	if r.resp.FinishReason != "stop" {
		t.Errorf("finish reason = %q", r.resp.FinishReason)
	}
	want := []string{"Hel", "lo, ", "world"}
	if len(deltas) != len(want) {
		t.Fatalf("deltas = %q, want %q", deltas, want)
	}
	for i := range want {
		if deltas[i] != want[i] {
			t.Errorf("delta %d = %q, want %q", i, deltas[i], want[i])
		}
	}
}

func TestStreamOfEmptyAnswer(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Reply{})
	calls := 0
	resp, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), func(llm.Delta) error { calls++; return nil })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if calls != 0 || resp.Content != "" || resp.FinishReason != "stop" {
		t.Errorf("calls=%d resp=%+v", calls, resp)
	}
}
