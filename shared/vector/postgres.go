package vector

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// PostgresOptions tunes the embedded engine. The zero value is usable.
type PostgresOptions struct {
	// MaxCacheBytes caps the memory of the per-process cache across
	// collections (vectors, ids and graphs); the least recently searched
	// collections are dropped first. Default 1 GiB. A 100k × 1024 collection
	// takes about 420 MB.
	MaxCacheBytes int64

	// HNSWThreshold is the number of vectors from which a collection is
	// searched through an HNSW graph instead of exactly. Default 20000;
	// negative disables graphs.
	HNSWThreshold int
	// HNSWM is the number of links per node (level 0 has twice as many).
	// Default 16.
	HNSWM int
	// HNSWEfConstruction is the candidate list size while building. Default 100.
	HNSWEfConstruction int
	// HNSWEfSearch fixes the candidate list size while searching (raised
	// to k). Default 0: each graph calibrates its own after it is built, the
	// smallest reaching HNSWRecall against exact search (see calibrate.go).
	HNSWEfSearch int
	// HNSWRecall is the recall@k the calibration aims for. Default 0.95.
	HNSWRecall float64
	// BuildWorkers is the number of goroutines building a graph. Default
	// GOMAXPROCS/2 (at least 1), leaving the rest to searches.
	BuildWorkers int
	// SearchWorkers is the number of goroutines an exact scan of a large
	// collection is split across. Default GOMAXPROCS.
	SearchWorkers int

	// RebuildDelay is how long a collection must go without changes before
	// a stale graph is rebuilt. Default 10s.
	RebuildDelay time.Duration
	// RebuildFraction: a graph is rebuilt at once, quiet or not, when this
	// share of the collection was written since it was built. Default 0.1.
	RebuildFraction float64

	// TombstoneTTL is how long the ids of deleted vectors are kept for other
	// processes to catch up by difference; a copy older than the purged
	// tombstones is reloaded whole. Default 24h.
	TombstoneTTL time.Duration
}

func (o PostgresOptions) withDefaults() PostgresOptions {
	if o.MaxCacheBytes <= 0 {
		o.MaxCacheBytes = 1 << 30
	}
	if o.HNSWThreshold == 0 {
		o.HNSWThreshold = 20000
	}
	if o.HNSWM <= 0 {
		o.HNSWM = 16
	}
	o.HNSWM = min(o.HNSWM, 64)
	if o.HNSWEfConstruction <= 0 {
		o.HNSWEfConstruction = 100
	}
	if o.HNSWEfSearch < 0 {
		o.HNSWEfSearch = 0
	}
	if o.HNSWRecall <= 0 || o.HNSWRecall > 1 {
		o.HNSWRecall = 0.95
	}
	if o.BuildWorkers <= 0 {
		o.BuildWorkers = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if o.SearchWorkers <= 0 {
		o.SearchWorkers = runtime.GOMAXPROCS(0)
	}
	if o.RebuildDelay <= 0 {
		o.RebuildDelay = 10 * time.Second
	}
	if o.RebuildFraction <= 0 {
		o.RebuildFraction = 0.1
	}
	if o.TombstoneTTL <= 0 {
		o.TombstoneTTL = 24 * time.Hour
	}
	return o
}

// Postgres is the embedded engine: PostgreSQL keeps the vectors (migration
// 0004_vectors.sql), and each process searches its own in-memory copy.
//
// Cache. A collection is loaded on its first search. Every later search asks
// PostgreSQL for the collection's version (one indexed single-row query);
// when the copy is behind, it reads only the rows and tombstones written since
// its version and applies them copy-on-write, so searches in flight keep their
// snapshot and no search waits on another's scan. A dropped and re-created
// collection, or a copy older than the purged tombstones, is reloaded whole.
// Vectors are normalised once, at load, so cosine similarity is a dot product.
//
// Search. Below HNSWThreshold vectors, or while no graph is ready, search is
// exact: a bounded heap over one tight loop per 1024-slot block of
// contiguous float32s (AVX2 on amd64), split across SearchWorkers goroutines
// for large collections. From the threshold on, an HNSW graph is built in the
// background on the first search (exact search serves meanwhile). Each graph
// then measures its recall against exact search on 100 vectors held out of it
// and keeps the smallest candidate list reaching HNSWRecall; a graph that
// cannot, or that would compare nearly as many vectors as the exact scan
// (random high-dimensional data), is not used (calibrate.go). After
// writes, the graph keeps serving the vectors it was built over; vectors
// written since are searched exactly and merged, deleted or rewritten ones are
// filtered out of its results. A search rebuilds the graph lazily, in the
// background, once the collection has been quiet for RebuildDelay or
// RebuildFraction of it has changed. Group filters scan only the chosen groups'
// vectors exactly, unless they keep at least a quarter of a large collection,
// in which case the graph's results are post-filtered with a proportionally
// longer candidate list, falling back to exact when fewer than k survive.
//
// Concurrency. Writers of a collection serialise on its row lock in
// PostgreSQL and stamp their rows with increasing versions, so any number of
// processes may write and search at once, and a write is visible to every
// search that starts after it returns, in any process.
//
// Memory. MaxCacheBytes caps the cache; least recently searched collections
// are dropped first.
type Postgres struct {
	pool    *pgxpool.Pool
	opts    PostgresOptions
	cache   *cache
	layouts atomic.Uint64

	bgMu   sync.Mutex
	closed bool
	done   chan struct{}
	bg     sync.WaitGroup
}

var _ Store = (*Postgres)(nil)

// NewPostgres returns the embedded engine over pool, whose database must be
// migrated (shared/postgres.Migrate). Call Close to stop background graph
// builds.
func NewPostgres(pool *pgxpool.Pool, opts PostgresOptions) *Postgres {
	opts = opts.withDefaults()
	return &Postgres{pool: pool, opts: opts, cache: newCache(opts.MaxCacheBytes), done: make(chan struct{})}
}

// Close stops background graph builds and waits for them. The pool is the
// caller's to close. Searches after Close still work, without new graphs.
func (p *Postgres) Close() {
	p.bgMu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.bgMu.Unlock()
	p.bg.Wait()
}

// EnsureCollection creates the collection if it does not exist.
func (p *Postgres) EnsureCollection(ctx context.Context, name string, dim int) error {
	if err := CheckCollection(name, dim); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		_, err := p.pool.Exec(ctx, `
			INSERT INTO vector_collections (name, dim, epoch, version)
			SELECT $1, $2, s.v, s.v FROM (SELECT nextval('vector_versions') AS v) s
			ON CONFLICT (name) DO NOTHING`, name, dim)
		if err != nil {
			return wrap("ensure collection", name, err)
		}
		var have int
		err = p.pool.QueryRow(ctx, `SELECT dim FROM vector_collections WHERE name = $1`, name).Scan(&have)
		if errors.Is(err, pgx.ErrNoRows) && attempt < 3 {
			continue // dropped between the two statements
		}
		if err != nil {
			return wrap("ensure collection", name, err)
		}
		if have != dim {
			return DimensionMismatch(name, have, dim)
		}
		return nil
	}
}

// upsertBatch bounds the rows of one INSERT statement.
const upsertBatch = 500

// Upsert writes items in one transaction: all or nothing.
func (p *Postgres) Upsert(ctx context.Context, collection string, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	items = Dedupe(items)
	err := postgres.Tx(ctx, p.pool, func(tx pgx.Tx) error {
		var dim int
		err := tx.QueryRow(ctx, `SELECT dim FROM vector_collections WHERE name = $1 FOR UPDATE`, collection).Scan(&dim)
		if errors.Is(err, pgx.ErrNoRows) {
			return CollectionNotFound(collection)
		}
		if err != nil {
			return err
		}
		if err := CheckItems(collection, dim, items); err != nil {
			return err
		}
		version, err := bumpVersion(ctx, tx, collection)
		if err != nil {
			return err
		}
		ids := make([]string, 0, upsertBatch)
		grps := make([]string, 0, upsertBatch)
		vecs := make([][]byte, 0, upsertBatch)
		for start := 0; start < len(items); start += upsertBatch {
			ids, grps, vecs = ids[:0], grps[:0], vecs[:0]
			for _, it := range items[start:min(start+upsertBatch, len(items))] {
				ids = append(ids, it.ID)
				grps = append(grps, it.Group)
				vecs = append(vecs, encodeVec(it.Vector))
			}
			if _, err := tx.Exec(ctx, `
				INSERT INTO vector_items (collection, id, grp, vec, version)
				SELECT $1, u.id, u.grp, u.vec, $5
				FROM unnest($2::text[], $3::text[], $4::bytea[]) AS u(id, grp, vec)
				ON CONFLICT (collection, id) DO UPDATE
				SET grp = EXCLUDED.grp, vec = EXCLUDED.vec, version = EXCLUDED.version`,
				collection, ids, grps, vecs, version); err != nil {
				return err
			}
			// A re-written id is no longer deleted: its row (with a newer
			// version) is what other processes will read.
			if _, err := tx.Exec(ctx, `DELETE FROM vector_tombstones WHERE collection = $1 AND id = ANY($2)`,
				collection, ids); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap("upsert into", collection, err)
}

// bumpVersion stamps a write; the caller holds the collection row's lock, so
// versions of one collection grow in commit order.
func bumpVersion(ctx context.Context, tx pgx.Tx, collection string) (int64, error) {
	var v int64
	err := tx.QueryRow(ctx, `
		UPDATE vector_collections SET version = nextval('vector_versions'), updated_at = now()
		WHERE name = $1 RETURNING version`, collection).Scan(&v)
	return v, err
}

// Delete removes ids; unknown ids and a missing collection are not errors.
func (p *Postgres) Delete(ctx context.Context, collection string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return wrap("delete from", collection, p.deleteWhere(ctx, collection, `id = ANY($3)`, ids))
}

// DeleteGroup removes every vector of group (a file's chunks).
func (p *Postgres) DeleteGroup(ctx context.Context, collection, group string) error {
	return wrap("delete group from", collection, p.deleteWhere(ctx, collection, `grp = $3`, group))
}

var errNothingDeleted = errors.New("nothing deleted")

func (p *Postgres) deleteWhere(ctx context.Context, collection, cond string, arg any) error {
	err := postgres.Tx(ctx, p.pool, func(tx pgx.Tx) error {
		var dim int
		err := tx.QueryRow(ctx, `SELECT dim FROM vector_collections WHERE name = $1 FOR UPDATE`, collection).Scan(&dim)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		version, err := bumpVersion(ctx, tx, collection)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			WITH d AS (DELETE FROM vector_items WHERE collection = $1 AND `+cond+` RETURNING id)
			INSERT INTO vector_tombstones (collection, id, version)
			SELECT $1, id, $2 FROM d
			ON CONFLICT (collection, id) DO UPDATE SET version = EXCLUDED.version, deleted_at = now()`,
			collection, version, arg)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNothingDeleted // roll back the version bump
		}
		_, err = tx.Exec(ctx, `
			WITH p AS (
				DELETE FROM vector_tombstones
				WHERE collection = $1 AND deleted_at < now() - make_interval(secs => $2)
				RETURNING version)
			UPDATE vector_collections SET purged_version = GREATEST(purged_version, (SELECT max(version) FROM p))
			WHERE name = $1 AND EXISTS (SELECT 1 FROM p)`,
			collection, p.opts.TombstoneTTL.Seconds())
		return err
	})
	if errors.Is(err, errNothingDeleted) {
		return nil
	}
	return err
}

// DropCollection deletes the collection and its vectors.
func (p *Postgres) DropCollection(ctx context.Context, name string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM vector_collections WHERE name = $1`, name); err != nil {
		return wrap("drop collection", name, err)
	}
	p.cache.remove(name)
	return nil
}

// collectionMeta is a collection's row.
type collectionMeta struct {
	epoch, version, purged int64
	dim                    int
}

func readMeta(ctx context.Context, db postgres.DB, name string) (collectionMeta, error) {
	var m collectionMeta
	err := db.QueryRow(ctx, `SELECT epoch, version, purged_version, dim FROM vector_collections WHERE name = $1`,
		name).Scan(&m.epoch, &m.version, &m.purged, &m.dim)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, CollectionNotFound(name)
	}
	return m, err
}

// Search returns the k vectors nearest to query by cosine similarity.
func (p *Postgres) Search(ctx context.Context, collection string, query []float32, k int, groups []string) ([]Hit, error) {
	hits, _, err := p.search(ctx, collection, query, k, groups)
	return hits, err
}

func (p *Postgres) search(ctx context.Context, collection string, query []float32, k int, groups []string) ([]Hit, searchPath, error) {
	m, err := readMeta(ctx, p.pool, collection)
	if err != nil {
		if errors.Is(err, ErrCollectionNotFound) {
			p.cache.remove(collection)
		}
		return nil, pathEmpty, wrap("search", collection, err)
	}
	if err := CheckQuery(collection, m.dim, query); err != nil {
		return nil, pathEmpty, err
	}
	if k <= 0 || groups != nil && len(groups) == 0 {
		return []Hit{}, pathEmpty, nil
	}
	col := p.cache.get(collection)
	s, err := p.current(ctx, col, m)
	if err != nil {
		return nil, pathEmpty, wrap("search", collection, err)
	}
	p.maybeBuild(col, s)
	q := make([]float32, len(query))
	copy(q, query)
	normalize(q)
	hits, path := s.search(q, searchParams{
		k:        k,
		groups:   groups,
		efSearch: p.opts.HNSWEfSearch,
		workers:  p.opts.SearchWorkers,
		useIndex: p.opts.HNSWThreshold >= 0 && s.live >= p.opts.HNSWThreshold,
	})
	if hits == nil {
		hits = []Hit{}
	}
	return hits, path, nil
}

func upToDate(s *snapshot, m collectionMeta) bool {
	return s != nil && s.epoch == m.epoch && s.version >= m.version
}

// current returns a snapshot at least as new as m, refreshing the copy when
// it is behind.
func (p *Postgres) current(ctx context.Context, col *collection, m collectionMeta) (*snapshot, error) {
	if s := col.snap.Load(); upToDate(s, m) {
		return s, nil
	}
	if err := col.lock(ctx); err != nil {
		return nil, err
	}
	defer col.unlock()
	if s := col.snap.Load(); upToDate(s, m) {
		return s, nil
	}
	s, err := p.refresh(ctx, col)
	if err != nil {
		if errors.Is(err, ErrCollectionNotFound) {
			p.cache.remove(col.name)
		}
		return nil, err
	}
	col.snap.Store(s)
	p.cache.resize(col, s.bytes)
	return s, nil
}

// deltaRow is a changed vector read ahead of applying, so that a failed
// read leaves the copy untouched.
type deltaRow struct {
	id, grp string
	vec     []byte
	version int64
}

// refresh brings col's copy up to date inside one repeatable-read
// transaction, so the version it records matches the rows it read. The caller
// holds col's lock.
func (p *Postgres) refresh(ctx context.Context, col *collection) (*snapshot, error) {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	m, err := readMeta(ctx, tx, col.name)
	if err != nil {
		return nil, err
	}
	old := col.snap.Load()
	if old != nil && old.epoch == m.epoch && old.version >= m.version {
		return old, nil
	}
	if old != nil && old.epoch == m.epoch && old.version >= m.purged && old.dim == m.dim {
		s, err := p.applyDelta(ctx, tx, col, old, m)
		if err != nil || s != nil {
			return s, err
		}
		// Too much changed: a whole reload is cheaper.
	}
	return p.load(ctx, tx, col, m)
}

// applyDelta reads what changed since old and applies it; it returns nil,
// nil when the change is too large to be worth applying row by row.
func (p *Postgres) applyDelta(ctx context.Context, tx pgx.Tx, col *collection, old *snapshot, m collectionMeta) (*snapshot, error) {
	var deleted []string
	rows, err := tx.Query(ctx, `SELECT id FROM vector_tombstones WHERE collection = $1 AND version > $2`, col.name, old.version)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		deleted = append(deleted, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	limit := old.live/2 + 1024
	var changed []deltaRow
	rows, err = tx.Query(ctx, `SELECT id, grp, vec, version FROM vector_items WHERE collection = $1 AND version > $2`,
		col.name, old.version)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var r deltaRow
		if err := rows.Scan(&r.id, &r.grp, &r.vec, &r.version); err != nil {
			rows.Close()
			return nil, err
		}
		if len(r.vec) != 4*m.dim {
			rows.Close()
			return nil, fmt.Errorf("vector %q has %d bytes, want %d", r.id, len(r.vec), 4*m.dim)
		}
		changed = append(changed, r)
		if len(changed) > limit {
			rows.Close()
			return nil, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	mut := newMutator(old, col.st, m.version)
	for _, id := range deleted {
		mut.remove(id, m.version)
	}
	for _, r := range changed {
		mut.upsert(r.id, r.grp, r.vec, r.version)
	}
	col.lastChange.Store(time.Now().UnixNano())
	col.refreshes.Add(1)
	return mut.done(), nil
}

// load reads the whole collection into a new layout. The previous copy stays
// in use by searches until the new one replaces it.
func (p *Postgres) load(ctx context.Context, tx pgx.Tx, col *collection, m collectionMeta) (*snapshot, error) {
	fresh, st := freshSnapshot(m.epoch, m.version, p.layouts.Add(1), m.dim)
	mut := newMutator(fresh, st, m.version)
	rows, err := tx.Query(ctx, `SELECT id, grp, vec, version FROM vector_items WHERE collection = $1`, col.name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, grp string
		var raw pgtype.DriverBytes // decoded in place, not copied
		var version int64
		if err := rows.Scan(&id, &grp, &raw, &version); err != nil {
			return nil, err
		}
		if len(raw) != 4*m.dim {
			return nil, fmt.Errorf("vector %q has %d bytes, want %d", id, len(raw), 4*m.dim)
		}
		mut.upsert(id, grp, raw, version)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	col.st = st
	col.loads.Add(1)
	return mut.done(), nil
}

// maybeBuild starts a background graph build when the collection is large
// enough and has no graph, or its graph is stale and the rebuild policy says
// so. At most one build per collection runs at a time.
func (p *Postgres) maybeBuild(col *collection, s *snapshot) {
	if p.opts.HNSWThreshold < 0 || s.live < p.opts.HNSWThreshold || col.building.Load() {
		return
	}
	if s.index != nil {
		if s.stale == 0 {
			return
		}
		quiet := time.Since(time.Unix(0, col.lastChange.Load())) >= p.opts.RebuildDelay
		if !quiet && float64(s.stale) < p.opts.RebuildFraction*float64(s.live) {
			return
		}
	}
	p.bgMu.Lock()
	defer p.bgMu.Unlock()
	if p.closed || !col.building.CompareAndSwap(false, true) {
		return
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		defer col.building.Store(false)
		h := buildHNSW(p.done, s, hnswConfig{
			m: p.opts.HNSWM, efConstruction: p.opts.HNSWEfConstruction,
			workers: p.opts.BuildWorkers, seed: s.layout,
			efSearch: p.opts.HNSWEfSearch, recall: p.opts.HNSWRecall,
		})
		if h == nil {
			return
		}
		select {
		case col.sem <- struct{}{}:
		case <-p.done:
			return
		}
		defer col.unlock()
		cur := col.snap.Load()
		if cur == nil || cur.layout != h.layout || cur.index != nil && cur.index.version >= h.version {
			return // reloaded meanwhile, or a newer graph is in place
		}
		ns := cur.withIndex(h)
		col.snap.Store(ns)
		p.cache.resize(col, ns.bytes)
	}()
}

// CacheInfo describes this process's copy of a collection.
type CacheInfo struct {
	Cached       bool  // a copy is loaded
	Version      int64 // the copy includes every write up to this version
	Vectors      int   // live vectors in the copy
	Bytes        int64 // approximate memory of the copy and its graph
	Indexed      bool  // an HNSW graph exists
	IndexVersion int64 // the version the graph was built from
	IndexStale   int   // vectors written since the graph was built (searched exactly)
	IndexUsable  bool  // the graph reached the recall target cheaply enough to be used
	IndexEf      int   // the graph's candidate list size for k = 10
	Building     bool  // a graph is being built
	Loads        int64 // whole loads of this copy
	Refreshes    int64 // catch-ups by difference
}

// CacheInfo reports on the cached copy of name, for operators and tests.
func (p *Postgres) CacheInfo(name string) CacheInfo {
	col := p.cache.peek(name)
	if col == nil {
		return CacheInfo{}
	}
	info := CacheInfo{Building: col.building.Load(), Loads: col.loads.Load(), Refreshes: col.refreshes.Load()}
	if s := col.snap.Load(); s != nil {
		info.Cached = true
		info.Version = s.version
		info.Vectors = s.live
		info.Bytes = s.bytes
		if s.index != nil {
			info.Indexed = true
			info.IndexVersion = s.index.version
			info.IndexStale = s.stale
			info.IndexUsable = s.index.usable
			info.IndexEf = s.index.ef10
		}
	}
	return info
}

// CacheBytes is the approximate memory held by the cache.
func (p *Postgres) CacheBytes() int64 { return p.cache.totalBytes() }
