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

// tombstoneRetention is how many versions of deletion tombstones an index
// keeps. A cache older than that reloads the index in full instead of
// catching up.
const tombstoneRetention = 1024

// Apply removes the documents with the ids in remove and adds (or replaces)
// the documents in add, in the caller's transaction tx: the index changes
// when, and only if, tx commits. Re-adding an existing id replaces that
// document; an id both removed and added ends up added; when add holds an id
// twice the last one wins. Removing an unknown id is not an error. When
// anything changed, the index's statistics are updated and its version is
// bumped, which tells every process's cache to catch up.
//
// Apply takes a row lock on the index until tx ends, so concurrent Applies
// to one index serialise (under READ COMMITTED, the default; at REPEATABLE
// READ or above the later one fails with a serialization error and its
// transaction must be retried). Search never waits for the lock.
func (ix *Index) Apply(ctx context.Context, tx pgx.Tx, indexID string, remove []string, add []Doc) error {
	return ix.apply(ctx, tx, indexID, remove, add, nil)
}

// apply is Apply, taking the analysis of the documents of add that pre holds
// (nil: none) from pre instead of analysing them.
func (ix *Index) apply(ctx context.Context, tx pgx.Tx, indexID string, remove []string, add []Doc, pre *Prepared) error {
	if indexID == "" {
		return errors.New("keyword: empty index id")
	}
	if len(remove) == 0 && len(add) == 0 {
		return nil
	}
	// Analyse before taking the lock: it is the CPU-heavy part.
	for _, d := range add {
		if d.ID == "" {
			return fmt.Errorf("keyword: index %s: document with an empty id", indexID)
		}
	}
	prepared, from := pre.lookup(ix.an, add)
	docs := make([]preparedDoc, 0, len(add))
	srcs := make([]int, 0, len(add)) // docs[i] is pre.docs[srcs[i]], or -1: analysed here
	pos := make(map[string]int, len(add))
	for i, pd := range prepared {
		if j, ok := pos[pd.id]; ok {
			docs[j], srcs[j] = pd, from[i]
			continue
		}
		pos[pd.id] = len(docs)
		docs, srcs = append(docs, pd), append(srcs, from[i])
	}
	gone := make([]string, 0, len(remove)+len(docs))
	seen := make(map[string]bool, len(remove))
	for _, id := range remove {
		if _, added := pos[id]; !added && !seen[id] {
			seen[id] = true
			gone = append(gone, id)
		}
	}
	for _, d := range docs {
		gone = append(gone, d.id)
	}

	indexNo, version, nextDocNo, found, err := lockIndex(ctx, tx, indexID, len(docs) > 0)
	if err != nil {
		return fmt.Errorf("lock keyword index %s: %w", indexID, err)
	}
	if !found {
		return nil // nothing indexed, nothing to remove
	}
	version++

	removed, removedLen, removedPostings, err := removeDocs(ctx, tx, indexNo, version, gone)
	if err != nil {
		return fmt.Errorf("remove documents from keyword index %s: %w", indexID, err)
	}
	if removed == 0 && len(docs) == 0 {
		return nil // only unknown ids were removed: nothing changed
	}

	var addedLen, addedPostings int64
	if len(docs) > 0 {
		if int64(nextDocNo)+int64(len(docs)) > math.MaxInt32 {
			return fmt.Errorf("keyword index %s: document numbers exhausted; drop and rebuild the index", indexID)
		}
		for _, d := range docs {
			addedLen += int64(d.length)
			addedPostings += int64(len(d.terms))
		}
		var blocks []block
		if pre.whole(srcs) {
			blocks = pre.blocksFrom(nextDocNo)
		} else {
			blocks, _ = buildBlocks(docs, nextDocNo)
		}
		if err := insertDocs(ctx, tx, indexNo, nextDocNo, docs, blocks); err != nil {
			return fmt.Errorf("add documents to keyword index %s: %w", indexID, err)
		}
	}

	b := &pgx.Batch{}
	b.Queue(`UPDATE keyword_indexes SET n_docs = n_docs + $2, total_len = total_len + $3,
		n_postings = n_postings + $4, version = $5, next_doc_no = $6, updated_at = now()
		WHERE index_no = $1`,
		indexNo, int64(len(docs))-removed, addedLen-removedLen, addedPostings-removedPostings,
		version, nextDocNo+int32(len(docs)))
	b.Queue(`DELETE FROM keyword_deleted WHERE index_no = $1 AND version <= $2`, indexNo, version-tombstoneRetention)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("update keyword index %s: %w", indexID, err)
	}
	return nil
}

// lockIndex locks the index's row until tx ends, creating it when create is
// set. It inserts only when the row is missing, so that the identity
// sequence behind index_no is not spent by every Apply.
func lockIndex(ctx context.Context, tx pgx.Tx, indexID string, create bool) (indexNo int32, version int64, nextDocNo int32, found bool, err error) {
	const lock = `SELECT index_no, version, next_doc_no FROM keyword_indexes WHERE index_id = $1 FOR UPDATE`
	for range 2 {
		err = tx.QueryRow(ctx, lock, indexID).Scan(&indexNo, &version, &nextDocNo)
		if err == nil || !errors.Is(err, pgx.ErrNoRows) || !create {
			return indexNo, version, nextDocNo, err == nil, ignoreNoRows(err)
		}
		// A concurrent creator makes this insert wait, then do nothing; the
		// second lock attempt then sees its row.
		err = tx.QueryRow(ctx, `INSERT INTO keyword_indexes (index_id) VALUES ($1) ON CONFLICT (index_id) DO NOTHING
			RETURNING index_no, version, next_doc_no`, indexID).Scan(&indexNo, &version, &nextDocNo)
		if !errors.Is(err, pgx.ErrNoRows) {
			return indexNo, version, nextDocNo, err == nil, err
		}
	}
	return 0, 0, 0, false, fmt.Errorf("index row of %s vanished while locking it", indexID)
}

func ignoreNoRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// removeDocs deletes the documents with the given ids and their postings,
// and records tombstones at version for the caches of other processes. The
// documents' term vectors say which blocks hold their postings: for each
// term, the blocks between the one holding its smallest removed document
// number and its largest are read (index range scans), rewritten without the
// removed documents, and deleted when nothing is left in them.
func removeDocs(ctx context.Context, tx pgx.Tx, indexNo int32, version int64, ids []string) (n, length, postings int64, err error) {
	if len(ids) == 0 {
		return 0, 0, 0, nil
	}
	rows, err := tx.Query(ctx, `DELETE FROM keyword_docs WHERE index_no = $1 AND doc_id = ANY($2)
		RETURNING doc_no, length, terms`, indexNo, ids)
	if err != nil {
		return 0, 0, 0, err
	}
	var nos []int32
	gone := map[int32]bool{}
	span := map[string][2]int32{} // term → smallest and largest removed document number
	for rows.Next() {
		var no, l int32
		var vec []byte
		if err := rows.Scan(&no, &l, &vec); err != nil {
			rows.Close()
			return 0, 0, 0, err
		}
		err := decodeVector(vec, func(t []byte, _ int) {
			postings++
			if r, ok := span[string(t)]; ok {
				span[string(t)] = [2]int32{min(r[0], no), max(r[1], no)}
				return
			}
			span[string(t)] = [2]int32{no, no}
		})
		if err != nil {
			rows.Close()
			return 0, 0, 0, fmt.Errorf("document %d: %w", no, err)
		}
		nos = append(nos, no)
		gone[no] = true
		length += int64(l)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, err
	}
	if len(nos) == 0 {
		return 0, 0, 0, nil
	}
	if err := removePostings(ctx, tx, indexNo, span, gone); err != nil {
		return 0, 0, 0, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO keyword_deleted (index_no, version, doc_no) SELECT $1, $2, unnest($3::int[])`,
		indexNo, version, nos); err != nil {
		return 0, 0, 0, err
	}
	return int64(len(nos)), length, postings, nil
}

// removePostings drops the documents gone from the blocks of the terms in
// span (term → smallest and largest removed document number).
func removePostings(ctx context.Context, tx pgx.Tx, indexNo int32, span map[string][2]int32, gone map[int32]bool) error {
	terms := make([]string, 0, len(span))
	for t := range span {
		terms = append(terms, t)
	}
	slices.Sort(terms) // index order
	lo, hi := make([]int32, len(terms)), make([]int32, len(terms))
	for i, t := range terms {
		lo[i], hi[i] = span[t][0], span[t][1]
	}
	// Blocks of a term never overlap: the one holding lo starts at the
	// greatest first_doc <= lo.
	rows, err := tx.Query(ctx, `SELECT b.term, b.first_doc, b.docs, b.tfs
		FROM unnest($2::text[], $3::int[], $4::int[]) AS r(term, lo, hi)
		JOIN keyword_blocks b ON b.index_no = $1 AND b.term = r.term AND b.first_doc <= r.hi
		 AND b.first_doc >= coalesce((SELECT max(x.first_doc) FROM keyword_blocks x
		     WHERE x.index_no = $1 AND x.term = r.term AND x.first_doc <= r.lo), r.lo)`,
		indexNo, terms, lo, hi)
	if err != nil {
		return err
	}
	var delTerms []string
	var delFirst []int32
	var keep []block
	for rows.Next() {
		var b block
		if err := rows.Scan(&b.term, &b.first, &b.docs, &b.tfs); err != nil {
			rows.Close()
			return err
		}
		j := 0
		for i, d := range b.docs {
			if !gone[d] {
				b.docs[j], b.tfs[j] = d, b.tfs[i]
				j++
			}
		}
		if j == len(b.docs) {
			continue // another batch's block between lo and hi
		}
		delTerms, delFirst = append(delTerms, b.term), append(delFirst, b.first)
		if j > 0 {
			b.docs, b.tfs = b.docs[:j], b.tfs[:j]
			b.first = b.docs[0]
			keep = append(keep, b)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(delTerms) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM keyword_blocks b USING unnest($2::text[], $3::int[]) AS r(term, first_doc)
		WHERE b.index_no = $1 AND b.term = r.term AND b.first_doc = r.first_doc`, indexNo, delTerms, delFirst); err != nil {
		return err
	}
	return copyBlocks(ctx, tx, indexNo, keep)
}

// insertDocs copies the documents and their postings (blocks, from
// buildBlocks or Prepared) in, numbering the documents from first. Numbers
// are never reused, so a cache catches up by loading the documents numbered
// from its own next_doc_no.
func insertDocs(ctx context.Context, tx pgx.Tx, indexNo, first int32, docs []preparedDoc, blocks []block) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"keyword_docs"},
		[]string{"index_no", "doc_id", "doc_no", "length", "terms"},
		pgx.CopyFromSlice(len(docs), func(i int) ([]any, error) {
			d := docs[i]
			return []any{indexNo, d.id, first + int32(i), int32(d.length), d.vector}, nil
		}))
	if err != nil {
		return err
	}
	return copyBlocks(ctx, tx, indexNo, blocks)
}

// buildBlocks returns the postings of docs, numbered from first, as one
// block per distinct term, in term order (consecutive rows then land on the
// same primary-key pages, which keeps large indexes fast to write). A
// block's document numbers ascend because documents are numbered in order.
// The blocks' arrays share two backing arrays; the first, of document
// numbers, is returned too.
func buildBlocks(docs []preparedDoc, first int32) ([]block, []int32) {
	at := make(map[string]int32)
	var blocks []block
	var n int32
	for _, d := range docs {
		for _, t := range d.terms {
			j, ok := at[t.term]
			if !ok {
				j = int32(len(blocks))
				at[t.term] = j
				blocks = append(blocks, block{term: t.term})
			}
			blocks[j].first++ // the count, for now
			n++
		}
	}
	slices.SortFunc(blocks, func(a, b block) int { return strings.Compare(a.term, b.term) })
	docNos, tfs := make([]int32, n), make([]int32, n)
	var off int32
	for i := range blocks {
		b := &blocks[i]
		at[b.term] = int32(i)
		c := b.first
		b.docs, b.tfs = docNos[off:off:off+c], tfs[off:off:off+c]
		off += c
	}
	for i, d := range docs {
		no := first + int32(i)
		for _, t := range d.terms {
			b := &blocks[at[t.term]]
			b.docs = append(b.docs, no)
			b.tfs = append(b.tfs, int32(t.tf))
		}
	}
	for i := range blocks {
		blocks[i].first = blocks[i].docs[0]
	}
	return blocks, docNos
}

// block is a row of keyword_blocks: a term's postings in a range of
// documents, docs ascending, tfs the matching term frequencies.
type block struct {
	term      string
	first     int32
	docs, tfs []int32
}

func copyBlocks(ctx context.Context, tx pgx.Tx, indexNo int32, blocks []block) error {
	if len(blocks) == 0 {
		return nil
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"keyword_blocks"}, []string{"index_no", "term", "first_doc", "docs", "tfs"},
		pgx.CopyFromSlice(len(blocks), func(i int) ([]any, error) {
			b := blocks[i]
			return []any{indexNo, b.term, b.first, b.docs, b.tfs}, nil
		}))
	return err
}

// DropIndex deletes the index indexID and everything in it, in the caller's
// transaction. Dropping a missing index is not an error. Caches notice the
// drop at their next search.
func (ix *Index) DropIndex(ctx context.Context, tx pgx.Tx, indexID string) error {
	var indexNo int32
	err := tx.QueryRow(ctx, `SELECT index_no FROM keyword_indexes WHERE index_id = $1 FOR UPDATE`, indexID).Scan(&indexNo)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock keyword index %s: %w", indexID, err)
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM keyword_blocks WHERE index_no = $1`, indexNo)
	b.Queue(`DELETE FROM keyword_deleted WHERE index_no = $1`, indexNo)
	b.Queue(`DELETE FROM keyword_docs WHERE index_no = $1`, indexNo)
	b.Queue(`DELETE FROM keyword_indexes WHERE index_no = $1`, indexNo)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("drop keyword index %s: %w", indexID, err)
	}
	return nil
}
