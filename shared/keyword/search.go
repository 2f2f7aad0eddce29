package keyword

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Search returns the k best documents of the index indexID for query, by
// BM25, best first (ties by id). When allow is not nil, only documents it
// accepts are returned (e.g. the chunks of some files); it filters, it does
// not change scores, and it may be called only for documents that would make
// the top k. A missing index, an empty query or a query with only stop words
// returns no hits and no error.
//
// Scoring (Lucene's BM25, with the classic (k1+1) numerator):
//
//	score(d, q) = Σ_{t ∈ q} qtf(t) · idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))
//	idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// where N and avgdl are the index's live document count and mean length,
// |d| is the number of terms the analyzer produced for d, and qtf(t) the
// number of times t occurs in the query.
//
// Search reads the index's version (one query) and serves the rest from the
// process's cache, loading or catching up first when the index changed.
// Indexes too large for the cache are searched in SQL.
func (ix *Index) Search(ctx context.Context, indexID, query string, k int, allow func(docID string) bool) ([]Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	q := queryTerms(ix.an.Terms(query))
	if len(q) == 0 {
		return nil, nil
	}
	var st indexState
	err := st.scan(ix.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM keyword_indexes WHERE index_id = $1`, indexID))
	if errors.Is(err, pgx.ErrNoRows) {
		ix.cache.forget(indexID)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("search keyword index %s: %w", indexID, err)
	}
	if st.nDocs == 0 {
		return nil, nil
	}
	s, err := ix.snapshot(ctx, indexID, st)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return ix.searchSQL(ctx, indexID, q, k, allow)
	}
	return ix.score(s, q, k, allow), nil
}

// SearchMany is Search for each of queries in turn, reading the index's
// version once: hits[i] is what Search(ctx, indexID, queries[i], k, allow)
// returns at that version (the same hits, scores and order). An error is
// every query's.
func (ix *Index) SearchMany(ctx context.Context, indexID string, queries []string, k int, allow func(docID string) bool) ([][]Hit, error) {
	hits := make([][]Hit, len(queries))
	if k <= 0 {
		return hits, nil
	}
	qs := make([][]termTF, len(queries))
	some := false
	for i, query := range queries {
		qs[i] = queryTerms(ix.an.Terms(query))
		some = some || len(qs[i]) > 0
	}
	if !some {
		return hits, nil
	}
	var st indexState
	err := st.scan(ix.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM keyword_indexes WHERE index_id = $1`, indexID))
	if errors.Is(err, pgx.ErrNoRows) {
		ix.cache.forget(indexID)
		return hits, nil
	}
	if err != nil {
		return nil, fmt.Errorf("search keyword index %s: %w", indexID, err)
	}
	if st.nDocs == 0 {
		return hits, nil
	}
	s, err := ix.snapshot(ctx, indexID, st)
	if err != nil {
		return nil, err
	}
	for i, q := range qs {
		switch {
		case len(q) == 0:
		case s == nil:
			if hits[i], err = ix.searchSQL(ctx, indexID, q, k, allow); err != nil {
				return nil, err
			}
		default:
			hits[i] = ix.score(s, q, k, allow)
		}
	}
	return hits, nil
}

// queryTerms counts the distinct terms of a query, in first-occurrence order.
func queryTerms(terms []string) []termTF {
	q := make([]termTF, 0, len(terms))
outer:
	for _, t := range terms {
		for i := range q {
			if q[i].term == t {
				q[i].tf++
				continue outer
			}
		}
		q = append(q, termTF{term: t, tf: 1})
	}
	return q
}

// bm25 holds a query's per-index constants.
type bm25 struct {
	n, k1, norm0, normLen float64
}

func (ix *Index) bm25(nDocs, totalLen int64) bm25 {
	avgdl := float64(totalLen) / float64(nDocs)
	if avgdl <= 0 {
		avgdl = 1
	}
	return bm25{n: float64(nDocs), k1: ix.k1, norm0: ix.k1 * (1 - ix.b), normLen: ix.k1 * ix.b / avgdl}
}

// weight is a query term's qtf · idf · (k1+1).
func (p bm25) weight(qtf, df int) float64 {
	d := float64(df)
	return float64(qtf) * math.Log(1+(p.n-d+0.5)/(d+0.5)) * (p.k1 + 1)
}

// scratch is a per-search score accumulator over one segment's documents.
type scratch struct {
	acc     []float64
	touched []uint32
}

func (ix *Index) score(s *snapshot, q []termTF, k int, allow func(string) bool) []Hit {
	if s.nDocs <= 0 {
		return nil
	}
	p := ix.bm25(s.nDocs, s.totalLen)
	// Resolve each term in each segment, and its live document frequency.
	type span struct{ from, to uint32 }
	spans := make([]span, len(q)*len(s.segs))
	weights := make([]float64, len(q))
	for j, t := range q {
		df := 0
		for i, g := range s.segs {
			id, ok := g.terms[t.term]
			if !ok {
				continue
			}
			sp := span{g.offs[id], g.offs[id+1]}
			spans[j*len(s.segs)+i] = sp
			if s.dead[i] == nil {
				df += int(sp.to - sp.from)
				continue
			}
			for _, d := range g.post[sp.from:sp.to] {
				if !s.isDead(i, int(d)) {
					df++
				}
			}
		}
		if df > 0 {
			weights[j] = p.weight(t.tf, df)
		}
	}

	top := topK{k: k, allow: allow}
	sc, _ := ix.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	defer ix.scratch.Put(sc)
	for i, g := range s.segs {
		if cap(sc.acc) < len(g.ids) {
			sc.acc = make([]float64, len(g.ids))
		}
		acc := sc.acc[:len(g.ids)]
		touched := sc.touched[:0]
		for j, w := range weights {
			sp := spans[j*len(s.segs)+i]
			if w == 0 || sp.to == sp.from {
				continue
			}
			post, tfs := g.post[sp.from:sp.to], g.tfs[sp.from:sp.to]
			for x, d := range post {
				tf := float64(tfs[x])
				if acc[d] == 0 {
					touched = append(touched, d)
				}
				acc[d] += w * tf / (tf + p.norm0 + p.normLen*float64(g.lens[d]))
			}
		}
		for _, d := range touched {
			v := acc[d]
			acc[d] = 0
			if !s.isDead(i, int(d)) {
				top.offer(v, g.ids[d])
			}
		}
		sc.touched = touched
	}
	return top.sorted()
}

// topK keeps the k best hits in a min-heap (worst at the root).
type topK struct {
	k     int
	allow func(string) bool
	h     []Hit
}

// worse orders hits: lower score, then larger id.
func worse(a, b Hit) bool {
	return a.Score < b.Score || a.Score == b.Score && a.ID > b.ID
}

func (t *topK) offer(score float64, id string) {
	c := Hit{ID: id, Score: score}
	if len(t.h) == t.k && !worse(t.h[0], c) {
		return
	}
	if t.allow != nil && !t.allow(id) {
		return
	}
	if len(t.h) < t.k {
		t.h = append(t.h, c)
		for i := len(t.h) - 1; i > 0; {
			parent := (i - 1) / 2
			if !worse(t.h[i], t.h[parent]) {
				break
			}
			t.h[i], t.h[parent] = t.h[parent], t.h[i]
			i = parent
		}
		return
	}
	t.h[0] = c
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && worse(t.h[l], t.h[m]) {
			m = l
		}
		if r < len(t.h) && worse(t.h[r], t.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

func (t *topK) sorted() []Hit {
	slices.SortFunc(t.h, func(a, b Hit) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	return t.h
}

// searchSQL scores in SQL-fetched postings, for indexes too large to cache.
// It is exact (same formula and summation order as the cache) but reads
// every posting of the query's terms, so it is slow for common terms.
func (ix *Index) searchSQL(ctx context.Context, indexID string, q []termTF, k int, allow func(string) bool) ([]Hit, error) {
	tx, err := ix.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("search keyword index %s: %w", indexID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	var st indexState
	err = st.scan(tx.QueryRow(ctx, `SELECT `+stateColumns+` FROM keyword_indexes WHERE index_id = $1`, indexID))
	if errors.Is(err, pgx.ErrNoRows) || err == nil && st.nDocs == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("search keyword index %s: %w", indexID, err)
	}
	terms := make([]string, len(q))
	for i, t := range q {
		terms[i] = t.term
	}
	rows, err := tx.Query(ctx, `SELECT b.term, p.tf, d.doc_id, d.length
		FROM keyword_blocks b CROSS JOIN LATERAL unnest(b.docs, b.tfs) AS p(doc_no, tf)
		JOIN keyword_docs d ON d.index_no = b.index_no AND d.doc_no = p.doc_no
		WHERE b.index_no = $1 AND b.term = ANY($2)`, st.indexNo, terms)
	if err != nil {
		return nil, fmt.Errorf("search keyword index %s: %w", indexID, err)
	}
	type posting struct {
		id      string
		tf, len float64
	}
	byTerm := make(map[string][]posting, len(q))
	for rows.Next() {
		var term, id string
		var tf, length int32
		if err := rows.Scan(&term, &tf, &id, &length); err != nil {
			rows.Close()
			return nil, fmt.Errorf("search keyword index %s: %w", indexID, err)
		}
		byTerm[term] = append(byTerm[term], posting{id: strings.Clone(id), tf: float64(min(tf, maxTF)), len: float64(length)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search keyword index %s: %w", indexID, err)
	}
	p := ix.bm25(st.nDocs, st.totalLen)
	acc := map[string]float64{}
	for _, t := range q {
		ps := byTerm[t.term]
		if len(ps) == 0 {
			continue
		}
		w := p.weight(t.tf, len(ps))
		for _, x := range ps {
			acc[x.id] += w * x.tf / (x.tf + p.norm0 + p.normLen*x.len)
		}
	}
	top := topK{k: k, allow: allow}
	for id, v := range acc {
		top.offer(v, id)
	}
	return top.sorted(), nil
}
