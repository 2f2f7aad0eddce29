// Package sysconfig is the platform's system settings (/api/system/config):
// a fixed schema of keys with types and defaults, values set by admins stored
// in Postgres, and a per-process snapshot that every process reloads when a
// version counter in Redis moves.
//
// Staleness bound: a process checks the Redis version at most once per
// CheckEvery (default 1s) — one GET of a small key — so an update is seen by
// every process within CheckEvery of its commit. If Redis cannot be read, the
// snapshot is reloaded from Postgres at most once per CheckEvery instead.
//
// Owns the table system_config.
// Imported by: functions/intake, shared/bootstrap/identity, tests.
// May import: shared/failure, pgx, go-redis.
package sysconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Type is a setting's value type.
type Type string

const (
	Bool    Type = "bool"
	String  Type = "str"
	Strings Type = "list"
	Int     Type = "int"
)

// Option is one setting of the schema.
type Option struct {
	Key         string `json:"key"`
	Type        Type   `json:"type"`
	Default     any    `json:"default"`
	Description string `json:"description"`
	// Group is the settings page section the original shows it in.
	Group string `json:"group"`
}

// Limits on values.
const (
	MaxStringBytes = 4096
	MaxListItems   = 50000
	MaxItemBytes   = 256
)

// Schema is every setting, in display order.
var Schema = []Option{
	{Key: "default_model", Type: String, Default: "", Description: "默认对话模型 (provider:model)", Group: "model"},
	{Key: "fast_model", Type: String, Default: "", Description: "快速模型 (provider:model)", Group: "model"},
	{Key: "enable_content_guard", Type: Bool, Default: false, Description: "启用内容审查（关键词过滤）", Group: "content_guard"},
	{Key: "enable_content_guard_llm", Type: Bool, Default: false, Description: "启用 LLM 内容审查", Group: "content_guard"},
	{Key: "content_guard_llm_model", Type: String, Default: "", Description: "内容审查模型 (provider:model)", Group: "content_guard"},
	{Key: "content_guard_keywords", Type: Strings, Default: []string{}, Description: "敏感词列表，每项一个关键词；修改后实时生效", Group: "content_guard"},
	{Key: "enable_web_search", Type: Bool, Default: false, Description: "启用联网搜索", Group: "tools"},
	{Key: "default_ocr_method", Type: String, Default: "disable", Description: "默认 OCR 方法", Group: "ocr"},
}

func option(key string) (Option, bool) {
	for _, o := range Schema {
		if o.Key == key {
			return o, true
		}
	}
	return Option{}, false
}

// Snapshot is one consistent view of every setting (defaults filled in).
type Snapshot struct {
	Version int64
	Values  map[string]any
}

// Bool returns a bool setting.
func (s Snapshot) Bool(key string) bool { b, _ := s.Values[key].(bool); return b }

// String returns a string setting.
func (s Snapshot) String(key string) string { v, _ := s.Values[key].(string); return v }

// Strings returns a list setting.
func (s Snapshot) Strings(key string) []string { v, _ := s.Values[key].([]string); return v }

// Store reads and writes the settings.
type Store struct {
	pool       *pgxpool.Pool
	rdb        *redis.Client
	versionKey string
	// CheckEvery bounds how often Get asks Redis for the version (the staleness bound).
	CheckEvery time.Duration
	now        func() time.Time

	mu      sync.Mutex
	snap    *Snapshot
	checked time.Time
	// subs are called with each newly loaded snapshot.
	subs []func(Snapshot)
}

// New returns the store; prefix namespaces the Redis version key.
func New(pool *pgxpool.Pool, rdb *redis.Client, prefix string) *Store {
	return &Store{pool: pool, rdb: rdb, versionKey: prefix + "sysconfig:version", CheckEvery: time.Second, now: time.Now}
}

// OnChange registers f, called (outside the lock) with every snapshot loaded
// after a version change, e.g. to rebuild a keyword matcher once per change.
func (s *Store) OnChange(f func(Snapshot)) {
	s.mu.Lock()
	s.subs = append(s.subs, f)
	s.mu.Unlock()
}

func (s *Store) remoteVersion(ctx context.Context) (int64, bool) {
	v, err := s.rdb.Get(ctx, s.versionKey).Int64()
	if err == redis.Nil {
		return 0, true
	}
	if err != nil {
		return 0, false
	}
	return v, true
}

// Get returns the current snapshot: the cached one when the Redis version has
// not moved (checked at most once per CheckEvery), else a fresh load.
func (s *Store) Get(ctx context.Context) (Snapshot, error) {
	s.mu.Lock()
	if s.snap != nil && s.now().Sub(s.checked) < s.CheckEvery {
		snap := *s.snap
		s.mu.Unlock()
		return snap, nil
	}
	s.mu.Unlock()
	return s.refresh(ctx, false)
}

// Reload loads the settings from Postgres now (POST /api/system/info/reload).
func (s *Store) Reload(ctx context.Context) (Snapshot, error) { return s.refresh(ctx, true) }

func (s *Store) refresh(ctx context.Context, force bool) (Snapshot, error) {
	ver, ok := s.remoteVersion(ctx)
	s.mu.Lock()
	if !force && ok && s.snap != nil && s.snap.Version == ver {
		s.checked = s.now()
		snap := *s.snap
		s.mu.Unlock()
		return snap, nil
	}
	s.mu.Unlock()
	// The version is read before the rows: a write committed after this
	// read moves the version again, so the next check reloads.
	values, err := s.load(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Version: ver, Values: values}
	s.mu.Lock()
	s.snap = &snap
	s.checked = s.now()
	subs := append([]func(Snapshot){}, s.subs...)
	s.mu.Unlock()
	for _, f := range subs {
		f(snap)
	}
	return snap, nil
}

func (s *Store) load(ctx context.Context) (map[string]any, error) {
	values := make(map[string]any, len(Schema))
	for _, o := range Schema {
		values[o.Key] = o.Default
	}
	rows, err := s.pool.Query(ctx, `SELECT key, value FROM system_config`)
	if err != nil {
		return nil, fmt.Errorf("load system config: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var raw []byte
		if err := rows.Scan(&key, &raw); err != nil {
			return nil, fmt.Errorf("scan system config: %w", err)
		}
		o, ok := option(key)
		if !ok {
			continue // a key dropped from the schema
		}
		v, err := decode(o, raw)
		if err != nil {
			continue // keep the default rather than fail every reader
		}
		values[key] = v
	}
	return values, rows.Err()
}

// decode checks raw against the option's type and returns the typed value.
func decode(o Option, raw json.RawMessage) (any, error) {
	bad := func() error {
		return failure.New(failure.KindUnprocessable, "invalid_config_value", "%s must be of type %s", o.Key, o.Type)
	}
	switch o.Type {
	case Bool:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return nil, bad()
		}
		return b, nil
	case Int:
		var n int64
		if json.Unmarshal(raw, &n) != nil {
			return nil, bad()
		}
		return n, nil
	case String:
		var str string
		if json.Unmarshal(raw, &str) != nil {
			return nil, bad()
		}
		if len(str) > MaxStringBytes {
			return nil, failure.New(failure.KindUnprocessable, "invalid_config_value", "%s is longer than %d bytes", o.Key, MaxStringBytes)
		}
		return str, nil
	case Strings:
		var list []string
		if json.Unmarshal(raw, &list) != nil {
			return nil, bad()
		}
		if len(list) > MaxListItems {
			return nil, failure.New(failure.KindUnprocessable, "invalid_config_value", "%s has more than %d items", o.Key, MaxListItems)
		}
		out := list[:0]
		for _, it := range list {
			if len(it) > MaxItemBytes {
				return nil, failure.New(failure.KindUnprocessable, "invalid_config_value", "%s item longer than %d bytes", o.Key, MaxItemBytes)
			}
			if it != "" {
				out = append(out, it)
			}
		}
		if out == nil {
			out = []string{}
		}
		return out, nil
	}
	return nil, bad()
}

// Set stores the given settings in one transaction (all or none), then moves
// the Redis version so every process reloads. Unknown keys and values of the
// wrong type are refused (422) before anything is written.
func (s *Store) Set(ctx context.Context, userID int64, items map[string]json.RawMessage) (Snapshot, error) {
	if len(items) == 0 {
		return Snapshot{}, failure.New(failure.KindInvalid, "invalid_config", "no config items given")
	}
	keys := make([]string, 0, len(items))
	typed := make(map[string][]byte, len(items))
	for k, raw := range items {
		o, ok := option(k)
		if !ok {
			return Snapshot{}, failure.New(failure.KindUnprocessable, "unknown_config_key", "unknown config key %q", k)
		}
		v, err := decode(o, raw)
		if err != nil {
			return Snapshot{}, err
		}
		b, _ := json.Marshal(v)
		typed[k] = b
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("begin config update: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, k := range keys {
		if _, err := tx.Exec(ctx, `INSERT INTO system_config (key, value, updated_by, updated_at) VALUES ($1, $2, $3, now())
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = now()`,
			k, typed[k], userID); err != nil {
			return Snapshot{}, fmt.Errorf("store config %s: %w", k, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return Snapshot{}, fmt.Errorf("commit config update: %w", err)
	}
	if err := s.rdb.Incr(ctx, s.versionKey).Err(); err != nil {
		// Committed but not announced: other processes see it when Redis is
		// back (their reload-on-error path); say so rather than pretend.
		return Snapshot{}, failure.New(failure.KindUnavailable, "config_version_unavailable", "config stored; announcing it failed: %v", err)
	}
	return s.Reload(ctx)
}
