package vector

import "slices"

// cand is a scored slot.
type cand struct {
	score float32
	slot  int32
}

// topK keeps the k best candidates seen: a min-heap on score whose root is
// the worst kept candidate, so most candidates are rejected by one compare.
type topK struct {
	k int
	h []cand
}

func newTopK(k int) *topK { return &topK{k: k, h: make([]cand, 0, k)} }

// threshold is the score a candidate must beat once the heap is full.
func (t *topK) full() bool { return len(t.h) == t.k }

func (t *topK) min() float32 { return t.h[0].score }

func (t *topK) push(score float32, slot int32) {
	if len(t.h) < t.k {
		t.h = append(t.h, cand{score, slot})
		t.up(len(t.h) - 1)
		return
	}
	if score <= t.h[0].score {
		return
	}
	t.h[0] = cand{score, slot}
	t.down(0)
}

func (t *topK) up(i int) {
	h := t.h
	for i > 0 {
		p := (i - 1) / 2
		if h[p].score <= h[i].score {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (t *topK) down(i int) {
	h := t.h
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].score < h[l].score {
			m = r
		}
		if h[i].score <= h[m].score {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// merge pushes every candidate of o.
func (t *topK) merge(o *topK) {
	for _, c := range o.h {
		t.push(c.score, c.slot)
	}
}

// sortCands orders candidates best first.
func sortCands(cs []cand) {
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
}
