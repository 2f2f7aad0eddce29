package kb_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

func chunkIDs(cs []kb.IndexedChunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func (e *env) indexVersion(t *testing.T, kbID string) int64 {
	t.Helper()
	var v int64
	if err := e.pool.QueryRow(e.ctx, `SELECT index_version FROM knowledge_bases WHERE kb_id = $1`, kbID).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func (e *env) owedDeletes(t *testing.T, kbID string) []string {
	t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT chunk_id FROM knowledge_vector_deletes WHERE kb_id = $1 ORDER BY chunk_id`, kbID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) keywordIDs(t *testing.T, kbID, query string) []string {
	t.Helper()
	hits, err := e.kw.Search(e.ctx, kbID, query, 100, nil)
	if err != nil {
		t.Fatalf("keyword search %q: %v", query, err)
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return sorted(out)
}

// TestCommitIndexReplacesChunks: a re-index keeps the ids (and rows) of
// unchanged content, deletes what went away (owing its vectors), inserts
// what is new, and keeps the keyword index in step.
func testCommitIndexReplacesChunks(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	f, first := e.ingest(t, k.KBID, "doc.md", "alpha one", "beta two", "gamma three")
	v1 := e.indexVersion(t, k.KBID)
	if f.ChunkCount != 3 || f.TokenCount != 6 || v1 < 1 {
		t.Fatalf("after first index: chunk_count %d token_count %d index_version %d", f.ChunkCount, f.TokenCount, v1)
	}
	var betaCreated time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT created_at FROM knowledge_chunks WHERE chunk_id = $1`, first[1].ID).Scan(&betaCreated); err != nil {
		t.Fatal(err)
	}

	e.restage(t, k.KBID, f.FileID, kb.StatusParsed)
	second, removed := e.index(t, f.FileID, "beta two", "delta four", "alpha one")
	if second[0].ID != first[1].ID || second[2].ID != first[0].ID {
		t.Fatalf("ids of unchanged content moved: %v → %v", chunkIDs(first), chunkIDs(second))
	}
	if !slices.Equal(removed, []string{first[2].ID}) {
		t.Fatalf("removed = %v, want [%s]", removed, first[2].ID)
	}
	if got := e.owedDeletes(t, k.KBID); !slices.Equal(got, []string{first[2].ID}) {
		t.Fatalf("owed vector deletes = %v", got)
	}
	cs, err := e.store.FileChunks(e.ctx, f.FileID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, c := range cs {
		got = append(got, c.Content)
		if c.ChunkIndex != i || c.ChunkID != second[i].ID {
			t.Fatalf("chunk %d = %+v", i, c)
		}
	}
	if !slices.Equal(got, []string{"beta two", "delta four", "alpha one"}) {
		t.Fatalf("chunks = %v", got)
	}
	var created time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT created_at FROM knowledge_chunks WHERE chunk_id = $1`, first[1].ID).Scan(&created); err != nil {
		t.Fatal(err)
	}
	if !created.Equal(betaCreated) {
		t.Fatal("the unchanged chunk's row was re-created")
	}
	if ids := e.keywordIDs(t, k.KBID, "gamma"); len(ids) != 0 {
		t.Fatalf("keyword index still finds the removed chunk: %v", ids)
	}
	if ids := e.keywordIDs(t, k.KBID, "delta"); !slices.Equal(ids, []string{second[1].ID}) {
		t.Fatalf("keyword index for the new chunk: %v", ids)
	}
	if ids := e.keywordIDs(t, k.KBID, "alpha beta"); !slices.Equal(ids, sorted([]string{first[0].ID, first[1].ID})) {
		t.Fatalf("keyword index for kept chunks: %v", ids)
	}
	if v := e.indexVersion(t, k.KBID); v <= v1 {
		t.Fatalf("index_version %d did not move past %d", v, v1)
	}

	// Repeated content gets distinct ids; an empty chunk list empties the file.
	e.restage(t, k.KBID, f.FileID, kb.StatusParsed)
	dup, _ := e.index(t, f.FileID, "same words", "same words")
	if dup[0].ID == dup[1].ID || dup[1].ID != dup[0].ID+"_2" {
		t.Fatalf("repeated content ids = %v", chunkIDs(dup))
	}
	e.restage(t, k.KBID, f.FileID, kb.StatusParsed)
	_, removed = e.index(t, f.FileID)
	if len(removed) != 2 {
		t.Fatalf("emptying removed %v", removed)
	}
	if cur := e.load(t, f.FileID); cur.ChunkCount != 0 || cur.Status != kb.StatusIndexed {
		t.Fatalf("after empty commit: %+v", cur)
	}
	if ids := e.keywordIDs(t, k.KBID, "same alpha beta delta"); len(ids) != 0 {
		t.Fatalf("keyword index after emptying: %v", ids)
	}
}

// TestCommitIndexIsAtomicForReaders re-commits a file's chunks over and
// over while readers list its chunks and search the keyword index: every
// read sees exactly the old set or exactly the new one, never a mix and
// never nothing.
func testCommitIndexIsAtomicForReaders(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	setA := []string{"common apple", "common banana", "common cherry"}
	setB := []string{"common banana", "common date", "common elder", "common fig"}
	f, csA := e.ingest(t, k.KBID, "flip.md", setA...)
	idsA, idsB := sorted(chunkIDs(csA)), sorted(chunkIDs(chunksOf(f.FileID, setB...)))
	valid := func(got []string) bool { return slices.Equal(got, idsA) || slices.Equal(got, idsB) }

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				var got []string
				if r == 0 {
					cs, err := e.store.FileChunks(ctx, f.FileID)
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					for _, c := range cs {
						got = append(got, c.ChunkID)
					}
				} else {
					hits, err := e.kw.Search(ctx, k.KBID, "common", 100, nil)
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					for _, h := range hits {
						got = append(got, h.ID)
					}
				}
				if got = sorted(got); !valid(got) {
					errs <- fmt.Errorf("reader %d saw %v; want %v or %v", r, got, idsA, idsB)
					return
				}
				reads.Add(1)
			}
		})
	}
	for i := range 16 {
		e.restage(t, k.KBID, f.FileID, kb.StatusParsed)
		next := setB
		if i%2 == 1 {
			next = setA
		}
		e.index(t, f.FileID, next...)
		if len(errs) > 0 {
			break
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() < 10 {
		t.Fatalf("only %d reads ran alongside the commits", reads.Load())
	}
}

// countingEmbedder counts the texts it embeds.
type countingEmbedder struct {
	texts atomic.Int64
}

func (c *countingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	c.texts.Add(int64(len(texts)))
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = []float32{float32(len(s)), -1.5, float32(math.SmallestNonzeroFloat32)}
	}
	return out, nil
}

// embedThroughCache embeds the contents a KB does not have cached yet,
// as kb-index does with CachedEmbeddings and CacheEmbeddings.
func (e *env) embedThroughCache(t *testing.T, em *countingEmbedder, model string, contents []string) map[string][]float32 {
	t.Helper()
	hashes := make([]string, len(contents))
	byHash := map[string]string{}
	for i, c := range contents {
		hashes[i] = hashOf(c)
		byHash[hashes[i]] = c
	}
	cached, err := e.store.CachedEmbeddings(e.ctx, model, hashes)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, h := range slices.Compact(sorted(hashes)) {
		if _, ok := cached[h]; !ok {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		texts := make([]string, len(missing))
		for i, h := range missing {
			texts[i] = byHash[h]
		}
		vecs, _ := em.Embed(e.ctx, texts)
		fresh := map[string][]float32{}
		for i, h := range missing {
			fresh[h] = vecs[i]
			cached[h] = vecs[i]
		}
		if err := e.store.CacheEmbeddings(e.ctx, model, fresh); err != nil {
			t.Fatal(err)
		}
	}
	return cached
}

// TestEmbeddingCache: vectors are stored by (model, content hash) exactly,
// a second pass over the same content embeds nothing, another model does
// not share the cache, and the first write of a hash wins.
func testEmbeddingCache(t *testing.T, e *env) {
	em := &countingEmbedder{}
	docs := []string{"first chunk", "second chunk", "first chunk", "third"}
	v1 := e.embedThroughCache(t, em, "model-a", docs)
	if em.texts.Load() != 3 || len(v1) != 3 {
		t.Fatalf("first pass embedded %d texts, cached %d; want 3 distinct", em.texts.Load(), len(v1))
	}
	v2 := e.embedThroughCache(t, em, "model-a", docs)
	if em.texts.Load() != 3 {
		t.Fatalf("second pass re-embedded: %d texts in total", em.texts.Load())
	}
	for h, v := range v1 {
		if !slices.Equal(v2[h], v) {
			t.Fatalf("cached vector of %s = %v, stored %v (must round-trip bit-exact)", h, v2[h], v)
		}
	}
	e.embedThroughCache(t, em, "model-b", docs[:1])
	if em.texts.Load() != 4 {
		t.Fatalf("another model reused model-a's vectors (%d texts embedded)", em.texts.Load())
	}

	h := hashOf("first chunk")
	if err := e.store.CacheEmbeddings(e.ctx, "model-a", map[string][]float32{h: {9, 9, 9}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.CachedEmbeddings(e.ctx, "model-a", []string{h, hashOf("never embedded")})
	if err != nil || len(got) != 1 || !slices.Equal(got[h], v1[h]) {
		t.Fatalf("after a second write: %v, %v; want the first vector only", got, err)
	}
	if err := e.store.CacheEmbeddings(e.ctx, "model-a", nil); err != nil {
		t.Fatalf("empty CacheEmbeddings: %v", err)
	}
	var dim int
	if err := e.pool.QueryRow(e.ctx, `SELECT dim FROM embedding_cache WHERE model = 'model-a' AND content_hash = $1`, h).Scan(&dim); err != nil || dim != 3 {
		t.Fatalf("stored dim = %d, %v", dim, err)
	}
}

// TestDeleteFilesAndFlushVectorDeletes: deleting a folder deletes what is in
// it; chunks leave the keyword index at once and their vectors once the
// owed deletions are flushed.
func testDeleteFilesAndFlushVectorDeletes(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	if err := e.vec.EnsureCollection(e.ctx, k.KBID, testDim); err != nil {
		t.Fatal(err)
	}
	var dir kb.File
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		var err error
		dir, err = e.store.CreateFolderTx(e.ctx, tx, k.KBID, "dir", nil, owner.UID)
		return err
	})
	var nested kb.File
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		fs, err := e.store.AddFilesTx(e.ctx, tx, emit, k.KBID, []kb.NewFile{{Filename: "in.md", ObjectKey: "up/in.md", ParentID: &dir.FileID}})
		if err == nil {
			nested = fs[0]
		}
		return err
	})
	p, _ := e.store.ClaimParse(e.ctx, nested.FileID, time.Minute)
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		return e.store.FinishParseTx(e.ctx, tx, emit, p, "parsed/in.md", []kb.Image{{ObjectKey: "img/in.png", ContentType: "image/png", Size: 1}})
	})
	inCs, _ := e.index(t, nested.FileID, "nested words")
	keep, keepCs := e.ingest(t, k.KBID, "keep.md", "kept words")
	var items []vector.Item
	for _, c := range append(slices.Clone(inCs), keepCs...) {
		items = append(items, vector.Item{ID: c.ID, Group: c.ID[:len("file_")+24], Vector: []float32{1, 0, 0}})
	}
	if err := e.vec.Upsert(e.ctx, k.KBID, items); err != nil {
		t.Fatal(err)
	}

	// A missing id fails the whole deletion.
	err := e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.DeleteFilesTx(e.ctx, tx, e.kw, k.KBID, []string{dir.FileID, "file_missing"})
		return err
	})
	wantCode(t, err, failure.KindNotFound, "file_not_found")
	e.load(t, nested.FileID)

	var rm kb.Removed
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		rm, err = e.store.DeleteFilesTx(e.ctx, tx, e.kw, k.KBID, []string{dir.FileID})
		return err
	})
	if len(rm.Files) != 2 || !slices.Equal(rm.ChunkIDs, chunkIDs(inCs)) ||
		!slices.Equal(sorted(rm.ObjectKeys), []string{"img/in.png", "parsed/in.md", "up/in.md"}) {
		t.Fatalf("removed = %+v", rm)
	}
	if _, err := e.store.LoadFile(e.ctx, nested.FileID); err != kb.ErrFileNotFound {
		t.Fatalf("nested file still there: %v", err)
	}
	if ids := e.keywordIDs(t, k.KBID, "nested kept"); !slices.Equal(ids, chunkIDs(keepCs)) {
		t.Fatalf("keyword hits after delete = %v", ids)
	}
	if got := e.owedDeletes(t, k.KBID); !slices.Equal(got, chunkIDs(inCs)) {
		t.Fatalf("owed deletes = %v", got)
	}
	hits, _ := e.vec.Search(e.ctx, k.KBID, []float32{1, 0, 0}, 10, nil)
	if len(hits) != 2 {
		t.Fatalf("vectors before the flush = %v (they go after commit, by the flush)", hits)
	}
	n, err := e.store.FlushVectorDeletes(e.ctx, e.vec, k.KBID)
	if err != nil || n != 1 {
		t.Fatalf("flush = %d, %v", n, err)
	}
	hits, _ = e.vec.Search(e.ctx, k.KBID, []float32{1, 0, 0}, 10, nil)
	if len(hits) != 1 || hits[0].ID != keepCs[0].ID {
		t.Fatalf("vectors after the flush = %v", hits)
	}
	if n, err := e.store.FlushVectorDeletes(e.ctx, e.vec, k.KBID); err != nil || n != 0 || len(e.owedDeletes(t, k.KBID)) != 0 {
		t.Fatalf("second flush = %d, %v", n, err)
	}

	// Deletions owed to a KB that no longer exists are forgotten without
	// touching the vector store.
	e.exec(t, `INSERT INTO knowledge_vector_deletes (kb_id, chunk_id) VALUES ('kb_gone', 'c1'), ('kb_gone', 'c2')`)
	if n, err := e.store.FlushVectorDeletes(e.ctx, failingDeleter{}, "kb_gone"); err != nil || n != 2 {
		t.Fatalf("flush of a deleted KB = %d, %v", n, err)
	}
	// A failing vector store keeps the owed rows for the next flush.
	e.restage(t, k.KBID, keep.FileID, kb.StatusParsed)
	e.index(t, keep.FileID, "replaced words")
	if _, err := e.store.FlushVectorDeletes(e.ctx, failingDeleter{}, k.KBID); err == nil {
		t.Fatal("flush with a failing vector store reported no error")
	}
	if got := e.owedDeletes(t, k.KBID); !slices.Equal(got, chunkIDs(keepCs)) {
		t.Fatalf("owed deletes after a failed flush = %v", got)
	}
}

type failingDeleter struct{}

func (failingDeleter) Delete(context.Context, string, []string) error {
	return fmt.Errorf("vector store down")
}

// testVectorWritesNeverOutliveTheirChunks follows vectors written before a
// commit: a crashed attempt's vectors that the next commit does not keep, and
// those of a file deleted mid-indexing, become owed deletions; an id owed a
// deletion and written again is not deleted by a later flush.
func testVectorWritesNeverOutliveTheirChunks(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	if err := e.vec.EnsureCollection(e.ctx, k.KBID, testDim); err != nil {
		t.Fatal(err)
	}
	write := func(f kb.File, cs []kb.IndexedChunk) {
		t.Helper()
		ids := chunkIDs(cs)
		if err := e.store.RecordVectorWrites(e.ctx, f, ids); err != nil {
			t.Fatal(err)
		}
		items := make([]vector.Item, len(ids))
		for i, id := range ids {
			items[i] = vector.Item{ID: id, Group: f.FileID, Vector: []float32{1, float32(i), 0}}
		}
		if err := e.vec.Upsert(e.ctx, k.KBID, items); err != nil {
			t.Fatal(err)
		}
	}
	vectorIDs := func(fileID string) []string {
		t.Helper()
		hits, err := e.vec.Search(e.ctx, k.KBID, []float32{1, 0, 0}, 100, []string{fileID})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.ID)
		}
		return sorted(ids)
	}

	// Attempt 1 writes the vectors of a coarse chunking and dies; attempt 2
	// chunks finer and commits. Attempt 1's vectors are owed and flushed.
	f := e.addFile(t, k.KBID, "a.md")
	e.parse(t, f.FileID)
	claimed, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	coarse := chunksOf(f.FileID, "one two", "three four")
	write(claimed, coarse)
	e.expireStage(t, f.FileID)
	again, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fine := chunksOf(f.FileID, "one", "two", "three four")
	write(again, fine)
	var removed []string
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		removed, err = e.store.CommitIndexTx(e.ctx, tx, e.kw, again, fine)
		return err
	})
	if !slices.Equal(sorted(removed), sorted([]string{coarse[0].ID})) {
		t.Fatalf("removed = %v, want the unkept vector of the dead attempt %s", removed, coarse[0].ID)
	}
	if _, err := e.store.FlushVectorDeletes(e.ctx, e.vec, k.KBID); err != nil {
		t.Fatal(err)
	}
	if got := vectorIDs(f.FileID); !slices.Equal(got, sorted(chunkIDs(fine))) {
		t.Fatalf("vectors after commit and flush = %v, want the committed %v", got, sorted(chunkIDs(fine)))
	}

	// A chunk removed (deletion owed, not yet flushed) and then written again
	// keeps its vector through the flush.
	e.restage(t, k.KBID, f.FileID, kb.StatusParsed)
	e.index(t, f.FileID, "one", "two")
	if owed := e.owedDeletes(t, k.KBID); !slices.Equal(owed, []string{fine[2].ID}) {
		t.Fatalf("owed = %v", owed)
	}
	e.restage(t, k.KBID, f.FileID, kb.StatusParsed)
	back, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	write(back, fine[2:])
	if owed := e.owedDeletes(t, k.KBID); len(owed) != 0 {
		t.Fatalf("owed after rewriting the id = %v", owed)
	}
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.CommitIndexTx(e.ctx, tx, e.kw, back, fine)
		return err
	})
	if _, err := e.store.FlushVectorDeletes(e.ctx, e.vec, k.KBID); err != nil {
		t.Fatal(err)
	}
	if got := vectorIDs(f.FileID); !slices.Equal(got, sorted(chunkIDs(fine))) {
		t.Fatalf("vectors = %v, want %v", got, sorted(chunkIDs(fine)))
	}

	// A file deleted while its indexing attempt had written vectors: they go.
	g := e.addFile(t, k.KBID, "b.md")
	e.parse(t, g.FileID)
	gc, err := e.store.ClaimIndex(e.ctx, g.FileID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	write(gc, chunksOf(g.FileID, "five", "six"))
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.DeleteFilesTx(e.ctx, tx, e.kw, k.KBID, []string{g.FileID})
		return err
	})
	if _, err := e.store.FlushVectorDeletes(e.ctx, e.vec, k.KBID); err != nil {
		t.Fatal(err)
	}
	if got := vectorIDs(g.FileID); len(got) != 0 {
		t.Fatalf("vectors of the deleted file = %v", got)
	}
	// The dead attempt cannot write more: the file is gone.
	if err := e.store.RecordVectorWrites(e.ctx, gc, []string{"x"}); !errors.Is(err, kb.ErrStageLost) {
		t.Fatalf("recording writes for a deleted file = %v, want ErrStageLost", err)
	}
}
