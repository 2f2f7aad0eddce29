package llm

import (
	"sort"
	"strconv"
	"strings"
)

// assembler accumulates streamed deltas into a Response.
type assembler struct {
	content   strings.Builder
	reasoning strings.Builder
	calls     []*callSlot
	byIndex   map[int]*callSlot // the slot currently receiving fragments for an index
	finish    string
	usage     Usage
}

type callSlot struct {
	index int
	seq   int // arrival order, to keep calls sharing an index in order
	id    string
	name  string
	args  strings.Builder
}

func (a *assembler) add(d Delta) {
	a.content.WriteString(d.Content)
	a.reasoning.WriteString(d.Reasoning)
	for _, tc := range d.ToolCalls {
		a.addToolCall(tc)
	}
}

func (a *assembler) addToolCall(tc ToolCallDelta) {
	if a.byIndex == nil {
		a.byIndex = map[int]*callSlot{}
	}
	slot := a.byIndex[tc.Index]
	// Some providers (Gemini's OpenAI layer among them) give every parallel
	// call index 0 and tell them apart only by id: a new id on an index that
	// already has one starts a new call.
	if slot == nil || (tc.ID != "" && slot.id != "" && tc.ID != slot.id) {
		slot = &callSlot{index: tc.Index, seq: len(a.calls)}
		a.calls = append(a.calls, slot)
		a.byIndex[tc.Index] = slot
	}
	if slot.id == "" {
		slot.id = tc.ID
	}
	// The name normally arrives once; some providers repeat it on every
	// fragment, a few split it.
	switch {
	case slot.name == "":
		slot.name = tc.Name
	case tc.Name != "" && tc.Name != slot.name:
		slot.name += tc.Name
	}
	slot.args.WriteString(tc.ArgumentsDelta)
}

func (a *assembler) response() Response {
	calls := append([]*callSlot(nil), a.calls...)
	sort.SliceStable(calls, func(i, j int) bool {
		if calls[i].index != calls[j].index {
			return calls[i].index < calls[j].index
		}
		return calls[i].seq < calls[j].seq
	})
	r := Response{
		Content:      a.content.String(),
		Reasoning:    a.reasoning.String(),
		FinishReason: a.finish,
		Usage:        a.usage,
	}
	used := map[string]bool{}
	for _, c := range calls {
		if c.id != "" {
			used[c.id] = true
		}
	}
	for i, c := range calls {
		id := c.id
		if id == "" {
			id = "call_" + strconv.Itoa(c.index)
			for n := i; used[id]; n++ { // several id-less calls on one index
				id = "call_" + strconv.Itoa(c.index) + "_" + strconv.Itoa(n)
			}
			used[id] = true
		}
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: id, Name: c.name, Arguments: c.args.String()})
	}
	return r
}
