package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// ChatRequest is a chat completion request as the server received it.
type ChatRequest struct {
	Seq           int // 1 for the first request the server received, and so on
	Model         string
	Messages      []Message
	Tools         []Tool
	Stream        bool
	IncludeUsage  bool   // stream_options.include_usage
	Authorization string // the Authorization header, "" when absent
	// Extra holds the top-level body fields other than model, messages,
	// tools, stream and stream_options (e.g. enable_thinking from extra_body).
	Extra map[string]json.RawMessage
	Body  json.RawMessage // the body exactly as received
	// Violation says why the request was answered 422; "" when it kept the
	// contract.
	Violation string
}

// Message is one transcript entry of a request. Content is the string
// content, or the text parts of an array content joined together.
type Message struct {
	Role       string
	Content    string
	Name       string
	ToolCallID string
	ToolCalls  []ToolCall
	HasContent bool // content was present and not null
}

// Tool is a function declared in a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// LastUserMessage returns the content of the last user message, "" if none.
func (r ChatRequest) LastUserMessage() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// knownTopLevel are the request fields of the chat completions API that
// compatible providers commonly accept, plus the extra_body whitelist of
// the platform. Anything else is out of contract.
func knownTopLevel() []string {
	return []string{
		"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options",
		"temperature", "top_p", "max_tokens", "max_completion_tokens", "n", "stop", "seed", "user",
		"response_format", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs",
		"metadata", "store", "service_tier", "modalities", "prediction", "prompt_cache_key",
		"safety_identifier", "verbosity",
		// extra_body whitelist
		"enable_thinking", "thinking_budget", "thinking", "reasoning", "reasoning_effort",
	}
}

// wireMessage and wireTool are the request shapes as sent on the wire.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// parseRequest decodes body and checks it against the contract every
// request from the platform must keep. It returns the request as far as it
// could be decoded and the first violation found ("" when none).
//
// The contract:
//   - the body is a JSON object whose top-level fields are known (see
//     knownTopLevel); model is a non-empty string; messages is non-empty;
//   - roles are system, developer, user, assistant or tool; system, developer
//     and user messages have content; an assistant message has content or
//     tool_calls;
//   - every assistant tool call has type "function", a non-empty id unique in
//     the transcript, a function name, and arguments that are a JSON object;
//   - an assistant message with tool_calls is followed by exactly one tool
//     message per call (in any order) before any other message, and before
//     the transcript ends; a tool message must answer a pending call of the
//     closest preceding assistant message;
//   - tools are type "function" with a unique name matching
//     ^[a-zA-Z0-9_-]{1,64}$ and parameters, when present, a JSON object;
//     tool_choice needs tools;
//   - stream_options only with stream: true.
func parseRequest(body []byte) (ChatRequest, string) {
	req := ChatRequest{Body: append(json.RawMessage(nil), body...)}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return req, "body is not a JSON object"
	}
	known := knownTopLevel()
	var unknown []string
	for k, v := range top {
		switch k {
		case "model", "messages", "tools", "stream", "stream_options":
		default:
			if req.Extra == nil {
				req.Extra = map[string]json.RawMessage{}
			}
			req.Extra[k] = v
		}
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}

	if err := json.Unmarshal(top["model"], &req.Model); err != nil || req.Model == "" {
		return req, "model must be a non-empty string"
	}
	if raw, ok := top["stream"]; ok {
		if err := json.Unmarshal(raw, &req.Stream); err != nil {
			return req, "stream must be a boolean"
		}
	}
	if raw, ok := top["stream_options"]; ok && !isNull(raw) {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return req, "stream_options must be an object"
		}
		req.IncludeUsage = so.IncludeUsage
		if !req.Stream {
			return req, "stream_options is only allowed when stream is true"
		}
	}

	var wms []wireMessage
	if err := json.Unmarshal(top["messages"], &wms); err != nil {
		return req, fmt.Sprintf("messages must be an array of message objects: %v", err)
	}
	for _, wm := range wms {
		m := Message{Role: wm.Role, Name: wm.Name, ToolCallID: wm.ToolCallID}
		m.Content, m.HasContent = contentText(wm.Content)
		for _, tc := range wm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, m)
	}
	if raw, ok := top["tools"]; ok && !isNull(raw) {
		var wts []wireTool
		if err := json.Unmarshal(raw, &wts); err != nil {
			return req, fmt.Sprintf("tools must be an array of tool objects: %v", err)
		}
		for _, wt := range wts {
			req.Tools = append(req.Tools, Tool{Name: wt.Function.Name, Description: wt.Function.Description, Parameters: wt.Function.Parameters})
		}
		if v := checkTools(wts); v != "" {
			return req, v
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return req, fmt.Sprintf("unknown top-level fields: %s", strings.Join(unknown, ", "))
	}
	if _, ok := top["tool_choice"]; ok && len(req.Tools) == 0 {
		return req, "tool_choice is set but no tools are declared"
	}
	if len(wms) == 0 {
		return req, "messages must not be empty"
	}
	return req, checkTranscript(wms)
}

func checkTools(wts []wireTool) string {
	toolNameRE := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	seen := map[string]bool{}
	for i, wt := range wts {
		if wt.Type != "function" {
			return fmt.Sprintf("tools[%d]: type must be \"function\", got %q", i, wt.Type)
		}
		name := wt.Function.Name
		if !toolNameRE.MatchString(name) {
			return fmt.Sprintf("tools[%d]: function name %q must match ^[a-zA-Z0-9_-]{1,64}$", i, name)
		}
		if seen[name] {
			return fmt.Sprintf("tools[%d]: duplicate function name %q", i, name)
		}
		seen[name] = true
		if p := wt.Function.Parameters; len(p) > 0 && !isNull(p) && !isObject(p) {
			return fmt.Sprintf("tools[%d] (%s): parameters must be a JSON Schema object", i, name)
		}
	}
	return ""
}

func checkTranscript(wms []wireMessage) string {
	callIDs := map[string]int{} // tool call id → index of the assistant message declaring it
	var pending []string        // calls of the last assistant message not yet answered
	pendingFrom := -1
	for i, m := range wms {
		if m.Role != "tool" && len(pending) > 0 {
			return fmt.Sprintf("messages[%d] (assistant) has tool_calls %s without tool results before messages[%d] (%s)",
				pendingFrom, strings.Join(pending, ", "), i, m.Role)
		}
		_, hasContent := contentText(m.Content)
		switch m.Role {
		case "system", "developer", "user":
			if !hasContent {
				return fmt.Sprintf("messages[%d] (%s) has no content", i, m.Role)
			}
		case "assistant":
			if !hasContent && len(m.ToolCalls) == 0 {
				return fmt.Sprintf("messages[%d] (assistant) has neither content nor tool_calls", i)
			}
			for j, tc := range m.ToolCalls {
				where := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
				if tc.Type != "function" {
					return fmt.Sprintf("%s: type must be \"function\", got %q", where, tc.Type)
				}
				if tc.ID == "" {
					return where + ": empty id"
				}
				if prev, dup := callIDs[tc.ID]; dup {
					return fmt.Sprintf("%s: id %q already used in messages[%d]", where, tc.ID, prev)
				}
				callIDs[tc.ID] = i
				if tc.Function.Name == "" {
					return where + ": empty function name"
				}
				if !isObject([]byte(tc.Function.Arguments)) {
					return fmt.Sprintf("%s (%s): arguments must be a JSON object, got %q", where, tc.Function.Name, clip(tc.Function.Arguments))
				}
				pending = append(pending, tc.ID)
			}
			if len(m.ToolCalls) > 0 {
				pendingFrom = i
			}
		case "tool":
			if m.ToolCallID == "" {
				return fmt.Sprintf("messages[%d] (tool) has no tool_call_id", i)
			}
			k := slices.Index(pending, m.ToolCallID)
			if k < 0 {
				if _, ok := callIDs[m.ToolCallID]; ok {
					return fmt.Sprintf("messages[%d] (tool): tool_call_id %q was already answered or belongs to an earlier turn", i, m.ToolCallID)
				}
				return fmt.Sprintf("messages[%d] (tool): tool_call_id %q matches no preceding assistant tool call", i, m.ToolCallID)
			}
			pending = slices.Delete(pending, k, k+1)
		default:
			return fmt.Sprintf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("messages[%d] (assistant) has tool_calls %s without tool results at the end of the transcript",
			pendingFrom, strings.Join(pending, ", "))
	}
	return ""
}

// contentText flattens a message content: a string, or an array of parts
// whose text parts are joined. ok is false for absent or null content.
func contentText(raw json.RawMessage) (text string, ok bool) {
	if len(raw) == 0 || isNull(raw) {
		return "", false
	}
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}

func isNull(raw []byte) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func isObject(raw []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
