package logring_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/logring"
)

func TestRingKeepsTheLastLinesAndFiltersLevels(t *testing.T) {
	r := logring.New(3)
	log := slog.New(r.Tee(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))).With("function", "intake")
	log.Info("one")
	log.Warn("two", "k", 1)
	log.Error("three")
	log.Info("four", "thread", "t1")
	got := r.Lines(nil)
	if len(got) != 3 || !strings.Contains(got[0], " - WARN - intake - two k=1") || !strings.HasSuffix(got[2], " - INFO - intake - four thread=t1") {
		t.Fatalf("lines = %q", got)
	}
	if e := r.Lines(map[string]bool{"ERROR": true, "WARN": true}); len(e) != 2 || !strings.Contains(e[1], "three") {
		t.Fatalf("filtered = %q", e)
	}
	log.Info(strings.Repeat("x", 2*logring.MaxLine))
	if l := r.Lines(nil); len(l[2]) > logring.MaxLine {
		t.Fatalf("a line of %d bytes was kept", len(l[2]))
	}
}
