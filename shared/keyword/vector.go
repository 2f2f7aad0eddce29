package keyword

import (
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// A term vector is a document's distinct terms with their frequencies. It is
// stored with the document (keyword_docs.terms) so that removing a document
// rewrites exactly the posting blocks of its terms, and so that a cache loads an
// index with one row per document instead of one row per posting.
//
// Encoding (bytea), terms in ascending byte order:
//
//	repeated { uvarint len(term) | term bytes | uvarint tf }
type termTF struct {
	term string
	tf   int
}

// maxTF bounds a stored term frequency (the cache keeps it in 16 bits).
const maxTF = 1<<16 - 1

var errBadVector = errors.New("keyword: corrupt term vector")

// preparedDoc is a document analysed for Apply.
type preparedDoc struct {
	id     string
	length int // number of terms, counting repeats: BM25's document length
	terms  []termTF
	vector []byte
}

// prepareDocs prepares docs, in order, spreading large batches over the
// available processors (analysis is the CPU-heavy part of indexing).
func prepareDocs(an Analyzer, docs []Doc) []preparedDoc {
	out := make([]preparedDoc, len(docs))
	workers := min(runtime.GOMAXPROCS(0), len(docs)/prepareBatch)
	if workers <= 1 {
		p := newPreparer(an)
		for i, d := range docs {
			out[i] = p.prepare(d)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := newPreparer(an)
			for {
				from := int(next.Add(prepareBatch)) - prepareBatch
				if from >= len(docs) {
					return
				}
				for i := from; i < min(from+prepareBatch, len(docs)); i++ {
					out[i] = p.prepare(docs[i])
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// prepareBatch is how many documents a worker of prepareDocs takes at once.
const prepareBatch = 32

// preparer analyses the documents of one worker of prepareDocs. With a
// wordAnalyzer it memoizes, for the worker's batch, each distinct word's
// term (so the stemmer or its shared cache is asked once per distinct word,
// not once per occurrence) and counts term frequencies by term number
// instead of sorting every occurrence. Not safe for concurrent use.
type preparer struct {
	an      Analyzer
	wa      wordAnalyzer     // nil: an is not one; prepare falls back to an.Terms
	ids     map[string]int32 // word as written (folded) → term number
	byTerm  map[string]int32 // term → term number
	terms   []string         // term number → term (an owned copy)
	counts  []int32          // term number → occurrences in the current document
	touched []int32          // term numbers of the current document
}

func newPreparer(an Analyzer) *preparer {
	p := &preparer{an: an}
	if wa, ok := an.(wordAnalyzer); ok {
		p.wa = wa
		p.ids = make(map[string]int32)
		p.byTerm = make(map[string]int32)
	}
	return p
}

func (p *preparer) prepare(d Doc) preparedDoc {
	if p.wa == nil {
		return prepareDoc(p.an, d)
	}
	length := 0
	p.wa.words(d.Text, func(w string, stem bool) {
		length++
		id, ok := p.ids[w]
		if !ok {
			id = p.termID(w, stem)
		}
		if p.counts[id] == 0 {
			p.touched = append(p.touched, id)
		}
		p.counts[id]++
	})
	slices.SortFunc(p.touched, func(a, b int32) int { return strings.Compare(p.terms[a], p.terms[b]) })
	vec := make([]termTF, len(p.touched))
	for i, id := range p.touched {
		vec[i] = termTF{term: p.terms[id], tf: min(int(p.counts[id]), maxTF)}
		p.counts[id] = 0
	}
	p.touched = p.touched[:0]
	return preparedDoc{id: d.ID, length: length, terms: vec, vector: encodeVector(vec)}
}

// termID numbers the term of a word seen for the first time. Words with the
// same term ("cell", "cells") share its number. Words and terms are copied:
// they may be substrings of a large text.
func (p *preparer) termID(w string, stem bool) int32 {
	t := w
	if stem {
		t = p.wa.stem(w)
	}
	id, ok := p.byTerm[t]
	if !ok {
		id = int32(len(p.terms))
		t = strings.Clone(t)
		p.terms = append(p.terms, t)
		p.counts = append(p.counts, 0)
		p.byTerm[t] = id
	}
	p.ids[strings.Clone(w)] = id
	return id
}

// prepareDoc analyses d with an.Terms: the path for analyzers that are not
// wordAnalyzers.
func prepareDoc(an Analyzer, d Doc) preparedDoc {
	terms := an.Terms(d.Text)
	length := len(terms)
	slices.Sort(terms)
	vec := make([]termTF, 0, len(terms)/2+1)
	for i := 0; i < len(terms); {
		j := i + 1
		for j < len(terms) && terms[j] == terms[i] {
			j++
		}
		// Clone: analyzer terms may be substrings of a large text, which
		// should not be kept alive by the few terms that outlive Apply.
		vec = append(vec, termTF{term: strings.Clone(terms[i]), tf: min(j-i, maxTF)})
		i = j
	}
	return preparedDoc{id: d.ID, length: length, terms: vec, vector: encodeVector(vec)}
}

func encodeVector(v []termTF) []byte {
	n := 0
	for _, t := range v {
		n += len(t.term) + 2*binary.MaxVarintLen16
	}
	b := make([]byte, 0, n)
	for _, t := range v {
		b = binary.AppendUvarint(b, uint64(len(t.term)))
		b = append(b, t.term...)
		b = binary.AppendUvarint(b, uint64(t.tf))
	}
	return b
}

// decodeVector calls fn for each term of an encoded vector. The term slice
// aliases b and is only valid during the call.
func decodeVector(b []byte, fn func(term []byte, tf int)) error {
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return errBadVector
		}
		term := b[k : k+int(n)]
		b = b[k+int(n):]
		tf, k := binary.Uvarint(b)
		if k <= 0 {
			return errBadVector
		}
		b = b[k:]
		fn(term, int(min(tf, maxTF)))
	}
	return nil
}
