package intake

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// openAIPrefix starts the OpenAI-compatible routes, whose errors are
// OpenAI's error object (writeOpenAIError).
const openAIPrefix = "/v1/"

// Response headers naming the thread and run behind a completion, so a
// client can continue the conversation (X-Yuxi-Thread-Id on its next
// request) or read the run.
const (
	headerThreadID = "X-Yuxi-Thread-Id"
	headerRunID    = "X-Yuxi-Run-Id"
)

// v1Models is GET /v1/models: the agents the caller may use.
func (s *Server) v1Models(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	models, err := s.inv.Models(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": models})
	return nil
}

// v1ChatCompletions is POST /v1/chat/completions: a chat.completion, or
// with stream:true chat.completion.chunk events ending with [DONE].
func (s *Server) v1ChatCompletions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in invoke.CompletionRequest
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	st, err := s.inv.StartCompletion(r.Context(), subject(p), in, r.Header.Get(headerThreadID))
	if err != nil {
		return err
	}
	w.Header().Set(headerThreadID, st.ThreadID)
	w.Header().Set(headerRunID, st.RunID)
	if !in.Stream {
		out, err := s.inv.Complete(r.Context(), st)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	sw := runstream.NewEventWriter(w)
	if err := sw.Start(); err != nil {
		return err
	}
	sink := &chunkSink{sw: sw, log: s.log}
	includeUsage := in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	if err := s.inv.Stream(r.Context(), st, includeUsage, s.d.SSEHeartbeat, sink); err != nil && r.Context().Err() == nil {
		_ = sink.Error(err)
	}
	sw.Event("", "", []byte("[DONE]"))
	_ = sw.Flush()
	return nil
}

// chunkSink writes a streamed completion as `data:` events.
type chunkSink struct {
	sw  *runstream.EventWriter
	log *slog.Logger
}

func (c *chunkSink) Chunk(ch invoke.Chunk) error {
	b, _ := json.Marshal(ch)
	c.sw.Event("", "", b)
	return c.sw.Flush()
}

// Error sends err as an OpenAI error object in the stream, as providers do
// for an error after the response started.
func (c *chunkSink) Error(err error) error {
	_, body := openAIError(c.log, err)
	b, _ := json.Marshal(body)
	c.sw.Event("", "", b)
	return c.sw.Flush()
}

func (c *chunkSink) Idle() error {
	c.sw.Comment("keep-alive")
	return c.sw.Flush()
}

// openAIErrorBody is OpenAI's error object.
type openAIErrorBody struct {
	Error openAIErrorPayload `json:"error"`
}

type openAIErrorPayload struct {
	Message string         `json:"message"`
	Type    string         `json:"type"`
	Param   *string        `json:"param"`
	Code    string         `json:"code"`
	Details map[string]any `json:"details,omitempty"`
}

var kindOpenAIType = map[failure.Kind]string{
	failure.KindUnauthorized: "authentication_error",
	failure.KindForbidden:    "permission_error",
	failure.KindNotFound:     "not_found_error",
	failure.KindTooMany:      "rate_limit_error",
	failure.KindInternal:     "server_error",
	failure.KindUnavailable:  "server_error",
	failure.KindTimeout:      "timeout_error",
}

// openAIError maps err to a status and OpenAI's error object, once, here
// at the edge (the same statuses as writeError).
func openAIError(log *slog.Logger, err error) (int, openAIErrorBody) {
	fe, ok := failure.As(err)
	if !ok {
		log.Error("internal error", "error", err)
		fe = failure.New(failure.KindInternal, "internal_error", "internal server error")
	}
	status := kindStatus[fe.Kind]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	typ := kindOpenAIType[fe.Kind]
	if typ == "" {
		typ = "invalid_request_error"
	}
	return status, openAIErrorBody{Error: openAIErrorPayload{Message: fe.Message, Type: typ, Code: fe.Code, Details: fe.Details}}
}

func writeOpenAIError(w http.ResponseWriter, log *slog.Logger, err error) {
	status, body := openAIError(log, err)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeJSON(w, status, body)
}

func isOpenAIPath(p string) bool { return strings.HasPrefix(p, openAIPrefix) }
