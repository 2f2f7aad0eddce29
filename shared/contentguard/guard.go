package contentguard

import (
	"context"
	"sync"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sysconfig"
)

// ErrBlocked is the refusal of content the guard blocks (the original's
// error type content_guard_blocked).
var ErrBlocked = failure.New(failure.KindInvalid, "content_guard_blocked", "内容包含敏感信息，已被内容安全策略拦截")

// Guard checks text against the system settings' keyword list when
// enable_content_guard is on. The matcher is rebuilt when the settings'
// version moves, so a list change applies within the settings' staleness
// bound (sysconfig.Store.CheckEvery), without a restart.
type Guard struct {
	cfg *sysconfig.Store

	mu      sync.Mutex
	version int64
	built   bool
	m       *Matcher
}

// New returns the guard over the settings store.
func New(cfg *sysconfig.Store) *Guard { return &Guard{cfg: cfg} }

// Matcher returns the current keyword matcher, or nil when the guard is off.
func (g *Guard) Matcher(ctx context.Context) (*Matcher, error) {
	if g == nil || g.cfg == nil {
		return nil, nil
	}
	snap, err := g.cfg.Get(ctx)
	if err != nil {
		return nil, err
	}
	if !snap.Bool("enable_content_guard") {
		return nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.built || g.version != snap.Version {
		g.m, g.version, g.built = NewMatcher(snap.Strings("content_guard_keywords")), snap.Version, true
	}
	return g.m, nil
}

// CheckInput refuses user input that contains a keyword (ErrBlocked, 400).
func (g *Guard) CheckInput(ctx context.Context, text string) error {
	m, err := g.Matcher(ctx)
	if err != nil || m.Empty() {
		return err
	}
	if m.Match(text) >= 0 {
		return ErrBlocked
	}
	return nil
}
