package runstream

import (
	"bytes"
	"encoding/json"
)

// compactEnvelope turns a verbose envelope into the compact one the web UI
// asks for with ?verbose=false (contracts §3.7): {run_id, thread_id,
// request_id?, payload, schema_version} with only the fields the UI renders.
// schema_version (an addition to the original's compact shape) tells clients
// which version of the payload types (wire.go) they read. Data that is not a
// JSON object passes through unchanged.
func compactEnvelope(event string, data []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var env map[string]any
	if err := dec.Decode(&env); err != nil || env == nil {
		return data
	}
	payload := env["payload"]
	p, _ := payload.(map[string]any)

	c := pickPresent(env, "run_id", "thread_id", "schema_version")
	if event == EventMetadata {
		c["payload"] = pickPresent(p, "run_type", "source")
		return marshalCompact(c, data)
	}
	if rid := requestIDFromPayload(p); rid != "" {
		c["request_id"] = rid
	}
	c["payload"] = compactPayload(event, p)
	return marshalCompact(c, data)
}

func marshalCompact(v map[string]any, fallback []byte) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return fallback
	}
	return b
}

// pickPresent copies the keys of m that are present (even if null).
func pickPresent(m map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(keys)+2)
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// truthy mirrors Python truthiness for JSON values.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// set means "not None and not empty string".
func set(v any, ok bool) bool {
	if !ok || v == nil {
		return false
	}
	s, isStr := v.(string)
	return !isStr || s != ""
}

func compactPayload(event string, p map[string]any) map[string]any {
	out := map[string]any{}
	if p == nil {
		return out
	}
	if event == EventMessages { // {"items": [chunk…]}, as the Batcher writes them
		if items, ok := p["items"].([]any); ok {
			ci := make([]any, len(items))
			for i, it := range items {
				if m, ok := it.(map[string]any); ok {
					ci[i] = compactChunk(m)
				} else {
					ci[i] = it
				}
			}
			out["items"] = ci
		}
		return out
	}
	for k, v := range p {
		if k != "chunk" && k != "request_id" {
			out[k] = v
		}
	}
	if chunk, ok := p["chunk"].(map[string]any); ok {
		out["chunk"] = compactChunk(chunk)
	}
	return out
}

var chunkKeys = []string{
	"status", "run_id", "message", "error_type", "error_message", "retryable", "job_try",
	"questions", "approval", "interrupt_info", "source", "agent_state", "compression",
}

func compactChunk(chunk map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range chunkKeys {
		if v, ok := chunk[k]; set(v, ok) {
			out[k] = v
		}
	}
	if se, ok := chunk["stream_event"].(map[string]any); ok {
		out["stream_event"] = compactStreamEvent(se)
	}
	if ev, ok := chunk["event"].(map[string]any); ok {
		out["event"] = compactToolEvent(ev)
	}
	return out
}

func compactStreamEvent(se map[string]any) map[string]any {
	out := map[string]any{}
	switch se["type"] {
	case "message_delta":
		for _, k := range []string{"type", "message_id", "content", "reasoning_content", "additional_reasoning_content"} {
			if truthy(se[k]) {
				out[k] = se[k]
			}
		}
	case "tool_call", "tool_call_delta":
		for _, k := range []string{"type", "message_id", "tool_call_id", "name", "args", "args_delta"} {
			if v, ok := se[k]; set(v, ok) {
				out[k] = v
			}
		}
		if truthy(se["index"]) {
			out["index"] = se["index"]
		}
	default:
		for k, v := range se {
			if k != "thread_id" && k != "namespace" {
				out[k] = v
			}
		}
	}
	return out
}

func compactToolEvent(ev map[string]any) map[string]any {
	out := map[string]any{}
	if truthy(ev["method"]) {
		out["method"] = ev["method"]
	}
	if data, ok := ev["data"].(map[string]any); ok {
		cd := map[string]any{}
		for _, k := range []string{"event", "tool_call_id", "tool_name", "output", "error"} {
			if v, ok := data[k]; set(v, ok) {
				cd[k] = v
			}
		}
		if len(cd) > 0 {
			out["data"] = cd
		}
	}
	return out
}

func requestIDFromChunk(v any) string {
	chunk, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if rid, ok := chunk["request_id"].(string); ok && rid != "" {
		return rid
	}
	return ""
}

func requestIDFromPayload(p map[string]any) string {
	if p == nil {
		return ""
	}
	if rid, ok := p["request_id"].(string); ok && rid != "" {
		return rid
	}
	if rid := requestIDFromChunk(p["chunk"]); rid != "" {
		return rid
	}
	if items, ok := p["items"].([]any); ok {
		for _, it := range items {
			if rid := requestIDFromChunk(it); rid != "" {
				return rid
			}
		}
	}
	return ""
}
