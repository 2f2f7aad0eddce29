package indexdoc_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/functions/kb-index/indexdoc"
	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// A parsed file is indexed: its chunks are rows, each chunk is a document of
// the KB's keyword index and a vector of its collection (the same ids), the
// file says indexed with its counts, the KB's index version moves, nothing
// is left recorded as in flight, and both searches find the file's content.
func TestParsedIndexesChunksKeywordsAndVectors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.parsed(t, e.KB.KBID, "harbours.md", document("Brest", "Lorient", "Saint-Malo"))
	version := e.indexVersion(t, e.KB.KBID)

	if err := e.handler(indexdoc.Config{}).Parsed(e.Ctx, parsedEvent(f)); err != nil {
		t.Fatalf("Parsed: %v", err)
	}
	got := e.load(t, f.FileID)
	chunks := e.chunkIDs(t, f.FileID)
	if got.Status != kb.StatusIndexed || got.ErrorMessage != nil {
		t.Fatalf("file = %s (error %v), want indexed", got.Status, got.ErrorMessage)
	}
	if len(chunks) < 2 || got.ChunkCount != len(chunks) || got.TokenCount <= 0 {
		t.Fatalf("%d chunk rows, chunk_count %d, token_count %d; want several, counted", len(chunks), got.ChunkCount, got.TokenCount)
	}
	if kw := e.keywordIDs(t, e.KB.KBID); !slices.Equal(kw, chunks) {
		t.Errorf("keyword documents %v, want the chunks %v", kw, chunks)
	}
	if vs := e.vectorIDs(t, e.KB.KBID, f.FileID); !slices.Equal(vs, chunks) {
		t.Errorf("vectors %v, want the chunks %v", vs, chunks)
	}
	if v := e.indexVersion(t, e.KB.KBID); v != version+1 {
		t.Errorf("index_version %d → %d, want one step", version, v)
	}
	if n := e.count(t, `SELECT count(*) FROM knowledge_vector_writes WHERE file_id = $1`, f.FileID); n != 0 {
		t.Errorf("%d vector writes still recorded as in flight after the commit", n)
	}
	if int(e.em.texts.Load()) != len(chunks) {
		t.Errorf("embedded %d texts for %d chunks", e.em.texts.Load(), len(chunks))
	}

	hits, err := e.Keyword.Search(e.Ctx, e.KB.KBID, "lorient", 3, nil)
	if err != nil || len(hits) == 0 || !slices.Contains(chunks, hits[0].ID) {
		t.Errorf("keyword search for lorient = %v, %v; want a chunk of the file", hits, err)
	}
	q, err := embed.NewHashing(256).Embed(e.Ctx, []string{"Saint-Malo pilot notes"})
	if err != nil {
		t.Fatal(err)
	}
	vhits, err := e.Vectors.Search(e.Ctx, e.KB.KBID, q[0], 3, nil)
	if err != nil || len(vhits) == 0 || !slices.Contains(chunks, vhits[0].ID) {
		t.Errorf("vector search = %v, %v; want a chunk of the file", vhits, err)
	}
}

// A redelivered document.parsed changes nothing: after the commit it finds
// the file past its stage (no embedding, no new index version), and while
// another delivery holds a live stage it leaves that stage alone.
func TestParsedTwiceIndexesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.handler(indexdoc.Config{})

	done := e.parsed(t, e.KB.KBID, "done.md", document("Brest", "Roscoff"))
	if err := h.Parsed(e.Ctx, parsedEvent(done)); err != nil {
		t.Fatal(err)
	}
	before, chunks, texts, version := e.load(t, done.FileID), e.chunkIDs(t, done.FileID), e.em.texts.Load(), e.indexVersion(t, e.KB.KBID)
	if before.Status != kb.StatusIndexed || len(chunks) == 0 {
		t.Fatalf("first delivery left %s with %d chunks, want indexed", before.Status, len(chunks))
	}
	if err := h.Parsed(e.Ctx, parsedEvent(done)); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	after := e.load(t, done.FileID)
	if !after.UpdatedAt.Equal(before.UpdatedAt) || after.Status != kb.StatusIndexed {
		t.Errorf("second delivery changed the file: %s at %v → %s at %v", before.Status, before.UpdatedAt, after.Status, after.UpdatedAt)
	}
	if e.em.texts.Load() != texts || e.indexVersion(t, e.KB.KBID) != version || !slices.Equal(e.chunkIDs(t, done.FileID), chunks) {
		t.Errorf("second delivery indexed again: %d more texts embedded, index_version %d → %d",
			e.em.texts.Load()-texts, version, e.indexVersion(t, e.KB.KBID))
	}

	// Another worker claimed this one a moment ago and is still indexing it.
	held := e.parsed(t, e.KB.KBID, "held.md", document("Concarneau"))
	e.exec(t, `UPDATE knowledge_files SET status = 'indexing', stage_started_at = clock_timestamp(), stage_attempts = 1
		WHERE file_id = $1`, held.FileID)
	if err := h.Parsed(e.Ctx, parsedEvent(held)); err != nil {
		t.Fatalf("delivery of a held file: %v", err)
	}
	if got := e.load(t, held.FileID); got.Status != kb.StatusIndexing || got.StageAttempts != 1 {
		t.Errorf("delivery took a live stage: now %s/%d", got.Status, got.StageAttempts)
	}
	if n := len(e.chunkIDs(t, held.FileID)) + len(e.vectorIDs(t, e.KB.KBID, held.FileID)); n != 0 {
		t.Errorf("delivery of a held file wrote %d chunks and vectors", n)
	}
}

// Indexing the same Markdown again (the file sent back to parsed) keeps the
// chunks' ids and vectors and embeds nothing: embeddings are cached by
// content and unchanged chunks are not rewritten.
func TestParsedAgainReusesChunksAndEmbeddings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.handler(indexdoc.Config{})
	f := e.parsed(t, e.KB.KBID, "again.md", document("Brest", "Camaret"))
	if err := h.Parsed(e.Ctx, parsedEvent(f)); err != nil {
		t.Fatal(err)
	}
	chunks, texts := e.chunkIDs(t, f.FileID), e.em.texts.Load()
	if _, err := e.Lib.Restage(e.Ctx, admin, e.KB.KBID, []string{f.FileID}, kb.StatusParsed, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Parsed(e.Ctx, parsedEvent(f)); err != nil {
		t.Fatal(err)
	}
	if got := e.load(t, f.FileID); got.Status != kb.StatusIndexed {
		t.Fatalf("file = %s, want indexed again", got.Status)
	}
	if got := e.chunkIDs(t, f.FileID); !slices.Equal(got, chunks) {
		t.Errorf("chunks %v after re-indexing, want the same ids %v", got, chunks)
	}
	if n := e.em.texts.Load() - texts; n != 0 {
		t.Errorf("re-indexing unchanged content embedded %d texts", n)
	}
	if vs := e.vectorIDs(t, e.KB.KBID, f.FileID); !slices.Equal(vs, chunks) {
		t.Errorf("vectors %v, want %v", vs, chunks)
	}
}

// Bad input — the parsed Markdown gone from the object store, a model whose
// vectors do not fit the KB — ends in error_indexing with its message, and
// the delivery is acknowledged (nil: not retried). Nothing is indexed, and a
// later delivery leaves the failed file alone.
func TestParsedBadInputEndsErrorIndexingAndIsAcknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.handler(indexdoc.Config{})
	narrow := e.createKB(t, kb.CreateInput{Name: "narrow", EmbeddingModelSpec: "builtin:hash-ngram-64", EmbeddingDim: 32})

	gone := e.parsed(t, e.KB.KBID, "gone.md", document("Brest"))
	if err := e.Objs.Delete(e.Ctx, *gone.MarkdownKey); err != nil {
		t.Fatal(err)
	}
	mismatch := e.parsed(t, narrow.KBID, "mismatch.md", document("Lorient"))

	for _, c := range []struct {
		f    kb.File
		want string
	}{
		{gone, "the parsed Markdown is gone; parse the file again"},
		{mismatch, "model builtin:hash-ngram-64 returned 64 dimensions; the knowledge base expects 32"},
	} {
		if err := h.Parsed(e.Ctx, parsedEvent(c.f)); err != nil {
			t.Fatalf("%s: Parsed = %v, want nil (acknowledged, not retried)", c.f.Filename, err)
		}
		got := e.load(t, c.f.FileID)
		if got.Status != kb.StatusErrorIndexing || got.ErrorMessage == nil || *got.ErrorMessage != c.want {
			t.Fatalf("%s: file = %s, error %v; want error_indexing, %q", c.f.Filename, got.Status, got.ErrorMessage, c.want)
		}
		if n := len(e.chunkIDs(t, c.f.FileID)) + len(e.vectorIDs(t, c.f.KBID, c.f.FileID)) + len(e.keywordIDs(t, c.f.KBID)); n != 0 {
			t.Errorf("%s: a failed file left %d chunks, vectors and keyword documents", c.f.Filename, n)
		}
		if err := h.Parsed(e.Ctx, parsedEvent(c.f)); err != nil {
			t.Fatalf("%s: redelivery: %v", c.f.Filename, err)
		}
		if again := e.load(t, c.f.FileID); again.Status != kb.StatusErrorIndexing || again.StageAttempts != got.StageAttempts {
			t.Errorf("%s: redelivery indexed a failed file again: %s/%d", c.f.Filename, again.Status, again.StageAttempts)
		}
	}
}

// A passing fault (the embedding service down) releases the stage and is
// returned, so that the event is delivered again; after MaxAttempts the
// file ends in error_indexing and the delivery is acknowledged.
func TestParsedPassingFaultIsRetriedThenGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := errors.New("embedding service unavailable")
	e.em.fail.Store(&down)
	h := e.handler(indexdoc.Config{MaxAttempts: 2})
	f := e.parsed(t, e.KB.KBID, "flaky.md", document("Brest"))

	if err := h.Parsed(e.Ctx, parsedEvent(f)); !errors.Is(err, down) {
		t.Fatalf("first attempt = %v, want the fault returned for redelivery", err)
	}
	if got := e.load(t, f.FileID); got.Status != kb.StatusParsed || got.StageAttempts != 1 || got.StageStartedAt != nil {
		t.Fatalf("after a passing fault the file is %s/%d (stage %v); want parsed/1, released", got.Status, got.StageAttempts, got.StageStartedAt)
	}
	if err := h.Parsed(e.Ctx, parsedEvent(f)); err != nil {
		t.Fatalf("last attempt = %v, want nil (acknowledged)", err)
	}
	got := e.load(t, f.FileID)
	if got.Status != kb.StatusErrorIndexing || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, down.Error()) {
		t.Fatalf("after the last attempt the file is %s, error %v; want error_indexing with the fault", got.Status, got.ErrorMessage)
	}
	if n := len(e.chunkIDs(t, f.FileID)); n != 0 {
		t.Errorf("%d chunks of a file that never embedded", n)
	}
}

// An indexing stage whose worker died (older than the lease) is taken over
// by the next delivery and finished.
func TestParsedTakesOverAStaleStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.parsed(t, e.KB.KBID, "stale.md", document("Brest"))
	e.exec(t, `UPDATE knowledge_files SET status = 'indexing', stage_started_at = clock_timestamp() - interval '1 hour',
		stage_attempts = 1 WHERE file_id = $1`, f.FileID)

	var claimed kb.File
	h := e.handler(indexdoc.Config{Lease: time.Minute, Crash: func(point string) {
		if point == "index.claimed" {
			claimed = e.load(t, f.FileID)
		}
	}})
	if err := h.Parsed(e.Ctx, parsedEvent(f)); err != nil {
		t.Fatal(err)
	}
	if claimed.Status != kb.StatusIndexing || claimed.StageAttempts != 2 {
		t.Fatalf("the stale stage was not reclaimed: %s/%d at the claim, want indexing/2", claimed.Status, claimed.StageAttempts)
	}
	got := e.load(t, f.FileID)
	if got.Status != kb.StatusIndexed || got.ChunkCount == 0 || len(e.vectorIDs(t, e.KB.KBID, f.FileID)) != got.ChunkCount {
		t.Fatalf("file = %s with %d chunks and %d vectors, want indexed", got.Status, got.ChunkCount, len(e.vectorIDs(t, e.KB.KBID, f.FileID)))
	}
}

// A file deleted while it is being indexed, after its vectors were written
// and before its chunks commit: the commit finds the stage lost and writes
// nothing; the vectors the stage wrote were recorded before they were
// written, so the deletion removes them too. Nothing of the file remains.
func TestParsedFileDeletedMidStageIsCleanedUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.parsed(t, e.KB.KBID, "doomed.md", document("Brest", "Lorient"))
	var written int
	h := e.handler(indexdoc.Config{Crash: func(point string) {
		if point != "index.before_commit" {
			return
		}
		written = len(e.vectorIDs(t, e.KB.KBID, f.FileID))
		if _, err := e.Lib.RemoveFiles(e.Ctx, admin, e.KB.KBID, []string{f.FileID}); err != nil {
			t.Errorf("delete the file mid-stage: %v", err)
		}
	}})
	if err := h.Parsed(e.Ctx, parsedEvent(f)); err != nil {
		t.Fatalf("Parsed = %v, want nil", err)
	}
	if written == 0 {
		t.Fatal("the stage had written no vectors when the file was deleted")
	}
	if _, err := e.KBs.LoadFile(e.Ctx, f.FileID); !errors.Is(err, kb.ErrFileNotFound) {
		t.Fatalf("file after deletion: %v", err)
	}
	left := fmt.Sprintf("chunks %v, vectors %v, keyword documents %v, in-flight writes %d, owed deletes %d",
		e.chunkIDs(t, f.FileID), e.vectorIDs(t, e.KB.KBID, f.FileID), e.keywordIDs(t, e.KB.KBID),
		e.count(t, `SELECT count(*) FROM knowledge_vector_writes WHERE file_id = $1`, f.FileID),
		e.count(t, `SELECT count(*) FROM knowledge_vector_deletes WHERE kb_id = $1`, e.KB.KBID))
	if want := "chunks [], vectors [], keyword documents [], in-flight writes 0, owed deletes 0"; left != want {
		t.Errorf("left of the deleted file: %s; want %s", left, want)
	}
}

// A KB deleted (and purged) while one of its files is being indexed: the
// next batch finds the file gone and stops writing vectors, and the handler
// owes the KB's purge again, since vectors it wrote may have outlived the
// purge; the sweep's purge then leaves no collection behind.
func TestParsedKBDeletedMidStageOwesItsPurge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.parsed(t, e.KB.KBID, "orphan.md", document("Brest", "Lorient", "Roscoff"))
	batches := 0
	h := e.handler(indexdoc.Config{Batch: 1, Crash: func(point string) {
		if point != "index.batch_embedded" {
			return
		}
		if batches++; batches == 1 {
			if _, err := e.Lib.DeleteKB(e.Ctx, admin, e.KB.KBID); err != nil {
				t.Errorf("delete the KB mid-stage: %v", err)
			}
		}
	}})
	owed := func() int {
		return e.count(t, `SELECT count(*) FROM knowledge_base_purges WHERE kb_id = $1`, e.KB.KBID)
	}
	if err := h.Parsed(e.Ctx, parsedEvent(f)); err != nil {
		t.Fatalf("Parsed = %v, want nil", err)
	}
	if batches != 1 {
		t.Errorf("%d batches embedded; the stage should stop at the first after the deletion", batches)
	}
	if owed() != 1 {
		t.Fatal("the purge of the deleted KB is not owed again after the stage lost its file")
	}
	if _, err := e.KBs.PurgeDeleted(e.Ctx, e.Vectors, e.Objs, e.KB.KBID); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM vector_collections WHERE name = $1`, e.KB.KBID); n != 0 || owed() != 0 {
		t.Errorf("after the purge: %d collections, %d purges owed; want none", n, owed())
	}
}
