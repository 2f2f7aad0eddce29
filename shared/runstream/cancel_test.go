package runstream

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

func TestCancelSignalledBeforeWatchFiresAtOnce(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})

	if ok, err := w.CancelRequested(ctx, "r"); err != nil || ok {
		t.Fatalf("CancelRequested before signal = %v, %v", ok, err)
	}
	if err := w.SignalCancel(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.CancelRequested(ctx, "r"); err != nil || !ok {
		t.Fatalf("CancelRequested after signal = %v, %v", ok, err)
	}
	ttl := rdb.PTTL(ctx, prefix+"run:cancel:r").Val()
	if ttl <= 29*time.Minute || ttl > 30*time.Minute {
		t.Errorf("cancel flag TTL = %v, want 30 min", ttl)
	}

	fired, stop := w.WatchCancel(ctx, "r")
	defer stop()
	select {
	case <-fired:
	case <-time.After(time.Second): // well under the 2s poll: the immediate check did it
		t.Fatal("WatchCancel of an already cancelled run did not fire at once")
	}
}

func TestCancelSignalledDuringWatchFiresPromptly(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})

	fired, stop := w.WatchCancel(ctx, "r")
	defer stop()
	other, stopOther := w.WatchCancel(ctx, "other")
	defer stopOther()
	select {
	case <-fired:
		t.Fatal("fired before any signal")
	default:
	}
	start := time.Now()
	if err := w.SignalCancel(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
		// Well under the 2s safety poll: the pub/sub message did it.
		if d := time.Since(start); d > time.Second {
			t.Errorf("fired after %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel not observed")
	}
	select {
	case <-other:
		t.Fatal("a cancel of r fired the watch of another run")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestWatchCancelStopReleasesWithoutFiring(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})

	fired, stop := w.WatchCancel(ctx, "r")
	if n := w.cancels.watching(); n != 1 {
		t.Fatalf("%d runs watched, want the one just registered", n)
	}
	stop()
	stop() // idempotent
	if err := w.SignalCancel(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
		t.Fatal("a stopped watch fired")
	case <-time.After(100 * time.Millisecond):
	}
	if n := w.cancels.watching(); n != 0 {
		t.Fatalf("%d runs still watched after stop", n)
	}
}

func TestWatchCancelEndsWithContext(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	w := NewWriter(rdb, Config{Prefix: prefix})
	ctx, cancel := context.WithCancel(context.Background())
	fired, stop := w.WatchCancel(ctx, "r")
	if n := w.cancels.watching(); n != 1 {
		t.Fatalf("%d runs watched, want the one just registered", n)
	}
	cancel()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("stop hung after ctx ended")
	}
	select {
	case <-fired:
		t.Fatal("ctx ending fired the cancel channel")
	default:
	}
	if n := w.cancels.watching(); n != 0 {
		t.Fatalf("%d runs still watched after ctx ended and stop", n)
	}
}
