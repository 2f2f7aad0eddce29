package keyword

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Prepared is documents analysed ahead of the transaction that adds them.
// Index.Prepare does the CPU-heavy part of indexing (analysis, term vectors
// and posting blocks) outside any transaction — kb-index runs it while the
// chunks are being embedded — so that the commit only copies rows in and
// holds the index's lock for less time.
//
// Prepared.Apply is Index.Apply taking that work for the added documents it
// holds (same id and same text); any other document is analysed as Apply
// would. When the documents added are exactly the prepared ones, in order,
// the posting blocks are taken as prepared too. The index ends up exactly as
// Index.Apply would leave it. A Prepared may be applied again (a retried
// transaction) but not by two goroutines at once.
type Prepared struct {
	ix     *Index
	docs   []preparedDoc
	texts  []string       // docs[i]'s text
	byID   map[string]int // id → its last position in docs
	blocks []block        // postings of docs, numbered from base; nil when docs repeat an id
	nos    []int32        // the blocks' document numbers (their shared backing array)
	base   int32
}

// Prepare analyses docs for a later Prepared.Apply. It touches no database.
func (ix *Index) Prepare(docs []Doc) *Prepared {
	p := &Prepared{ix: ix, docs: prepareDocs(ix.an, docs), texts: make([]string, len(docs)), byID: make(map[string]int, len(docs))}
	unique := true
	for i, d := range docs {
		p.texts[i] = d.Text
		if _, dup := p.byID[d.ID]; dup {
			unique = false
		}
		p.byID[d.ID] = i
	}
	if unique && len(p.docs) > 0 {
		p.blocks, p.nos = buildBlocks(p.docs, 0)
	}
	return p
}

// Apply is Index.Apply using the prepared analysis (see Prepared).
func (p *Prepared) Apply(ctx context.Context, tx pgx.Tx, indexID string, remove []string, add []Doc) error {
	return p.ix.apply(ctx, tx, indexID, remove, add, p)
}

// lookup returns add analysed, taking what p holds (nil p: nothing), and for
// each document its position in p.docs or -1.
func (p *Prepared) lookup(an Analyzer, add []Doc) ([]preparedDoc, []int) {
	from := make([]int, len(add))
	if p == nil {
		for i := range from {
			from[i] = -1
		}
		return prepareDocs(an, add), from
	}
	out := make([]preparedDoc, len(add))
	var miss []Doc
	var missAt []int
	for i, d := range add {
		if j, ok := p.byID[d.ID]; ok && p.texts[j] == d.Text {
			out[i], from[i] = p.docs[j], j
			continue
		}
		from[i] = -1
		miss, missAt = append(miss, d), append(missAt, i)
	}
	if len(miss) > 0 {
		for k, pd := range prepareDocs(an, miss) {
			out[missAt[k]] = pd
		}
	}
	return out, from
}

// whole reports whether the documents to add, srcs (positions in p.docs or
// -1), are exactly p's documents in order: then p's blocks are theirs.
func (p *Prepared) whole(srcs []int) bool {
	if p == nil || p.blocks == nil || len(srcs) != len(p.docs) {
		return false
	}
	for i, s := range srcs {
		if s != i {
			return false
		}
	}
	return true
}

// blocksFrom returns p's blocks with its documents numbered from first.
func (p *Prepared) blocksFrom(first int32) []block {
	if d := first - p.base; d != 0 {
		for i := range p.nos {
			p.nos[i] += d
		}
		for i := range p.blocks {
			p.blocks[i].first += d
		}
		p.base = first
	}
	return p.blocks
}
