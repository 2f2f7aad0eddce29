// Package contentguard is the original's 内容安全: a keyword filter
// (Aho–Corasick over the keyword list of the system settings, rebuilt when
// the settings' version moves, so a change needs no restart) for user input,
// streamed output and final output.
//
// Served: the matcher, its streaming scanner (Guard.Scanner, used by
// agent-step on streamed tokens), the input check at intake, the final
// output check (CheckOutput) and optional LLM moderation (LLMModerator).
//
// Imported by: functions/intake, shared/bootstrap/identity, shared/bootstrap/chat, tests/bench.
// May import: shared/failure, shared/sysconfig, shared/llm.
package contentguard

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Matcher finds any of a fixed set of keywords in text, case-insensitively
// (simple Unicode folding), in one pass over the text: an Aho–Corasick
// automaton over runes. A zero or empty Matcher matches nothing.
type Matcher struct {
	// nodes[0] is the root. next maps a rune to a child; fail is the
	// longest proper suffix that is also a trie path; out is the length in
	// runes of the longest keyword ending here (0: none), following fail.
	nodes   []node
	maxRune int // the longest keyword in runes
}

type node struct {
	next map[rune]int32
	fail int32
	out  int32 // index+1 of a keyword ending here (via fail links), 0 if none
}

func fold(r rune) rune { return unicode.ToLower(r) }

// NewMatcher builds the automaton. Empty and whitespace-only keywords are ignored.
func NewMatcher(keywords []string) *Matcher {
	m := &Matcher{nodes: []node{{}}}
	for i, kw := range keywords {
		kw = strings.TrimSpace(kw)
		if kw == "" {
			continue
		}
		cur, n := int32(0), 0
		for _, r := range kw {
			r = fold(r)
			n++
			nx, ok := m.nodes[cur].next[r]
			if !ok {
				if m.nodes[cur].next == nil {
					m.nodes[cur].next = map[rune]int32{}
				}
				m.nodes = append(m.nodes, node{})
				nx = int32(len(m.nodes) - 1)
				m.nodes[cur].next[r] = nx
			}
			cur = nx
		}
		if m.nodes[cur].out == 0 {
			m.nodes[cur].out = int32(i + 1)
		}
		if n > m.maxRune {
			m.maxRune = n
		}
	}
	// Breadth-first fail links.
	queue := make([]int32, 0, len(m.nodes))
	for _, c := range m.nodes[0].next {
		queue = append(queue, c)
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for r, v := range m.nodes[u].next {
			f := m.nodes[u].fail
			for {
				if w, ok := m.nodes[f].next[r]; ok && w != v {
					m.nodes[v].fail = w
					break
				}
				if f == 0 {
					m.nodes[v].fail = 0
					break
				}
				f = m.nodes[f].fail
			}
			if m.nodes[v].out == 0 {
				m.nodes[v].out = m.nodes[m.nodes[v].fail].out
			}
			queue = append(queue, v)
		}
	}
	return m
}

// Empty reports whether the matcher has no keywords.
func (m *Matcher) Empty() bool { return m == nil || len(m.nodes) <= 1 }

func (m *Matcher) step(state int32, r rune) int32 {
	r = fold(r)
	for {
		if nx, ok := m.nodes[state].next[r]; ok {
			return nx
		}
		if state == 0 {
			return 0
		}
		state = m.nodes[state].fail
	}
}

// Match returns the index of a keyword found in text (as given to
// NewMatcher), or -1.
func (m *Matcher) Match(text string) int {
	if m.Empty() {
		return -1
	}
	var s int32
	for _, r := range text {
		s = m.step(s, r)
		if o := m.nodes[s].out; o != 0 {
			return int(o - 1)
		}
	}
	return -1
}

// Stream scans text arriving in chunks (streamed model output): it keeps the
// automaton's state between chunks, so a keyword split across chunks is
// found, and each chunk costs time linear in its own length only.
type Stream struct {
	m     *Matcher
	state int32
	tail  []byte // an incomplete UTF-8 sequence at the end of the last chunk
}

// NewStream starts a scan with m (nil: matches nothing).
func (m *Matcher) NewStream() *Stream { return &Stream{m: m} }

// Write scans the next chunk and returns the index of a keyword that ends in
// it, or -1.
func (s *Stream) Write(chunk string) int {
	if s.m.Empty() {
		return -1
	}
	if len(s.tail) > 0 {
		need := append(s.tail, chunk...)
		s.tail = nil
		chunk = string(need)
	}
	for i := 0; i < len(chunk); {
		r, n := utf8.DecodeRuneInString(chunk[i:])
		if r == utf8.RuneError && n <= 1 && !utf8.FullRuneInString(chunk[i:]) {
			s.tail = append(s.tail[:0], chunk[i:]...)
			return -1
		}
		i += n
		s.state = s.m.step(s.state, r)
		if o := s.m.nodes[s.state].out; o != 0 {
			return int(o - 1)
		}
	}
	return -1
}
