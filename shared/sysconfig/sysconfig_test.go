package sysconfig_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/redistest"
	"github.com/yuxi-serverless/yuxi/shared/sysconfig"
)

func raw(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

// Two stores over one database and Redis stand for two processes: an update
// through one is seen by the other at its next version check.
func TestTwoProcessesSeeAnUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	rdb, prefix := redistest.New(t)
	a := sysconfig.New(pool, rdb, prefix)
	b := sysconfig.New(pool, rdb, prefix)
	// b checks the version on every Get, so the test waits on nothing.
	b.CheckEvery = 0
	changed := make(chan sysconfig.Snapshot, 4)
	b.OnChange(func(s sysconfig.Snapshot) { changed <- s })

	s0, err := b.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-changed
	if s0.Bool("enable_content_guard") || len(s0.Strings("content_guard_keywords")) != 0 {
		t.Fatalf("defaults: %+v", s0.Values)
	}
	if _, err := a.Set(ctx, 1, map[string]json.RawMessage{
		"enable_content_guard":   raw(true),
		"content_guard_keywords": raw([]string{"bomb", "", "爆炸"}),
	}); err != nil {
		t.Fatal(err)
	}
	s1, err := b.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !s1.Bool("enable_content_guard") || len(s1.Strings("content_guard_keywords")) != 2 || s1.Version <= s0.Version {
		t.Fatalf("b did not see the update: %+v", s1)
	}
	if got := <-changed; got.Version != s1.Version {
		t.Fatalf("OnChange got version %d, want %d", got.Version, s1.Version)
	}
	// No change: the cached snapshot is served, no reload.
	if _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-changed:
		t.Fatalf("reloaded without a change: %+v", s)
	default:
	}
}

// Within CheckEvery a process serves its cached snapshot (the stated bound).
func TestStalenessBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	rdb, prefix := redistest.New(t)
	a := sysconfig.New(pool, rdb, prefix)
	b := sysconfig.New(pool, rdb, prefix)
	b.CheckEvery = time.Hour
	if _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set(ctx, 1, map[string]json.RawMessage{"fast_model": raw("p:m")}); err != nil {
		t.Fatal(err)
	}
	s, _ := b.Get(ctx)
	if s.String("fast_model") != "" {
		t.Fatalf("cache bypassed within CheckEvery")
	}
	s, err := b.Reload(ctx)
	if err != nil || s.String("fast_model") != "p:m" {
		t.Fatalf("reload: %v %+v", err, s.Values)
	}
}

func TestSetRefusesBadInputAtomically(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	rdb, prefix := redistest.New(t)
	st := sysconfig.New(pool, rdb, prefix)
	cases := []struct {
		items map[string]json.RawMessage
		code  string
	}{
		{map[string]json.RawMessage{"nope": raw(1)}, "unknown_config_key"},
		{map[string]json.RawMessage{"fast_model": raw("x"), "enable_content_guard": raw("yes")}, "invalid_config_value"},
		{map[string]json.RawMessage{"content_guard_keywords": raw([]int{1})}, "invalid_config_value"},
		{map[string]json.RawMessage{}, "invalid_config"},
	}
	for _, c := range cases {
		_, err := st.Set(ctx, 1, c.items)
		var fe *failure.Error
		if !errors.As(err, &fe) || fe.Code != c.code {
			t.Fatalf("%v: got %v, want %s", c.items, err, c.code)
		}
	}
	s, err := st.Reload(ctx)
	if err != nil || s.String("fast_model") != "" {
		t.Fatalf("a refused batch wrote something: %v %+v", err, s.Values)
	}
}
