package llm_test

import (
	"errors"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestOnDeltaErrorAbortsTheStream(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("first", "second")
	// The server never finishes: Stream can only return because it stopped
	// reading when onDelta failed.
	reply.Block, reply.BlockAfter = make(chan struct{}), 1
	s.Enqueue(reply)
	errStop := errors.New("client went away")
	calls := 0
	resp, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), func(llm.Delta) error {
		calls++
		return errStop
	})
	if err != errStop {
		t.Fatalf("err = %v, want exactly the onDelta error", err)
	}
	if calls != 1 {
		t.Errorf("onDelta called %d times after failing", calls)
	}
	if resp.Content != "first" {
		t.Errorf("partial response = %+v", resp)
	}
	if llm.IsRetryable(err) {
		t.Error("the caller's own error is not a provider failure")
	}
}
