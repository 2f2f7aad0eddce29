// Package llmtest is a scripted OpenAI-compatible chat completions server,
// so that the platform's tests never call a real model provider. Tests
// script replies (streamed text, reasoning, tool calls, HTTP errors,
// disconnects, held responses, usage), point a provider's base URL at URL(),
// and afterwards assert on Requests(): what the platform actually sent.
//
// The server speaks the wire format of OpenAI streaming chat completions
// exactly (`data: {json}\n\n` chunk events, a usage chunk with empty choices
// when stream_options.include_usage is set, then `data: [DONE]`), and also
// answers non-streaming requests. It checks every request against the
// contract a provider enforces (see parseRequest) and answers violations
// with 422: the platform must never send an invalid transcript, and under
// NewServer such a request also fails the test.
//
// The same server runs as a standalone process (cmd/fakellm) for
// multi-process tests and benchmarks, driven by a JSON script (see Script).
//
// Imported by: tests, and cmd/fakellm. May import: the standard library only
// (in particular not shared/llm, whose tests use this package).
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is the fake provider. It is an http.Handler serving
// POST /v1/chat/completions and GET /v1/models. Its methods are safe for
// concurrent use.
type Server struct {
	mu       sync.Mutex
	queue    []Reply
	handle   func(ChatRequest) Reply
	reqs     []ChatRequest
	report   func(msg string)
	tolerate bool // ExpectRejections was called
	url      string
	closed   chan struct{}
	once     sync.Once
}

// New returns a server that is not listening; serve it with an http.Server.
// report, when not nil, is told about every out-of-contract request and
// every request that found no scripted reply.
func New(report func(msg string)) *Server {
	return &Server{report: report, closed: make(chan struct{})}
}

// NewServer starts a server for one test on a local port and stops it when
// the test ends. Out-of-contract requests and requests without a scripted
// reply fail the test (see ExpectRejections).
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := New(nil)
	s.report = func(msg string) {
		s.mu.Lock()
		tolerate := s.tolerate
		s.mu.Unlock()
		if tolerate && strings.Contains(msg, "out of contract") {
			t.Logf("%s", msg)
			return
		}
		t.Errorf("%s", msg)
	}
	hs := httptest.NewServer(s)
	s.url = hs.URL + "/v1"
	t.Cleanup(func() {
		s.Close() // release held replies first, or hs.Close would wait for them
		hs.CloseClientConnections()
		hs.Close()
	})
	return s
}

// URL is the base URL to configure as a provider's base URL; it ends in /v1.
// It is "" for a server made with New.
func (s *Server) URL() string { return s.url }

// Close releases every reply held by Block or a delay. The server answers
// nothing more than 503 afterwards.
func (s *Server) Close() { s.once.Do(func() { close(s.closed) }) }

// Enqueue appends replies; each request takes the oldest one.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Handle sets the function answering requests when the queue is empty. It
// may be called concurrently, once per request.
func (s *Server) Handle(h func(req ChatRequest) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handle = h
}

// ExpectRejections is for tests that send out-of-contract requests on
// purpose: they are still answered 422, but no longer fail the test.
func (s *Server) ExpectRejections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tolerate = true
}

// Requests returns every chat completion request received so far, in order
// of arrival, including rejected ones.
func (s *Server) Requests() []ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatRequest(nil), s.reqs...)
}

// Pending is the number of enqueued replies not yet used.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.closed:
		writeError(w, http.StatusServiceUnavailable, "llmtest: server closed", "server_closed")
		return
	default:
	}
	switch {
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "fake-model", "object": "model", "created": 0, "owned_by": "llmtest"},
		}})
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("llmtest: no route %s %s", r.Method, r.URL.Path), "not_found")
	}
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: read body: "+err.Error(), "bad_body")
		return
	}
	req, violation := parseRequest(body)
	req.Authorization = r.Header.Get("Authorization")
	req.Violation = violation

	s.mu.Lock()
	req.Seq = len(s.reqs) + 1
	s.reqs = append(s.reqs, req)
	var reply Reply
	found := false
	if violation == "" {
		if len(s.queue) > 0 {
			reply, s.queue, found = s.queue[0], s.queue[1:], true
		}
	}
	handle := s.handle
	s.mu.Unlock()

	if violation != "" {
		s.tell(fmt.Sprintf("llmtest: request #%d out of contract: %s", req.Seq, violation))
		writeError(w, http.StatusUnprocessableEntity, "llmtest: request out of contract: "+violation, "out_of_contract")
		return
	}
	if !found && handle != nil {
		reply, found = handle(req), true
	}
	if !found {
		msg := fmt.Sprintf("llmtest: no reply scripted for request #%d (model %q, %d messages)", req.Seq, req.Model, len(req.Messages))
		s.tell(msg)
		writeError(w, http.StatusInternalServerError, msg, "no_scripted_reply")
		return
	}
	s.serve(w, r, req, reply)
}

func (s *Server) tell(msg string) {
	if s.report != nil {
		s.report(msg)
	}
}

// wait sleeps d; false when the client left or the server closed meanwhile.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		return false
	}
}

// hold waits for block to close; false when the client left or the server
// closed meanwhile.
func (s *Server) hold(r *http.Request, block <-chan struct{}) bool {
	if block == nil {
		return true
	}
	select {
	case <-block:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		return false
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, req ChatRequest, reply Reply) {
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status >= 400 {
		if !s.hold(r, reply.Block) {
			return
		}
		msg := reply.Error
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		writeError(w, reply.Status, msg, "llmtest_scripted_error")
		return
	}
	if !req.Stream {
		if !s.hold(r, reply.Block) {
			return
		}
		writeJSON(w, http.StatusOK, completion(req, reply))
		return
	}
	s.stream(w, r, req, reply)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req ChatRequest, reply Reply) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	cw := chunkWriter{req: req, send: send}
	pieces := reply.pieces(req.Seq)
	for i := 0; ; i++ {
		if reply.Block != nil && i == min(reply.BlockAfter, len(pieces)) && !s.hold(r, reply.Block) {
			return
		}
		if reply.Disconnect && i == min(reply.DisconnectAfter, len(pieces)) {
			// Abort the connection without the terminating chunk of the
			// chunked encoding: the client sees an unexpected EOF.
			panic(http.ErrAbortHandler)
		}
		if i == len(pieces) {
			break
		}
		delay := pieces[i].delay
		if delay == 0 {
			delay = reply.Delay
		}
		if !s.wait(r, delay) {
			return
		}
		cw.delta(pieces[i].delta, nil)
	}
	if reply.StreamError != "" {
		send(map[string]any{"error": map[string]any{"message": reply.StreamError, "type": "server_error", "code": nil}})
		return
	}
	if len(pieces) == 0 {
		cw.delta(map[string]any{"content": ""}, nil) // carries the role
	}
	finish := reply.finishReason()
	cw.delta(map[string]any{}, &finish)
	if req.IncludeUsage && !reply.NoUsage {
		send(cw.base([]any{}, reply.usage(req)))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// piece is one streamed delta of a reply, before framing.
type piece struct {
	delta map[string]any
	delay time.Duration
}

// pieces lays out a reply's chunks and tool call fragments in stream order.
func (reply Reply) pieces(seq int) []piece {
	var out []piece
	for _, c := range reply.Chunks {
		d := map[string]any{}
		if c.Content != "" || c.Reasoning == "" {
			d["content"] = c.Content
		}
		if c.Reasoning != "" {
			d["reasoning_content"] = c.Reasoning
		}
		out = append(out, piece{delta: d, delay: c.Delay})
	}
	frags := make([][]map[string]any, len(reply.ToolCalls))
	for i, tc := range reply.ToolCalls {
		parts := tc.Fragments
		if len(parts) == 0 {
			parts = []string{tc.Arguments}
		}
		for j, part := range parts {
			call := map[string]any{"index": i, "function": map[string]any{"arguments": part}}
			if j == 0 {
				if !tc.OmitID {
					call["id"] = tc.callID(seq, i)
				}
				call["type"] = "function"
				call["function"].(map[string]any)["name"] = tc.Name
			}
			frags[i] = append(frags[i], call)
		}
	}
	if reply.InterleaveToolCalls {
		for j := 0; ; j++ {
			more := false
			for i := range frags {
				if j < len(frags[i]) {
					out = append(out, piece{delta: map[string]any{"tool_calls": []any{frags[i][j]}}})
					more = true
				}
			}
			if !more {
				break
			}
		}
	} else {
		for i := range frags {
			for _, f := range frags[i] {
				out = append(out, piece{delta: map[string]any{"tool_calls": []any{f}}})
			}
		}
	}
	return out
}

func (tc ToolCall) callID(seq, index int) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("call_%d_%d", seq, index)
}

func (tc ToolCall) arguments() string {
	if len(tc.Fragments) > 0 {
		return strings.Join(tc.Fragments, "")
	}
	return tc.Arguments
}

func (reply Reply) finishReason() string {
	switch {
	case reply.FinishReason != "":
		return reply.FinishReason
	case len(reply.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

// usage is the scripted usage, or an estimate of one token per four bytes.
func (reply Reply) usage(req ChatRequest) Usage {
	u := Usage{}
	if reply.Usage != nil {
		u = *reply.Usage
	} else {
		in := 0
		for _, m := range req.Messages {
			in += len(m.Content)
			for _, tc := range m.ToolCalls {
				in += len(tc.Name) + len(tc.Arguments)
			}
		}
		out := 0
		for _, c := range reply.Chunks {
			out += len(c.Content) + len(c.Reasoning)
		}
		for _, tc := range reply.ToolCalls {
			out += len(tc.Name) + len(tc.arguments())
		}
		u = Usage{PromptTokens: int64(in/4 + 1), CompletionTokens: int64(out/4 + 1)}
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// chunkWriter frames deltas as chat.completion.chunk objects.
type chunkWriter struct {
	req       ChatRequest
	send      func(any)
	roleSent  bool
	createdAt int64
}

func (cw *chunkWriter) base(choices []any, usage any) map[string]any {
	if cw.createdAt == 0 {
		cw.createdAt = time.Now().Unix()
	}
	m := map[string]any{
		"id":      fmt.Sprintf("chatcmpl-llmtest-%d", cw.req.Seq),
		"object":  "chat.completion.chunk",
		"created": cw.createdAt,
		"model":   cw.req.Model,
		"choices": choices,
	}
	if cw.req.IncludeUsage {
		m["usage"] = usage // null on every chunk but the last, as OpenAI does
	}
	return m
}

func (cw *chunkWriter) delta(d map[string]any, finish *string) {
	if !cw.roleSent {
		d["role"] = "assistant"
		cw.roleSent = true
	}
	var fr any // null unless finishing
	if finish != nil {
		fr = *finish
	}
	cw.send(cw.base([]any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": fr}}, nil))
}

// completion is the non-streaming answer.
func completion(req ChatRequest, reply Reply) map[string]any {
	var content, reasoning strings.Builder
	for _, c := range reply.Chunks {
		content.WriteString(c.Content)
		reasoning.WriteString(c.Reasoning)
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if content.Len() > 0 || len(reply.ToolCalls) == 0 {
		msg["content"] = content.String()
	}
	if reasoning.Len() > 0 {
		msg["reasoning_content"] = reasoning.String()
	}
	if len(reply.ToolCalls) > 0 {
		var calls []any
		for i, tc := range reply.ToolCalls {
			call := map[string]any{"type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.arguments()}}
			if !tc.OmitID {
				call["id"] = tc.callID(req.Seq, i)
			}
			calls = append(calls, call)
		}
		msg["tool_calls"] = calls
	}
	out := map[string]any{
		"id":      fmt.Sprintf("chatcmpl-llmtest-%d", req.Seq),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": reply.finishReason()}},
	}
	if !reply.NoUsage {
		out["usage"] = reply.usage(req)
	}
	return out
}

func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func writeError(w http.ResponseWriter, status int, msg, code string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": errorType(status), "param": nil, "code": code,
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
