package keyword_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// newIndex returns a fresh database and an Index over it.
func newIndex(t *testing.T, p keyword.Params) (*pgxpool.Pool, *keyword.Index, string) {
	t.Helper()
	pool, url := pgtest.NewDatabase(t)
	return pool, keyword.New(pool, keyword.NewAnalyzer("auto"), p), url
}

// apply runs ix.Apply in its own committed transaction.
func apply(t *testing.T, pool *pgxpool.Pool, ix *keyword.Index, indexID string, remove []string, add ...keyword.Doc) {
	t.Helper()
	err := postgres.Tx(context.Background(), pool, func(tx pgx.Tx) error {
		return ix.Apply(context.Background(), tx, indexID, remove, add)
	})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func search(t *testing.T, ix *keyword.Index, indexID, query string, k int) []keyword.Hit {
	t.Helper()
	hits, err := ix.Search(context.Background(), indexID, query, k, nil)
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	return hits
}

func ids(hits []keyword.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// stats is an index's row as stored.
type stats struct {
	NDocs, TotalLen, NPostings, Version int64
}

func readStats(t *testing.T, pool *pgxpool.Pool, indexID string) stats {
	t.Helper()
	var s stats
	err := pool.QueryRow(context.Background(), `SELECT n_docs, total_len, n_postings, version
		FROM keyword_indexes WHERE index_id = $1`, indexID).Scan(&s.NDocs, &s.TotalLen, &s.NPostings, &s.Version)
	if err == pgx.ErrNoRows {
		return stats{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkConsistent verifies the stored statistics against the rows they
// summarise, and that postings match the documents' term vectors in number.
func checkConsistent(t *testing.T, pool *pgxpool.Pool, indexID string) stats {
	t.Helper()
	s := readStats(t, pool, indexID)
	var docs, total, postings, orphan int64
	err := pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM keyword_docs d JOIN keyword_indexes i USING (index_no) WHERE i.index_id = $1),
		       (SELECT coalesce(sum(length), 0) FROM keyword_docs d JOIN keyword_indexes i USING (index_no) WHERE i.index_id = $1),
		       (SELECT coalesce(sum(cardinality(p.docs)), 0) FROM keyword_blocks p JOIN keyword_indexes i USING (index_no) WHERE i.index_id = $1),
		       (SELECT count(*) FROM keyword_blocks p JOIN keyword_indexes i USING (index_no) CROSS JOIN LATERAL unnest(p.docs) AS x(doc_no)
		         WHERE i.index_id = $1 AND NOT EXISTS (SELECT 1 FROM keyword_docs d WHERE d.index_no = p.index_no AND d.doc_no = x.doc_no))`,
		indexID).Scan(&docs, &total, &postings, &orphan)
	if err != nil {
		t.Fatal(err)
	}
	if s.NDocs != docs || s.TotalLen != total || s.NPostings != postings || orphan != 0 {
		t.Fatalf("index %s: stored stats %+v, rows: docs=%d total_len=%d postings=%d orphan postings=%d",
			indexID, s, docs, total, postings, orphan)
	}
	return s
}
