// Package redistest gives each test a Redis client and a unique key prefix, so
// tests share one server without seeing each other's keys. The server comes
// from YUXI_TEST_REDIS_URL (default redis://127.0.0.1:6379/0). When it cannot
// be reached the test is skipped — unless CI is set, in which case it fails.
//
// Imported by: tests only. May import: go-redis, testing.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL returns the Redis server URL for tests.
func URL() string {
	if u := os.Getenv("YUXI_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// New returns a client and a prefix unique to t; keys under the prefix are
// deleted when t ends.
func New(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("parse redis url: %v", err)
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		if os.Getenv("CI") != "" {
			t.Fatalf("Redis is required under CI: %v", err)
		}
		t.Skipf("Redis not available: %v", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "yuxitest:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		_ = c.Close()
	})
	return c, prefix
}
