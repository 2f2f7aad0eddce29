package keyword

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// indexState is an index's row in keyword_indexes.
type indexState struct {
	indexNo   int32
	version   int64
	nDocs     int64
	totalLen  int64
	nPostings int64
	nextDocNo int32
}

const stateColumns = `index_no, version, n_docs, total_len, n_postings, next_doc_no`

func (s *indexState) scan(row pgx.Row) error {
	return row.Scan(&s.indexNo, &s.version, &s.nDocs, &s.totalLen, &s.nPostings, &s.nextDocNo)
}

// segment is an immutable in-memory inverted index over a set of documents
// loaded together: a full load, or the documents added since the previous
// snapshot. Documents are numbered locally 0..n-1 in doc_no order.
type segment struct {
	end   int32     // the index's next_doc_no when loaded: doc_no < end
	nos   []int32   // doc_no, ascending
	ids   []string  // doc_id
	lens  []float32 // document length in terms
	terms map[string]uint32
	offs  []uint32 // term t's postings are post[offs[t]:offs[t+1]]
	post  []uint32 // local document numbers, ascending within a term
	tfs   []uint16
	bytes int64
}

// local returns the local number of doc_no in s, or -1.
func (s *segment) local(no int32) int {
	i := sort.Search(len(s.nos), func(i int) bool { return s.nos[i] >= no })
	if i < len(s.nos) && s.nos[i] == no {
		return i
	}
	return -1
}

// snapshot is an immutable view of one index at one version: segments, and
// per segment the documents deleted since it was loaded.
type snapshot struct {
	indexState
	segs  []*segment
	dead  [][]uint64 // per segment: bitset of deleted local documents, nil when none
	nDead []int
	bytes int64
}

func (s *snapshot) isDead(seg, d int) bool {
	b := s.dead[seg]
	return b != nil && b[d>>6]&(1<<(d&63)) != 0
}

func (s *snapshot) liveDocs() int {
	n := 0
	for i, g := range s.segs {
		n += len(g.ids) - s.nDead[i]
	}
	return n
}

// Limits on catching up. Beyond maxSegments the segments added since the
// first are reloaded as one; beyond the shares the snapshot is rebuilt from
// scratch, which also drops the memory held by deleted documents.
const (
	maxSegments  = 8
	maxDeadShare = 0.25 // deleted documents still held / documents held
	maxAddShare  = 0.5  // documents to add / live documents
)

// cache holds the snapshots of recently searched indexes, up to a memory
// budget, least recently used evicted first.
type cache struct {
	budget int64

	mu      sync.Mutex
	entries map[string]*entry
	lru     list.List // of *entry, most recently used at the front
	used    int64
}

type entry struct {
	indexID string
	elem    *list.Element // nil once evicted
	bytes   int64         // accounted in cache.used; guarded by cache.mu

	load sync.Mutex // one loader per index and process
	snap atomic.Pointer[snapshot]
	// oversize marks an index that does not fit the budget at this index_no
	// and n_postings; it is searched in SQL. Guarded by load.
	oversize *indexState
}

func newCache(budget int64) *cache {
	return &cache{budget: budget, entries: map[string]*entry{}}
}

// entry returns the entry of indexID, creating it, and marks it used.
func (c *cache) entry(indexID string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[indexID]
	if e == nil {
		e = &entry{indexID: indexID}
		e.elem = c.lru.PushFront(e)
		c.entries[indexID] = e
		return e
	}
	if e.elem != nil {
		c.lru.MoveToFront(e.elem)
	}
	return e
}

// forget drops indexID's entry (the index no longer exists).
func (c *cache) forget(indexID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[indexID]; e != nil {
		c.removeLocked(e)
	}
}

func (c *cache) removeLocked(e *entry) {
	if e.elem == nil {
		return
	}
	c.lru.Remove(e.elem)
	e.elem = nil
	delete(c.entries, e.indexID)
	c.used -= e.bytes
	e.bytes = 0
}

// account records e's new size and evicts least recently used entries
// while over budget. It returns false when e itself had to go.
func (c *cache) account(e *entry, bytes int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.elem == nil {
		return false // evicted or forgotten meanwhile: do not re-add
	}
	c.used += bytes - e.bytes
	e.bytes = bytes
	for c.used > c.budget {
		back := c.lru.Back()
		victim := back.Value.(*entry)
		if victim == e && c.lru.Len() == 1 {
			c.removeLocked(e)
			return false
		}
		if victim == e {
			c.lru.MoveToFront(e.elem)
			continue
		}
		c.removeLocked(victim)
	}
	return true
}

// estimateBytes sizes an index before loading it (see segment.bytes).
func estimateBytes(st indexState) int64 {
	return st.nPostings*8 + st.nDocs*96
}

// snapshot returns a snapshot of the index at st.version or later, loading
// or catching up as needed, or nil when the index is too large to cache.
func (ix *Index) snapshot(ctx context.Context, indexID string, st indexState) (*snapshot, error) {
	e := ix.cache.entry(indexID)
	fresh := func(s *snapshot) bool {
		return s != nil && s.indexNo == st.indexNo && s.version >= st.version
	}
	if s := e.snap.Load(); fresh(s) {
		return s, nil
	}
	e.load.Lock()
	defer e.load.Unlock()
	if s := e.snap.Load(); fresh(s) {
		return s, nil
	}
	if o := e.oversize; o != nil && o.indexNo == st.indexNo && o.nPostings >= st.nPostings {
		return nil, nil
	}
	if estimateBytes(st) > ix.cache.budget {
		e.oversize = &st
		e.snap.Store(nil)
		ix.cache.account(e, 0)
		return nil, nil
	}
	e.oversize = nil
	s, err := ix.refresh(ctx, indexID, e.snap.Load())
	if err != nil {
		return nil, err
	}
	if ix.cache.account(e, s.bytes) {
		e.snap.Store(s)
	} else {
		e.snap.Store(nil)
		if s.bytes > ix.cache.budget {
			e.oversize = &s.indexState
		}
	}
	return s, nil
}

// refresh builds a snapshot of the index's current version, from old when it
// can catch up, else from scratch. It reads in one repeatable-read
// transaction, so the statistics match the documents.
func (ix *Index) refresh(ctx context.Context, indexID string, old *snapshot) (*snapshot, error) {
	tx, err := ix.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("load keyword index %s: %w", indexID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only

	var st indexState
	err = st.scan(tx.QueryRow(ctx, `SELECT `+stateColumns+` FROM keyword_indexes WHERE index_id = $1`, indexID))
	if errors.Is(err, pgx.ErrNoRows) {
		return &snapshot{}, nil // dropped meanwhile: an empty index
	}
	if err != nil {
		return nil, fmt.Errorf("load keyword index %s: %w", indexID, err)
	}
	if old != nil && old.indexNo == st.indexNo && old.version == st.version {
		return old, nil
	}
	if old != nil && old.indexNo == st.indexNo && old.version+tombstoneRetention >= st.version &&
		float64(st.nextDocNo-old.nextDocNo) <= maxAddShare*float64(max(old.liveDocs(), 1)) {
		s, ok, err := catchUp(ctx, tx, old, st)
		if err != nil {
			return nil, fmt.Errorf("catch up keyword index %s: %w", indexID, err)
		}
		if ok {
			return s, nil
		}
	}
	seg, err := loadSegment(ctx, tx, st, 0)
	if err != nil {
		return nil, fmt.Errorf("load keyword index %s: %w", indexID, err)
	}
	s := &snapshot{indexState: st, segs: []*segment{seg}, dead: make([][]uint64, 1), nDead: make([]int, 1)}
	s.bytes = seg.bytes
	return s, nil
}

// catchUp applies the tombstones and the documents added since old. It
// reports false when so much is deleted that a full load is better.
func catchUp(ctx context.Context, tx pgx.Tx, old *snapshot, st indexState) (*snapshot, bool, error) {
	rows, err := tx.Query(ctx, `SELECT doc_no FROM keyword_deleted WHERE index_no = $1 AND version > $2`, st.indexNo, old.version)
	if err != nil {
		return nil, false, err
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, false, err
	}
	s := &snapshot{
		indexState: st,
		segs:       append(make([]*segment, 0, len(old.segs)+1), old.segs...),
		dead:       append(make([][]uint64, 0, len(old.segs)+1), old.dead...),
		nDead:      append(make([]int, 0, len(old.segs)+1), old.nDead...),
	}
	copied := make([]bool, len(s.segs))
	for _, no := range gone {
		if no >= old.nextDocNo {
			continue // added and removed since old: never loaded
		}
		for i, g := range s.segs {
			if len(g.nos) == 0 || no < g.nos[0] || no > g.nos[len(g.nos)-1] {
				continue
			}
			d := g.local(no)
			if d < 0 {
				break
			}
			if !copied[i] { // copy on write: old is in use by other searches
				b := make([]uint64, (len(g.ids)+63)/64)
				copy(b, s.dead[i])
				s.dead[i] = b
				copied[i] = true
			}
			if s.dead[i][d>>6]&(1<<(d&63)) == 0 {
				s.dead[i][d>>6] |= 1 << (d & 63)
				s.nDead[i]++
			}
			break
		}
	}
	switch {
	case len(s.segs) >= maxSegments:
		// Too many segments to search quickly: reload everything added
		// since the first segment (deleted documents are gone from the
		// table) as one segment, which also picks up the new documents.
		seg, err := loadSegment(ctx, tx, st, s.segs[0].end)
		if err != nil {
			return nil, false, err
		}
		s.segs, s.dead, s.nDead = append(s.segs[:1], seg), append(s.dead[:1], nil), append(s.nDead[:1], 0)
	case st.nextDocNo > old.nextDocNo:
		seg, err := loadSegment(ctx, tx, st, old.nextDocNo)
		if err != nil {
			return nil, false, err
		}
		if len(seg.ids) > 0 {
			s.segs = append(s.segs, seg)
			s.dead = append(s.dead, nil)
			s.nDead = append(s.nDead, 0)
		}
	}
	held, dead := 0, 0
	for i, g := range s.segs {
		held += len(g.ids)
		dead += s.nDead[i]
	}
	if held > 0 && float64(dead) > maxDeadShare*float64(held) {
		return nil, false, nil
	}
	for i, g := range s.segs {
		s.bytes += g.bytes + int64(len(s.dead[i]))*8
	}
	return s, true, nil
}

// loadSegment reads the documents of the index at st numbered from fromNo
// and inverts their term vectors into a segment.
func loadSegment(ctx context.Context, tx pgx.Tx, st indexState, fromNo int32) (*segment, error) {
	rows, err := tx.Query(ctx, `SELECT doc_no, doc_id, length, terms FROM keyword_docs
		WHERE index_no = $1 AND doc_no >= $2 ORDER BY doc_no`, st.indexNo, fromNo)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	g := &segment{end: st.nextDocNo, terms: map[string]uint32{}}
	var (
		df     []uint32 // per term
		docEnd []uint32 // per document: end of its entries in flatT/flatF
		flatT  []uint32
		flatF  []uint16
		vocab  int64 // bytes of term strings
	)
	// A query that failed before its row description arrived (a cancelled
	// context, a dropped connection) has no field descriptions: report its
	// error instead of indexing into an empty slice.
	fields := rows.FieldDescriptions()
	if len(fields) < 4 {
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("load keyword segment: unexpected row description (%d fields)", len(fields))
	}
	binaryTerms := fields[3].Format == pgx.BinaryFormatCode
	for rows.Next() {
		var no, length int32
		var id string
		var vec []byte
		if binaryTerms {
			if err := rows.Scan(&no, &id, &length, nil); err != nil {
				return nil, err
			}
			vec = rows.RawValues()[3] // valid until Next; decoded right away
		} else if err := rows.Scan(&no, &id, &length, &vec); err != nil {
			return nil, err
		}
		err := decodeVector(vec, func(term []byte, tf int) {
			t, ok := g.terms[string(term)]
			if !ok {
				t = uint32(len(df))
				g.terms[string(term)] = t
				df = append(df, 0)
				vocab += int64(len(term))
			}
			df[t]++
			flatT = append(flatT, t)
			flatF = append(flatF, uint16(tf))
		})
		if err != nil {
			return nil, fmt.Errorf("document %s: %w", id, err)
		}
		g.nos = append(g.nos, no)
		g.ids = append(g.ids, id)
		g.lens = append(g.lens, float32(length))
		docEnd = append(docEnd, uint32(len(flatT)))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Invert: counting sort of the (document, term) entries by term.
	g.offs = make([]uint32, len(df)+1)
	for t, n := range df {
		g.offs[t+1] = g.offs[t] + n
	}
	cur := df // reused as the fill cursor of each term
	copy(cur, g.offs[:len(df)])
	g.post = make([]uint32, len(flatT))
	g.tfs = make([]uint16, len(flatT))
	start := uint32(0)
	for d, end := range docEnd {
		for k := start; k < end; k++ {
			t := flatT[k]
			g.post[cur[t]] = uint32(d)
			g.tfs[cur[t]] = flatF[k]
			cur[t]++
		}
		start = end
	}
	g.bytes = int64(len(g.post))*6 + int64(len(g.offs))*4 + // postings
		int64(len(g.terms))*48 + vocab + // dictionary: map entry, string header, bytes
		int64(len(g.ids))*(4+4+16+16) // nos, lens, id headers and allocation overhead
	for _, id := range g.ids {
		g.bytes += int64(len(id))
	}
	return g, nil
}
