package testkit

import (
	"encoding/json"
	"strings"
)

// Rendered is what a client shows after reading a run stream: the final text
// of each streamed message, with discarded attempts removed.
type Rendered struct {
	// Messages maps stream message ids to their accumulated text.
	Messages map[string]string
	// Order is the message ids in first-seen order (discarded ones removed).
	Order []string
	// Final maps stream message ids marked final to their database message id.
	Final     map[string]float64
	Ends      int
	EndStatus string
	Retries   int
	Interrupt map[string]any
	IDs       []string // every event id seen, in order
}

// Render applies the client rules to events: message deltas accumulate per
// message id; a yuxi.retry marker discards every earlier message of its step
// except the current attempt's; each event id is applied once.
func Render(events []Event) Rendered {
	r := Rendered{Messages: map[string]string{}, Final: map[string]float64{}}
	seen := map[string]bool{}
	discardPrefixes := map[string]string{} // step prefix → the message id kept
	for _, e := range events {
		if e.ID != "" {
			if seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			r.IDs = append(r.IDs, e.ID)
		}
		p := e.Payload()
		switch e.Event {
		case "messages":
			items, _ := p["items"].([]any)
			for _, it := range items {
				chunk, _ := it.(map[string]any)
				se, _ := chunk["stream_event"].(map[string]any)
				if se == nil || se["type"] != "message_delta" {
					continue
				}
				id, _ := se["message_id"].(string)
				if isDiscarded(discardPrefixes, id) {
					continue
				}
				if _, ok := r.Messages[id]; !ok {
					r.Order = append(r.Order, id)
				}
				content, _ := se["content"].(string)
				r.Messages[id] += content
			}
		case "custom":
			chunk, _ := p["chunk"].(map[string]any)
			switch p["name"] {
			case "yuxi.retry":
				r.Retries++
				prefix, _ := chunk["discard_message_prefix"].(string)
				keep, _ := chunk["current_message_id"].(string)
				discardPrefixes[prefix] = keep
				for id := range r.Messages {
					if strings.HasPrefix(id, prefix) && id != keep {
						delete(r.Messages, id)
					}
				}
				r.Order = filter(r.Order, func(id string) bool { _, ok := r.Messages[id]; return ok })
			case "yuxi.message_final":
				id, _ := chunk["message_id"].(string)
				db, _ := chunk["db_message_id"].(float64)
				r.Final[id] = db
			}
		case "interrupt":
			r.Interrupt = p
		case "end":
			r.Ends++
			r.EndStatus, _ = p["status"].(string)
		}
	}
	return r
}

// Texts returns the rendered messages' texts in order.
func (r Rendered) Texts() []string {
	out := make([]string, 0, len(r.Order))
	for _, id := range r.Order {
		out = append(out, r.Messages[id])
	}
	return out
}

func filter(s []string, keep func(string) bool) []string {
	out := s[:0]
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// MustJSON marshals v.
func MustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func isDiscarded(prefixes map[string]string, id string) bool {
	for p, keep := range prefixes {
		if strings.HasPrefix(id, p) && id != keep {
			return true
		}
	}
	return false
}
