package keyword

import (
	"cmp"
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
	if indexID == "" {
		return errors.New("keyword: empty index id")
	}
	if len(remove) == 0 && len(add) == 0 {
		return nil
	}
	// Analyse before taking the lock: it is the CPU-heavy part.
	docs := make([]preparedDoc, 0, len(add))
	pos := make(map[string]int, len(add))
	for _, d := range add {
		if d.ID == "" {
			return fmt.Errorf("keyword: index %s: document with an empty id", indexID)
		}
		pd := prepareDoc(ix.an, d)
		if i, ok := pos[d.ID]; ok {
			docs[i] = pd
			continue
		}
		pos[d.ID] = len(docs)
		docs = append(docs, pd)
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
		if err := insertDocs(ctx, tx, indexNo, nextDocNo, docs); err != nil {
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

// removeDocs deletes the documents with the given ids, their postings (found
// through their term vectors, by primary key), and records tombstones at
// version for the caches of other processes.
func removeDocs(ctx context.Context, tx pgx.Tx, indexNo int32, version int64, ids []string) (n, length, postings int64, err error) {
	if len(ids) == 0 {
		return 0, 0, 0, nil
	}
	rows, err := tx.Query(ctx, `DELETE FROM keyword_docs WHERE index_no = $1 AND doc_id = ANY($2)
		RETURNING doc_no, length, terms`, indexNo, ids)
	if err != nil {
		return 0, 0, 0, err
	}
	b := &pgx.Batch{}
	var nos []int32
	for rows.Next() {
		var no, l int32
		var vec []byte
		if err := rows.Scan(&no, &l, &vec); err != nil {
			rows.Close()
			return 0, 0, 0, err
		}
		var terms []string
		if err := decodeVector(vec, func(t []byte, _ int) { terms = append(terms, string(t)) }); err != nil {
			rows.Close()
			return 0, 0, 0, fmt.Errorf("document %d: %w", no, err)
		}
		nos = append(nos, no)
		length += int64(l)
		postings += int64(len(terms))
		// One statement per document: term = ANY(...) with a fixed doc_no is
		// a primary-key lookup per term whatever the table's size.
		b.Queue(`DELETE FROM keyword_postings WHERE index_no = $1 AND term = ANY($2) AND doc_no = $3`, indexNo, terms, no)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, err
	}
	if len(nos) == 0 {
		return 0, 0, 0, nil
	}
	b.Queue(`INSERT INTO keyword_deleted (index_no, version, doc_no) SELECT $1, $2, unnest($3::int[])`, indexNo, version, nos)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, 0, 0, err
	}
	return int64(len(nos)), length, postings, nil
}

// insertDocs copies the documents and their postings in, numbering the
// documents from first. Numbers are never reused, so a cache catches up by
// loading the documents numbered from its own next_doc_no.
func insertDocs(ctx context.Context, tx pgx.Tx, indexNo, first int32, docs []preparedDoc) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"keyword_docs"},
		[]string{"index_no", "doc_id", "doc_no", "length", "terms"},
		pgx.CopyFromSlice(len(docs), func(i int) ([]any, error) {
			d := docs[i]
			return []any{indexNo, d.id, first + int32(i), int32(d.length), d.vector}, nil
		}))
	if err != nil {
		return err
	}
	// Postings go in term order: consecutive rows then land on the same
	// primary-key pages, which keeps large indexes fast to write.
	var n int
	for _, d := range docs {
		n += len(d.terms)
	}
	rows := make([]posting, 0, n)
	for i, d := range docs {
		for _, t := range d.terms {
			rows = append(rows, posting{term: t.term, docNo: first + int32(i), tf: int32(t.tf)})
		}
	}
	slices.SortFunc(rows, func(a, b posting) int {
		if c := strings.Compare(a.term, b.term); c != 0 {
			return c
		}
		return cmp.Compare(a.docNo, b.docNo)
	})
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"keyword_postings"},
		[]string{"index_no", "term", "doc_no", "tf"}, &postingSource{indexNo: indexNo, rows: rows, i: -1})
	return err
}

type posting struct {
	term      string
	docNo, tf int32
}

// postingSource streams postings to COPY.
type postingSource struct {
	indexNo int32
	rows    []posting
	i       int
	row     [4]any
}

func (s *postingSource) Next() bool {
	s.i++
	return s.i < len(s.rows)
}

func (s *postingSource) Values() ([]any, error) {
	p := s.rows[s.i]
	s.row = [4]any{s.indexNo, p.term, p.docNo, p.tf}
	return s.row[:], nil
}

func (s *postingSource) Err() error { return nil }

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
	b.Queue(`DELETE FROM keyword_postings WHERE index_no = $1`, indexNo)
	b.Queue(`DELETE FROM keyword_deleted WHERE index_no = $1`, indexNo)
	b.Queue(`DELETE FROM keyword_docs WHERE index_no = $1`, indexNo)
	b.Queue(`DELETE FROM keyword_indexes WHERE index_no = $1`, indexNo)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("drop keyword index %s: %w", indexID, err)
	}
	return nil
}
