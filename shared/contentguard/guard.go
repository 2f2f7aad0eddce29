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
	mod     Moderator // nil: no LLM moderation
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

// CheckInput refuses user input that contains a keyword (ErrBlocked, 400)
// or, when LLM moderation is on, that the moderation model flags.
func (g *Guard) CheckInput(ctx context.Context, text string) error {
	if err := g.checkKeywords(ctx, text); err != nil {
		return err
	}
	return g.moderate(ctx, text)
}

func (g *Guard) checkKeywords(ctx context.Context, text string) error {
	m, err := g.Matcher(ctx)
	if err != nil || m.Empty() {
		return err
	}
	if m.Match(text) >= 0 {
		return ErrBlocked
	}
	return nil
}

// Moderator asks a model whether text is acceptable (the original's LLM
// 内容审查). Flagged reports a refusal; an error means the moderation model
// could not answer.
type Moderator interface {
	Flagged(ctx context.Context, spec, text string) (bool, error)
}

// WithModeration returns g with LLM moderation through m, used when the
// settings turn enable_content_guard_llm on (the model is
// content_guard_llm_model, else default_model).
func (g *Guard) WithModeration(m Moderator) *Guard {
	if g != nil {
		g.mod = m
	}
	return g
}

// ErrModerationUnavailable: LLM moderation is on and its model did not
// answer. The content is refused (fail closed): a compliance switch that an
// outage silently turns off would not be one.
var ErrModerationUnavailable = failure.New(failure.KindUnavailable, "content_guard_unavailable", "内容审查服务暂不可用")

// CheckOutput refuses a final answer that contains a keyword or, when LLM
// moderation is on, that the moderation model flags.
func (g *Guard) CheckOutput(ctx context.Context, text string) error {
	if err := g.checkKeywords(ctx, text); err != nil {
		return err
	}
	return g.moderate(ctx, text)
}

// moderate runs the LLM check when the settings enable it.
func (g *Guard) moderate(ctx context.Context, text string) error {
	if g == nil || g.cfg == nil || g.mod == nil || text == "" {
		return nil
	}
	snap, err := g.cfg.Get(ctx)
	if err != nil {
		return err
	}
	if !snap.Bool("enable_content_guard_llm") {
		return nil
	}
	spec := snap.String("content_guard_llm_model")
	if spec == "" {
		spec = snap.String("default_model")
	}
	flagged, err := g.mod.Flagged(ctx, spec, text)
	if err != nil {
		return ErrModerationUnavailable
	}
	if flagged {
		return ErrBlocked
	}
	return nil
}

// Scanner returns a scan of streamed output (keywords only, as the
// original: LLM moderation runs on the final answer), or nil when the guard
// is off or has no keywords. Write reports a keyword ending in the chunk,
// also one split across chunks; its cost is linear in the chunk alone.
func (g *Guard) Scanner(ctx context.Context) (func(chunk string) bool, error) {
	m, err := g.Matcher(ctx)
	if err != nil || m.Empty() {
		return nil, err
	}
	st := m.NewStream()
	return func(chunk string) bool { return st.Write(chunk) >= 0 }, nil
}
