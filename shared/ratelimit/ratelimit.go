// Package ratelimit bounds how often a key (a client address) may do
// something, across every process, with a fixed window counted in Redis
// (SET NX PX, INCR and PTTL in one transaction). A window admits Limit calls; the
// next is refused until the window's key expires.
//
// Imported by: shared/bootstrap/chat (the login limit). May import: go-redis.
package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Window is a fixed-window limiter.
type Window struct {
	rdb    *redis.Client
	prefix string
	limit  int64
	window time.Duration
}

// New returns a limiter admitting limit calls per window and key; keys are
// stored under prefix.
func New(rdb *redis.Client, prefix string, limit int, window time.Duration) *Window {
	return &Window{rdb: rdb, prefix: prefix, limit: int64(limit), window: window}
}

// Allow counts one call by key. When the window's budget is spent it answers
// false with the time left in the window.
func (w *Window) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	k := w.prefix + key
	var incr *redis.IntCmd
	var ttl *redis.DurationCmd
	_, err := w.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, k, 0, w.window) // the window's first call starts it (SET NX PX)
		incr = p.Incr(ctx, k)        // INCR keeps the expiry
		ttl = p.PTTL(ctx, k)
		return nil
	})
	if err != nil {
		return false, 0, fmt.Errorf("rate limit %s: %w", key, err)
	}
	if incr.Val() <= w.limit {
		return true, 0, nil
	}
	left := ttl.Val()
	if left <= 0 {
		left = w.window
	}
	return false, left, nil
}
