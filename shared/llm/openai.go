package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
)

// Client is a ChatModel for one OpenAI-compatible provider. It is safe for
// concurrent use; it holds no per-call state.
type Client struct {
	provider string
	svc      openai.ChatCompletionService
}

// NewClient returns a client for p's endpoint. With an empty p.APIKey no
// Authorization header is sent (local servers need none). hc carries
// transport settings (proxies, TLS, the SSRF guard where relevant); nil
// means a plain http.Client. Cancel calls through their context: streams
// can legitimately run for minutes, so hc should have no overall Timeout.
//
// The openai-go client is built without its environment defaults (it would
// otherwise read OPENAI_API_KEY and OPENAI_BASE_URL itself) and with its
// retries switched off: the caller owns retries.
func NewClient(p Provider, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	c := &Client{provider: p.ID}
	opts := []option.RequestOption{
		option.WithBaseURL(p.BaseURL),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithMiddleware(c.checkStatus),
	}
	if p.APIKey != "" {
		opts = append(opts, option.WithAPIKey(p.APIKey))
	}
	c.svc = openai.NewChatCompletionService(opts...)
	return c
}

// checkStatus turns HTTP error answers into *ProviderError before openai-go
// sees them, keeping the status and a body excerpt whatever the body's shape
// (many compatible providers answer errors in plain text or HTML).
func (c *Client) checkStatus(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4*bodyExcerptLimit))
	return nil, &ProviderError{
		Provider:   c.provider,
		StatusCode: res.StatusCode,
		Body:       excerpt(bytes.TrimSpace(body)),
		RetryAfter: parseRetryAfter(res.Header.Get("Retry-After"), time.Now()),
	}
}

// Stream implements ChatModel. Under a recording span it records a GenAI
// "chat" span (model, tokens, finish reason).
func (c *Client) Stream(ctx context.Context, req Request, onDelta func(Delta) error) (resp Response, err error) {
	ctx, span := telemetry.StartModelCall(ctx, c.provider, req.Model, telemetry.Who{})
	if span.Recording() {
		defer func() {
			span.ModelResult(req.Model, resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.FinishReason)
			span.End(err)
		}()
	}
	return c.stream(ctx, req, onDelta)
}

func (c *Client) stream(ctx context.Context, req Request, onDelta func(Delta) error) (Response, error) {
	params, err := c.params(req)
	if err != nil {
		return Response{}, err
	}
	stream := c.svc.NewStreaming(ctx, params)
	defer stream.Close()

	var acc assembler
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			acc.usage = Usage{
				InputTokens:  chunk.Usage.PromptTokens,
				OutputTokens: chunk.Usage.CompletionTokens,
				TotalTokens:  chunk.Usage.TotalTokens,
				Reported:     true,
			}
			if d := chunk.Usage.PromptTokensDetails; d.JSON.CachedTokens.Valid() {
				acc.usage.CacheReadTokens, acc.usage.CacheReported = d.CachedTokens, true
			}
		}
		for _, choice := range chunk.Choices {
			if choice.Index != 0 { // we never ask for n > 1
				continue
			}
			if choice.FinishReason != "" {
				acc.finish = choice.FinishReason
			}
			d := deltaOf(choice.Delta)
			if d.Empty() {
				continue
			}
			acc.add(d)
			if onDelta != nil {
				if err := onDelta(d); err != nil {
					return acc.response(), err
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		return acc.response(), c.classify(ctx, err)
	}
	if ctx.Err() != nil {
		return acc.response(), fmt.Errorf("provider %s: %w", c.provider, ctx.Err())
	}
	if acc.finish == "" {
		return acc.response(), &TransportError{Provider: c.provider, Err: ErrStreamIncomplete}
	}
	return acc.response(), nil
}

// classify maps whatever ended the stream onto the error types IsRetryable
// understands.
func (c *Client) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("provider %s: %w", c.provider, ctx.Err())
	}
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return streamErrorEvent(c.provider, se.Event.Data)
	}
	return &TransportError{Provider: c.provider, Err: err}
}

// streamErrorEvent reads an error event sent inside a 200 stream
// (`data: {"error":{...}}`). OpenRouter and others put the HTTP status they
// would have answered in error.code.
func streamErrorEvent(provider string, data []byte) error {
	e := &ProviderError{Provider: provider, Body: excerpt(bytes.TrimSpace(data))}
	var ev struct {
		Error struct {
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &ev) == nil {
		code := strings.Trim(string(ev.Error.Code), `"`)
		if n, err := strconv.Atoi(code); err == nil && n >= 400 && n <= 599 {
			e.StatusCode = n
		}
	}
	return e
}

// deltaOf converts a chunk's delta, reading the non-standard reasoning
// fields from the raw JSON.
func deltaOf(d openai.ChatCompletionChunkChoiceDelta) Delta {
	out := Delta{Content: d.Content}
	for _, key := range []string{"reasoning_content", "reasoning"} {
		// Extra fields have no Go type, so openai-go marks them "invalid"
		// rather than valid: read the raw JSON.
		f, ok := d.JSON.ExtraFields[key]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			out.Reasoning = s
			break
		}
	}
	for _, tc := range d.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCallDelta{
			Index:          int(tc.Index),
			ID:             tc.ID,
			Name:           tc.Function.Name,
			ArgumentsDelta: tc.Function.Arguments,
		})
	}
	return out
}

// params builds the wire request. Errors here are the caller's bugs or bad
// configuration and are never retryable.
func (c *Client) params(req Request) (openai.ChatCompletionNewParams, error) {
	var p openai.ChatCompletionNewParams
	if strings.TrimSpace(req.Model) == "" {
		return p, failure.Invalid("model_required", "request has no model id")
	}
	if len(req.Messages) == 0 {
		return p, failure.Invalid("messages_required", "request has no messages")
	}
	if err := ValidateExtraBody(req.ExtraBody); err != nil {
		return p, err
	}
	p.Model = shared.ChatModel(req.Model)
	p.StreamOptions.IncludeUsage = param.NewOpt(true)
	if req.MaxTokens > 0 {
		p.MaxTokens = param.NewOpt(req.MaxTokens)
	}
	for i, m := range req.Messages {
		mp, err := messageParam(m)
		if err != nil {
			return p, failure.Invalid("invalid_message", "message %d: %v", i, err)
		}
		p.Messages = append(p.Messages, mp)
	}
	for _, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return p, failure.Invalid("invalid_tool", "tool %q: %v", t.Name, err)
		}
		p.Tools = append(p.Tools, tp)
	}
	if len(req.ExtraBody) > 0 {
		extra := make(map[string]any, len(req.ExtraBody))
		for k, v := range req.ExtraBody {
			extra[k] = v
		}
		p.SetExtraFields(extra)
	}
	return p, nil
}

func messageParam(m Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case RoleSystem:
		u := openai.SystemMessage(m.Content)
		if m.Name != "" {
			u.OfSystem.Name = param.NewOpt(m.Name)
		}
		return u, nil
	case RoleUser:
		u := openai.UserMessage(m.Content)
		if m.Name != "" {
			u.OfUser.Name = param.NewOpt(m.Name)
		}
		return u, nil
	case RoleAssistant:
		var a openai.ChatCompletionAssistantMessageParam
		// Content is required unless there are tool calls; an empty string
		// next to tool calls is omitted rather than sent as "".
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(m.Content)
		}
		if m.Name != "" {
			a.Name = param.NewOpt(m.Name)
		}
		for _, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call needs an id and a name")
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      tc.Name,
						Arguments: tc.Arguments,
					},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message needs tool_call_id")
		}
		return openai.ToolMessage(m.Content, m.ToolCallID), nil
	default:
		return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

func toolParam(t ToolSpec) (openai.ChatCompletionToolUnionParam, error) {
	if t.Name == "" {
		return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool needs a name")
	}
	fn := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		fn.Description = param.NewOpt(t.Description)
	}
	if len(bytes.TrimSpace(t.Parameters)) > 0 {
		var probe map[string]any
		if err := json.Unmarshal(t.Parameters, &probe); err != nil || probe == nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("parameters must be a JSON object")
		}
		// Sent as raw bytes so the schema reaches the provider exactly as
		// written (key order matters to prompt caches).
		fn.SetExtraFields(map[string]any{"parameters": json.RawMessage(t.Parameters)})
	}
	return openai.ChatCompletionFunctionTool(fn), nil
}
