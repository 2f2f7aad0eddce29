// Package invoke is how other programs reach agents: agent-call (sync and
// async), channel messages with slash commands, blocking evaluation runs
// and the OpenAI-compatible chat completions. Every entry goes through the
// one intake path, as the original's (contracts §3.1): the thread is derived
// and created here, then queue.Service.Submit (or Resume) writes the
// message, the request and the run exactly as POST /api/agent/runs does,
// only with another source, channel and default queue policy.
//
// A blocking entry waits for the run's end on its Redis stream (through the
// process's shared runstream.Hub): no database connection is held and
// PostgreSQL is read once before and once after the wait, never polled. The
// wait is bounded by Config.SyncWait (YUXI_SYNC_WAIT); past it the caller
// gets ErrWaitTimeout (504) and the run goes on, its result fetchable later.
//
// Imported by: functions/intake, shared/evaluation (suites run samples through
// it), shared/bootstrap/chat, tests. May import: shared/queue,
// shared/run, shared/thread, shared/agent, shared/access, shared/runstream,
// shared/failure, shared/llm.
package invoke

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// DefaultSyncWait bounds a blocking call when Config.SyncWait is zero:
// below Knative's default 600 s revision timeout and Lambda's 900 s.
const DefaultSyncWait = 300 * time.Second

// Sources and channels the entries record on requests and runs.
const (
	SourceAgentCall  = "agent_call"
	SourceChannel    = "channel"
	SourceEvaluation = "agent_evaluation"
	SourceOpenAI     = "openai"
	ChannelAPI       = "api"
)

// Deps are the stores an invocation uses.
type Deps struct {
	Queue   *queue.Service
	Runs    *run.Store
	Threads *thread.Store
	Agents  *agent.Store
	Hub     *runstream.Hub
	// SyncWait bounds every blocking call (default DefaultSyncWait).
	SyncWait time.Duration
	// Models and Guard serve the simple model call (/api/chat/call).
	Models Models
	Guard  Guard
}

// Service runs the invocation use cases.
type Service struct{ d Deps }

// New returns the service.
func New(d Deps) *Service {
	if d.SyncWait <= 0 {
		d.SyncWait = DefaultSyncWait
	}
	return &Service{d: d}
}

// ErrWaitTimeout: the bounded wait ended; the run goes on.
var ErrWaitTimeout = failure.New(failure.KindTimeout, "sync_wait_timeout",
	"the run is still going; its result stays fetchable with its run_id")

// HashID derives a stable id as the original's hash_id(prefix, data,
// length=64): the prefix followed by the SHA-256 of data in hex, cut to 64
// characters in all.
func HashID(prefix, data string) string {
	sum := sha256.Sum256([]byte(data))
	id := prefix + hex.EncodeToString(sum[:])
	if len(id) > 64 {
		id = id[:64]
	}
	return id
}

// Wait blocks until run runID ends or SyncWait passes (ErrWaitTimeout,
// with the run's current view in its details). It subscribes to the run's
// stream first, then reads the run once: an end written in between is
// either seen by that read (the terminal status commits before the end is
// appended) or delivered to the subscription.
func (s *Service) Wait(ctx context.Context, runID string) (run.Run, error) {
	deadline := time.NewTimer(s.d.SyncWait)
	defer deadline.Stop()
	for {
		r, done, err := s.waitOnce(ctx, runID, deadline.C)
		if done || err != nil {
			return r, err
		}
	}
}

// waitOnce is one subscription's wait; done=false means the subscription
// ended early (a slow consumer) and the caller subscribes again.
func (s *Service) waitOnce(ctx context.Context, runID string, deadline <-chan time.Time) (run.Run, bool, error) {
	sub := s.d.Hub.Subscribe(s.d.Hub.RunKey(runID), runstream.CursorNew)
	defer sub.Close()
	timeout := func() (run.Run, bool, error) {
		r, err := s.d.Runs.Get(context.WithoutCancel(ctx), runID)
		if err != nil {
			return r, true, err
		}
		return r, true, ErrWaitTimeout.With(map[string]any{"run": r.View()})
	}
	select {
	case <-sub.CaughtUp():
	case <-sub.Done():
		if errors.Is(sub.Err(), runstream.ErrHubClosed) {
			return run.Run{}, true, failure.New(failure.KindUnavailable, "shutting_down", "the server is shutting down")
		}
		return run.Run{}, false, nil
	case <-deadline:
		return timeout()
	case <-ctx.Done():
		return run.Run{}, true, ctx.Err()
	}
	r, err := s.d.Runs.Get(ctx, runID)
	if err != nil || run.IsTerminal(r.Status) {
		return r, true, err
	}
	for {
		select {
		case e, ok := <-sub.C():
			if !ok {
				if errors.Is(sub.Err(), runstream.ErrHubClosed) {
					return run.Run{}, true, failure.New(failure.KindUnavailable, "shutting_down", "the server is shutting down")
				}
				return run.Run{}, false, nil
			}
			if e.Event == runstream.EventEnd {
				r, err := s.d.Runs.Get(ctx, runID)
				return r, true, err
			}
		case <-deadline:
			return timeout()
		case <-ctx.Done():
			return run.Run{}, true, ctx.Err()
		}
	}
}

// Input is one user message of an invocation: text and at most one image
// (base64, as image_content of POST /api/agent/runs).
type Input struct {
	Text  string
	Image *string
}

// ChatMessage is an OpenAI-style message: content is a string or a list
// of parts ({type:text, text} or {type:image_url, image_url:{url}}).
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

// ParseContent reads an OpenAI message content into an Input. Images must
// be data URLs (the platform fetches no URLs on a caller's behalf here).
func ParseContent(content json.RawMessage) (Input, error) {
	var text string
	if len(content) == 0 || string(content) == "null" {
		return Input{}, failure.Unprocessable("invalid_messages", "message content must not be empty")
	}
	if json.Unmarshal(content, &text) == nil {
		return Input{Text: text}, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return Input{}, failure.Unprocessable("invalid_messages", "message content must be a string or a list of parts")
	}
	var in Input
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image_url":
			if p.ImageURL == nil || !strings.HasPrefix(p.ImageURL.URL, "data:image/") {
				return Input{}, failure.Unprocessable("invalid_image", "image_url must be a data:image/… URL")
			}
			_, b64, ok := strings.Cut(p.ImageURL.URL, ";base64,")
			if !ok || b64 == "" {
				return Input{}, failure.Unprocessable("invalid_image", "image_url must be a base64 data URL")
			}
			if in.Image != nil {
				return Input{}, failure.Unprocessable("too_many_images", "one image per message is supported")
			}
			in.Image = &b64
		default:
			return Input{}, failure.Unprocessable("invalid_messages", "unsupported content part type %q", p.Type)
		}
	}
	in.Text = strings.Join(texts, "\n")
	return in, nil
}

// lastUser returns the index of the last user message.
func lastUser(msgs []ChatMessage) (int, error) {
	if len(msgs) == 0 {
		return -1, failure.Unprocessable("invalid_messages", "messages must not be empty")
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return i, nil
		}
	}
	return -1, failure.Unprocessable("invalid_messages", "messages must contain a user message")
}

// CheckAgent answers 404 for an agent sub may not use (evaluation suites
// check their agent with it).
func (s *Service) CheckAgent(ctx context.Context, sub access.Subject, slug string) error {
	return s.checkAgent(ctx, sub, slug)
}

// checkAgent answers 404 for an agent the caller may not use, before any
// thread is created for it.
func (s *Service) checkAgent(ctx context.Context, sub access.Subject, slug string) error {
	if strings.TrimSpace(slug) == "" {
		return failure.Unprocessable("missing_agent_slug", "agent_slug is required")
	}
	_, err := s.d.Agents.Get(ctx, sub, slug)
	return err
}

func validApproval(mode string) error {
	switch mode {
	case "", "default", "always_trust":
		return nil
	}
	return failure.Unprocessable("invalid_tool_approval_mode", "tool_approval_mode must be default or always_trust")
}

func normRequestID(id string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return queue.NewID("req_"), nil
	}
	if err := queue.ValidateRequestID(id); err != nil {
		return "", err
	}
	return id, nil
}
