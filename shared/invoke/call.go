package invoke

import (
	"context"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/queue"
)

// Models resolves model specs (llm.Registry).
type Models interface {
	ChatModel(spec string) (llm.ChatModel, string, error)
	DefaultModel() string
}

// Guard checks text against the content guard (contentguard.Guard); nil: off.
type Guard interface {
	CheckInput(ctx context.Context, text string) error
	CheckOutput(ctx context.Context, text string) error
}

// SimpleCallInput is POST /api/chat/call: {query, meta{request_id?, model_spec? | model?}}.
type SimpleCallInput struct {
	Query string         `json:"query"`
	Meta  map[string]any `json:"meta"`
}

// SimpleCallResult is the answer of POST /api/chat/call.
type SimpleCallResult struct {
	Response  string `json:"response"`
	RequestID string `json:"request_id"`
}

// maxCallQuery bounds a simple call's query (bytes).
const maxCallQuery = 64 << 10

// SimpleCall asks a model one question, without a thread or an agent (the
// original's /api/chat/call). The model is meta.model_spec (or meta.model),
// else defaultSpec (the system setting), else the registry's default. The
// query and the answer pass the content guard like a run's.
func (s *Service) SimpleCall(ctx context.Context, in SimpleCallInput, defaultSpec string) (SimpleCallResult, error) {
	if s.d.Models == nil {
		return SimpleCallResult{}, failure.New(failure.KindUnavailable, "models_unavailable", "no model is configured")
	}
	q := strings.TrimSpace(in.Query)
	if q == "" {
		return SimpleCallResult{}, failure.Unprocessable("empty_query", "query must not be empty")
	}
	if len(in.Query) > maxCallQuery {
		return SimpleCallResult{}, failure.Unprocessable("invalid_query", "query is longer than %d bytes", maxCallQuery)
	}
	meta := func(k string) string { v, _ := in.Meta[k].(string); return strings.TrimSpace(v) }
	requestID := meta("request_id")
	if requestID == "" {
		requestID = queue.NewID("call_")
	} else if len(requestID) > 64 {
		return SimpleCallResult{}, failure.Unprocessable("invalid_request_id", "request_id must be at most 64 characters")
	}
	spec := meta("model_spec")
	if spec == "" {
		spec = meta("model")
	}
	if spec == "" {
		spec = defaultSpec
	}
	if spec == "" {
		spec = s.d.Models.DefaultModel()
	}
	if spec == "" {
		return SimpleCallResult{}, failure.Unprocessable("model_not_available", "no model_spec given and no default model is configured")
	}
	if s.d.Guard != nil {
		if err := s.d.Guard.CheckInput(ctx, in.Query); err != nil {
			return SimpleCallResult{}, err
		}
	}
	model, _, err := s.d.Models.ChatModel(spec)
	if err != nil {
		return SimpleCallResult{}, err
	}
	resp, err := model.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: in.Query}}}, func(llm.Delta) error { return nil })
	if err != nil {
		return SimpleCallResult{}, failure.New(failure.KindUnavailable, "model_error", "the model call failed: %v", err)
	}
	if s.d.Guard != nil {
		if err := s.d.Guard.CheckOutput(ctx, resp.Content); err != nil {
			return SimpleCallResult{}, err
		}
	}
	return SimpleCallResult{Response: resp.Content, RequestID: requestID}, nil
}
