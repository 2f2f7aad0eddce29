package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Script drives a server from a JSON file (cmd/fakellm -script). Format:
//
//	{
//	  "after": "cycle",            // when replies run out: "cycle" (default) starts over,
//	                               // "repeat_last" keeps answering the last one, "fail" answers 500
//	  "replies": [
//	    {"text": ["Hel", "lo"]},                          // content chunks, one per element
//	    {"reasoning": ["Let me think."], "text": ["Hi"]}, // reasoning_content chunks come first
//	    {"echo": true},                                   // the last user message, as one chunk
//	    {"tool_calls": [
//	      {"name": "search", "arguments": {"q": "go"}},   // arguments: a JSON object, or a string of JSON text
//	      {"id": "call_x", "name": "calc", "fragments": ["{\"a\":", "1}"]}  // streamed in these pieces
//	    ], "interleave_tool_calls": true},
//	    {"chunks": [{"content": "a", "delay_ms": 50}, {"reasoning": "b"}]}, // full control, replaces text/reasoning
//	    {"status": 429, "error": "slow down", "headers": {"Retry-After": "1"}},
//	    {"text": ["partial"], "disconnect_after": 1},     // drop the connection after 1 chunk
//	    {"text": ["x"], "stream_error": "overloaded"},    // error event instead of a finish_reason
//	    {"text": ["x"], "usage": {"prompt_tokens": 10, "completion_tokens": 2}, "finish_reason": "length"},
//	    {"text": ["x"], "no_usage": true, "delay_ms": 20} // delay_ms: before every chunk
//	  ]
//	}
//
// Replies are handed out in order across all clients; the server is
// otherwise stateless, so one script can serve a benchmark's many workers.
type Script struct {
	After   string        `json:"after"`
	Replies []ScriptReply `json:"replies"`

	mu   sync.Mutex
	next int
}

// ScriptReply is the JSON form of a Reply (see Script for an example).
type ScriptReply struct {
	Text                []string          `json:"text"`
	Reasoning           []string          `json:"reasoning"`
	Echo                bool              `json:"echo"`
	Chunks              []ScriptChunk     `json:"chunks"`
	ToolCalls           []ScriptToolCall  `json:"tool_calls"`
	InterleaveToolCalls bool              `json:"interleave_tool_calls"`
	FinishReason        string            `json:"finish_reason"`
	Usage               *Usage            `json:"usage"`
	NoUsage             bool              `json:"no_usage"`
	DelayMS             int               `json:"delay_ms"`
	DisconnectAfter     *int              `json:"disconnect_after"`
	StreamError         string            `json:"stream_error"`
	Status              int               `json:"status"`
	Error               string            `json:"error"`
	Headers             map[string]string `json:"headers"`
}

// ScriptChunk is the JSON form of a Chunk.
type ScriptChunk struct {
	Content   string `json:"content"`
	Reasoning string `json:"reasoning"`
	DelayMS   int    `json:"delay_ms"`
}

// ScriptToolCall is the JSON form of a ToolCall.
type ScriptToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Fragments []string        `json:"fragments"`
	OmitID    bool            `json:"omit_id"`
}

// ParseScript reads a script and checks it.
func ParseScript(data []byte) (*Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse script: %w", err)
	}
	switch s.After {
	case "":
		s.After = "cycle"
	case "cycle", "repeat_last", "fail":
	default:
		return nil, fmt.Errorf("script: after must be cycle, repeat_last or fail, got %q", s.After)
	}
	if len(s.Replies) == 0 {
		return nil, fmt.Errorf("script: no replies")
	}
	for i, r := range s.Replies {
		if len(r.Chunks) > 0 && (len(r.Text) > 0 || len(r.Reasoning) > 0 || r.Echo) {
			return nil, fmt.Errorf("script: replies[%d]: chunks replaces text, reasoning and echo; use one or the other", i)
		}
		if r.Status != 0 && (r.Status < 400 || r.Status > 599) {
			return nil, fmt.Errorf("script: replies[%d]: status must be 400-599", i)
		}
		for j, tc := range r.ToolCalls {
			if tc.Name == "" {
				return nil, fmt.Errorf("script: replies[%d].tool_calls[%d]: name is required", i, j)
			}
			if _, err := tc.arguments(); err != nil {
				return nil, fmt.Errorf("script: replies[%d].tool_calls[%d]: %w", i, j, err)
			}
		}
	}
	return &s, nil
}

// Handler returns a function for Server.Handle that answers from the script.
func (s *Script) Handler() func(ChatRequest) Reply {
	return func(req ChatRequest) Reply {
		s.mu.Lock()
		i := s.next
		s.next++
		s.mu.Unlock()
		n := len(s.Replies)
		if i >= n {
			switch s.After {
			case "repeat_last":
				i = n - 1
			case "fail":
				return Fail(http.StatusInternalServerError, fmt.Sprintf("llmtest: script exhausted after %d replies", n))
			default:
				i %= n
			}
		}
		return s.Replies[i].Reply(req)
	}
}

// Reply converts the scripted reply for req.
func (sr ScriptReply) Reply(req ChatRequest) Reply {
	r := Reply{
		InterleaveToolCalls: sr.InterleaveToolCalls,
		FinishReason:        sr.FinishReason,
		Usage:               sr.Usage,
		NoUsage:             sr.NoUsage,
		Delay:               time.Duration(sr.DelayMS) * time.Millisecond,
		StreamError:         sr.StreamError,
		Status:              sr.Status,
		Error:               sr.Error,
	}
	for _, c := range sr.Chunks {
		r.Chunks = append(r.Chunks, Chunk{Content: c.Content, Reasoning: c.Reasoning, Delay: time.Duration(c.DelayMS) * time.Millisecond})
	}
	for _, t := range sr.Reasoning {
		r.Chunks = append(r.Chunks, Chunk{Reasoning: t})
	}
	for _, t := range sr.Text {
		r.Chunks = append(r.Chunks, Chunk{Content: t})
	}
	if sr.Echo {
		r.Chunks = append(r.Chunks, Chunk{Content: req.LastUserMessage()})
	}
	for _, tc := range sr.ToolCalls {
		args, _ := tc.arguments() // checked by ParseScript
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Name, Arguments: args, Fragments: tc.Fragments, OmitID: tc.OmitID})
	}
	if sr.DisconnectAfter != nil {
		r.Disconnect, r.DisconnectAfter = true, *sr.DisconnectAfter
	}
	if len(sr.Headers) > 0 {
		r.Header = http.Header{}
		for k, v := range sr.Headers {
			r.Header.Set(k, v)
		}
	}
	return r
}

// arguments is the JSON text of the call's arguments: a JSON string is taken
// as the text itself, an object is compacted, absent means "{}".
func (tc ScriptToolCall) arguments() (string, error) {
	if len(tc.Fragments) > 0 {
		return "", nil
	}
	raw := bytes.TrimSpace(tc.Arguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	if raw[0] != '{' {
		return "", fmt.Errorf("arguments must be a JSON object or a string of JSON text")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}
