package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/ratelimit"
	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

func TestWindow(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := ratelimit.New(rdb, prefix+"rl:", 3, time.Minute)
	for i := range 3 {
		if ok, _, err := w.Allow(ctx, "203.0.113.9"); !ok || err != nil {
			t.Fatalf("call %d refused: %v", i+1, err)
		}
	}
	ok, retry, err := w.Allow(ctx, "203.0.113.9")
	if ok || err != nil || retry <= 0 || retry > time.Minute {
		t.Fatalf("fourth call: ok=%v retry=%v err=%v", ok, retry, err)
	}
	if ok, _, _ := w.Allow(ctx, "198.51.100.1"); !ok {
		t.Fatal("another key shares the budget")
	}
	// A short window expires and admits again.
	short := ratelimit.New(rdb, prefix+"rl2:", 1, 50*time.Millisecond)
	_, _, _ = short.Allow(ctx, "k")
	if ok, _, _ := short.Allow(ctx, "k"); ok {
		t.Fatal("second call in the window admitted")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ok, _, _ := short.Allow(ctx, "k"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the window never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
