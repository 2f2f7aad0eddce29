// Package keyword is the embedded keyword (BM25) index of knowledge bases:
// an inverted index stored in PostgreSQL (migrations 0003_keyword.sql,
// 0082_keyword_blocks.sql: postings as one block per term and batch, and
// 0094_keyword_docs_no_fk.sql) and searched in process from a per-process
// cache of it.
//
// Writes go through Apply inside the caller's transaction, so a knowledge
// base's chunk rows and its postings change atomically. Prepare does the
// analysis of documents ahead of that transaction (Prepared.Apply then only
// copies rows in). Search reads one row
// (the index's version) per call and serves the query from the cached
// postings; when another process has applied changes since, the cache is
// brought up to date first (the added documents and the deletion tombstones
// since the cached version, or a full reload).
//
// Imported by: the knowledge-base packages and functions that index and
// search chunks, and shared/embed (for its Analyzer). May import: pgx,
// github.com/kljensen/snowball and the standard library.
package keyword

import (
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Params tunes scoring and the cache. Zero fields take the defaults.
type Params struct {
	// K1 is BM25's term-frequency saturation (default 0.9, as Anserini's
	// BEIR baselines).
	K1 float64
	// B is BM25's document-length normalisation (default 0.4). Zero means
	// the default; a negative value means no length normalisation.
	B float64
	// CacheBytes caps the memory the process spends on cached indexes
	// (default 256 MiB). Least recently searched indexes are evicted first;
	// an index larger than the cap is searched in SQL instead of cached.
	CacheBytes int64
}

const (
	defaultK1         = 0.9
	defaultB          = 0.4
	defaultCacheBytes = 256 << 20
)

// Doc is a document to index: its id (a chunk id) and its text.
type Doc struct {
	ID   string
	Text string
}

// Hit is a search result, best first.
type Hit struct {
	ID    string
	Score float64
}

// Index reads and writes the keyword indexes stored in one database. Create
// one per process and share it: it holds the cache. It is safe for
// concurrent use, and many processes may use the same database at once.
type Index struct {
	pool  *pgxpool.Pool
	an    Analyzer
	k1, b float64
	cache *cache
	// scratch holds per-query score accumulators, reused across searches.
	scratch sync.Pool
}

// New returns an Index over pool that analyses text with an (the same
// analyzer must be used for every process sharing the database).
func New(pool *pgxpool.Pool, an Analyzer, p Params) *Index {
	if an == nil {
		an = NewAnalyzer("auto")
	}
	if p.K1 <= 0 {
		p.K1 = defaultK1
	}
	switch {
	case p.B == 0:
		p.B = defaultB
	case p.B < 0:
		p.B = 0
	case p.B > 1:
		p.B = 1
	}
	if p.CacheBytes <= 0 {
		p.CacheBytes = defaultCacheBytes
	}
	return &Index{pool: pool, an: an, k1: p.K1, b: p.B, cache: newCache(p.CacheBytes)}
}

// Analyzer returns the analyzer the index uses for documents and queries.
func (ix *Index) Analyzer() Analyzer { return ix.an }
