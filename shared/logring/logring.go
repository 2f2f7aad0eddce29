// Package logring keeps a process's most recent log lines in memory for
// GET /api/system/logs (the original read the API process's log file; a
// function instance has no file to read, so each process answers with its
// own last lines). Bounded: at most Size lines of at most MaxLine bytes.
//
// Imported by: shared/bootstrap, functions/intake.
// May import: stdlib.
package logring

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// MaxLine bounds one stored line (bytes); longer lines are cut.
const MaxLine = 4096

// Ring is the last lines logged, oldest first.
type Ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

// New returns a ring of size lines (1000 when size <= 0).
func New(size int) *Ring {
	if size <= 0 {
		size = 1000
	}
	return &Ring{lines: make([]string, size)}
}

func (r *Ring) add(line string) {
	if len(line) > MaxLine {
		line = strings.ToValidUTF8(line[:MaxLine], "")
	}
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

// Lines returns the stored lines, oldest first, keeping only those whose
// level is in levels (upper case; empty: all).
func (r *Ring) Lines(levels map[string]bool) []string {
	r.mu.Lock()
	var all []string
	if r.full {
		all = append(all, r.lines[r.next:]...)
	}
	all = append(all, r.lines[:r.next]...)
	r.mu.Unlock()
	if len(levels) == 0 {
		return all
	}
	out := all[:0:0]
	for _, l := range all {
		// "2006-01-02 15:04:05,000 - LEVEL - …", as the original's format.
		if parts := strings.SplitN(l, " - ", 3); len(parts) >= 2 && levels[strings.TrimSpace(parts[1])] {
			out = append(out, l)
		}
	}
	return out
}

// Tee returns a handler that passes records to next and stores each as a
// line in the original's format: time - LEVEL - function - message attrs.
func (r *Ring) Tee(next slog.Handler) slog.Handler { return &tee{next: next, ring: r} }

type tee struct {
	next  slog.Handler
	ring  *Ring
	attrs []slog.Attr
	group string
}

func (t *tee) Enabled(ctx context.Context, l slog.Level) bool { return t.next.Enabled(ctx, l) }

func (t *tee) Handle(ctx context.Context, rec slog.Record) error {
	var b strings.Builder
	fn := "api"
	attr := func(a slog.Attr) {
		if a.Key == "function" {
			fn = a.Value.String()
			return
		}
		key := a.Key
		if t.group != "" {
			key = t.group + "." + key
		}
		fmt.Fprintf(&b, " %s=%v", key, a.Value)
	}
	for _, a := range t.attrs {
		attr(a)
	}
	rec.Attrs(func(a slog.Attr) bool { attr(a); return true })
	ts := rec.Time.Format("2006-01-02 15:04:05.000")
	t.ring.add(strings.Replace(ts, ".", ",", 1) + " - " + rec.Level.String() + " - " + fn + " - " + rec.Message + b.String())
	return t.next.Handle(ctx, rec)
}

func (t *tee) WithAttrs(as []slog.Attr) slog.Handler {
	c := *t
	c.attrs = append(append([]slog.Attr{}, t.attrs...), as...)
	c.next = t.next.WithAttrs(as)
	return &c
}

func (t *tee) WithGroup(name string) slog.Handler {
	c := *t
	c.group = name
	c.next = t.next.WithGroup(name)
	return &c
}
