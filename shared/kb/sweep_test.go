package kb_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// TestRecoverStuckFiles: files whose stage outlived its lease, or that
// waited past the grace time for their next stage, are re-driven once;
// files still within their time, settled files and folders are left alone;
// a stage out of attempts ends in its error status.
func TestRecoverStuckFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := e.createKB(t, kb.CreateInput{})
	cfg := kb.SweepConfig{ParseLease: time.Minute, IndexLease: time.Minute, Grace: time.Minute, MaxAttempts: 3}

	// setup puts a new file in status with its stage (and last update)
	// started ago, after attempts claims.
	setup := func(name, status string, ago time.Duration, attempts int, autoIndex bool) kb.File {
		f := e.addFile(t, k.KBID, name)
		var started any
		if status == kb.StatusParsing || status == kb.StatusIndexing {
			started = time.Now().Add(-ago)
		}
		e.exec(t, `UPDATE knowledge_files SET status = $2, stage_started_at = $3, updated_at = now() - $4::interval,
			stage_attempts = $5, markdown_key = 'md', processing_params = jsonb_build_object('auto_index', $6::boolean),
			ingest_batch = $7 WHERE file_id = $1`, f.FileID, status, started, ago.String(), attempts, autoIndex, kb.NewBatchID())
		return f
	}
	hour := time.Hour
	fresh := 10 * time.Second
	want := map[string]string{} // file id → action
	name := map[string]string{}
	add := func(n, status string, ago time.Duration, attempts int, autoIndex bool, action string) {
		f := setup(n, status, ago, attempts, autoIndex)
		name[f.FileID] = n
		if action != "" {
			want[f.FileID] = action
		}
	}
	add("dead-parse", kb.StatusParsing, hour, 1, true, "redrive_parse")
	add("live-parse", kb.StatusParsing, fresh, 1, true, "")
	add("dead-index", kb.StatusIndexing, hour, 2, true, "redrive_index")
	add("live-index", kb.StatusIndexing, fresh, 1, true, "")
	add("lost-upload", kb.StatusUploaded, hour, 0, true, "redrive_parse")
	add("new-upload", kb.StatusUploaded, fresh, 0, true, "")
	// Added with documents/add (no ingestion batch): it waits for an
	// explicit parse, so the sweep leaves it; a bucket file has no batch
	// either, and its lost event is re-driven.
	add("added-only", kb.StatusUploaded, hour, 0, true, "")
	add("lost-bucket-file", kb.StatusUploaded, hour, 0, true, "redrive_parse")
	e.exec(t, `UPDATE knowledge_files SET ingest_batch = NULL WHERE filename IN ('added-only', 'lost-bucket-file') AND kb_id = $1`, k.KBID)
	e.exec(t, `UPDATE knowledge_files SET source = 'bucket' WHERE filename = 'lost-bucket-file' AND kb_id = $1`, k.KBID)
	add("lost-parsed", kb.StatusParsed, hour, 0, true, "redrive_index")
	add("parse-only", kb.StatusParsed, hour, 0, false, "")
	add("new-parsed", kb.StatusParsed, fresh, 0, true, "")
	add("exhausted-parse", kb.StatusParsing, hour, 3, true, "failed")
	add("exhausted-index", kb.StatusIndexing, hour, 5, true, "failed")
	for _, s := range []string{kb.StatusIndexed, kb.StatusErrorParsing, kb.StatusErrorIndexing} {
		add("old-"+s, s, hour, 1, true, "")
	}
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.CreateFolderTx(e.ctx, tx, k.KBID, "old folder", nil, owner.UID)
		return err
	})
	e.exec(t, `UPDATE knowledge_files SET updated_at = now() - interval '1 day' WHERE is_folder`)
	before := map[string]int{}
	for id := range name {
		before[id] = len(e.events(t, id))
	}

	recs, err := e.store.RecoverStuckFiles(e.ctx, e.ob, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range recs {
		if _, dup := got[r.FileID]; dup {
			t.Fatalf("%s recovered twice in one sweep", name[r.FileID])
		}
		got[r.FileID] = r.Action
		if r.KBID != k.KBID {
			t.Fatalf("recovery of another KB: %+v", r)
		}
	}
	for id, n := range name {
		if got[id] != want[id] {
			t.Errorf("%s: action %q, want %q", n, got[id], want[id])
		}
		evs := e.events(t, id)[before[id]:]
		var wantEvs []string
		switch want[id] {
		case "redrive_parse":
			wantEvs = []string{events.TypeDocumentUploaded}
		case "redrive_index":
			wantEvs = []string{events.TypeDocumentParsed}
		}
		if !slices.Equal(evs, wantEvs) {
			t.Errorf("%s: events %v, want %v", n, evs, wantEvs)
		}
	}
	for id, n := range name {
		f := e.load(t, id)
		switch n {
		case "exhausted-parse", "exhausted-index":
			wantStatus := map[string]string{"exhausted-parse": kb.StatusErrorParsing, "exhausted-index": kb.StatusErrorIndexing}[n]
			if f.Status != wantStatus || f.ErrorMessage == nil || !strings.Contains(*f.ErrorMessage, "gave up after") || f.StageStartedAt != nil {
				t.Errorf("%s after the sweep: %s %v", n, f.Status, f.ErrorMessage)
			}
		case "dead-parse", "dead-index":
			// Re-driven, not reset: the redelivered event reclaims the expired stage.
			if f.Status != map[string]string{"dead-parse": kb.StatusParsing, "dead-index": kb.StatusIndexing}[n] {
				t.Errorf("%s after the sweep: %s", n, f.Status)
			}
		}
	}

	// Once: a second sweep right away re-drives nothing.
	recs, err = e.store.RecoverStuckFiles(e.ctx, e.ob, cfg)
	if err != nil || len(recs) != 0 {
		t.Fatalf("second sweep = %+v, %v; want nothing", recs, err)
	}
	// The redelivered events do their work: the expired stages are reclaimed.
	for id, n := range name {
		switch n {
		case "dead-parse":
			if _, err := e.store.ClaimParse(e.ctx, id, cfg.ParseLease); err != nil {
				t.Fatalf("reclaim %s: %v", n, err)
			}
		case "dead-index":
			if _, err := e.store.ClaimIndex(e.ctx, id, cfg.IndexLease); err != nil {
				t.Fatalf("reclaim %s: %v", n, err)
			}
		}
	}
	// A file still stuck after another grace period is re-driven again.
	e.exec(t, `UPDATE knowledge_files SET updated_at = now() - interval '1 hour' WHERE kb_id = $1 AND status = 'uploaded'`, k.KBID)
	recs, err = e.store.RecoverStuckFiles(e.ctx, e.ob, cfg)
	if err != nil || len(recs) != 3 { // lost-upload, new-upload and lost-bucket-file (not added-only)
		t.Fatalf("sweep after another grace period = %+v, %v", recs, err)
	}

	// The sweep's other half flushes the vector deletions every KB is owed.
	if err := e.vec.EnsureCollection(e.ctx, k.KBID, testDim); err != nil {
		t.Fatal(err)
	}
	if err := e.vec.Upsert(e.ctx, k.KBID, []vector.Item{{ID: "c1", Group: "g", Vector: []float32{1, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	e.exec(t, `INSERT INTO knowledge_vector_deletes (kb_id, chunk_id) VALUES ($1, 'c1'), ('kb_gone', 'c2')`, k.KBID)
	if n, err := e.store.FlushVectorDeletes(e.ctx, e.vec, ""); err != nil || n != 2 {
		t.Fatalf("flush of every KB = %d, %v", n, err)
	}
	if hits, _ := e.vec.Search(e.ctx, k.KBID, []float32{1, 0, 0}, 5, nil); len(hits) != 0 {
		t.Fatalf("vectors after the flush: %v", hits)
	}
}
