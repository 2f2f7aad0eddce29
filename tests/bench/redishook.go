package main

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCounter is a go-redis hook counting the round trips and new
// connections of steps (withStep) and the time the steps waited for them.
type redisCounter struct {
	mu sync.Mutex
	on bool
	c  redisCounts
}

type redisCounts struct {
	trips, dials       int
	tripTime, dialTime time.Duration
}

func (h *redisCounter) set(on bool) { h.mu.Lock(); h.on = on; h.mu.Unlock() }

func (h *redisCounter) snapshot() redisCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.c
}

func (h *redisCounter) add(ctx context.Context, dial bool, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.on || !inStep(ctx) {
		return
	}
	if dial {
		h.c.dials++
		h.c.dialTime += d
		return
	}
	h.c.trips++
	h.c.tripTime += d
}

// DialHook implements redis.Hook.
func (h *redisCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		t0 := time.Now()
		c, err := next(ctx, network, addr)
		h.add(ctx, true, time.Since(t0))
		return c, err
	}
}

// ProcessHook implements redis.Hook.
func (h *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t0 := time.Now()
		err := next(ctx, cmd)
		h.add(ctx, false, time.Since(t0))
		return err
	}
}

// ProcessPipelineHook implements redis.Hook: a pipeline is one round trip.
func (h *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t0 := time.Now()
		err := next(ctx, cmds)
		h.add(ctx, false, time.Since(t0))
		return err
	}
}
