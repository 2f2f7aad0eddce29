package kb_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// TestFileLifecycle walks a file through both stages and checks each
// transition's row and the events it emits.
func testFileLifecycle(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	f := e.addFile(t, k.KBID, `Dir\Report.PDF`)
	if f.Status != kb.StatusUploaded || f.Filename != "report.pdf" || f.OriginalFilename != "Report.PDF" || f.FileType != "pdf" ||
		f.StageAttempts != 0 || f.StageStartedAt != nil {
		t.Fatalf("added file = %+v", f)
	}
	if got := e.events(t, f.FileID); !slices.Equal(got, []string{events.TypeDocumentUploaded}) {
		t.Fatalf("events after add = %v", got)
	}

	p, err := e.store.ClaimParse(e.ctx, f.FileID, time.Minute)
	if err != nil || p.Status != kb.StatusParsing || p.StageAttempts != 1 || p.StageStartedAt == nil {
		t.Fatalf("ClaimParse = %+v, %v", p, err)
	}
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		return e.store.FinishParseTx(e.ctx, tx, emit, p, "parsed/x.md", []kb.Image{{ObjectKey: k.KBID + "/img/1.png", ContentType: "image/png", Size: 3}})
	})
	parsed := e.load(t, f.FileID)
	if parsed.Status != kb.StatusParsed || parsed.MarkdownKey == nil || *parsed.MarkdownKey != "parsed/x.md" || parsed.StageStartedAt != nil {
		t.Fatalf("after FinishParse: %+v", parsed)
	}
	if got := e.events(t, f.FileID); !slices.Equal(got, []string{events.TypeDocumentUploaded, events.TypeDocumentParsed}) {
		t.Fatalf("events after parse = %v", got)
	}

	ix, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
	if err != nil || ix.Status != kb.StatusIndexing || ix.StageAttempts != 1 {
		t.Fatalf("ClaimIndex = %+v, %v (the index stage's first attempt)", ix, err)
	}
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.CommitIndexTx(e.ctx, tx, e.kw, ix, chunksOf(f.FileID, "one two", "three four five"))
		return err
	})
	done := e.load(t, f.FileID)
	if done.Status != kb.StatusIndexed || done.ChunkCount != 2 || done.TokenCount != 5 || done.StageStartedAt != nil {
		t.Fatalf("after CommitIndex: %+v", done)
	}
	// Redelivered events of both stages find nothing to do.
	if _, err := e.store.ClaimParse(e.ctx, f.FileID, time.Minute); !errors.Is(err, kb.ErrNotReady) {
		t.Fatalf("redelivered upload: %v", err)
	}
	if _, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute); !errors.Is(err, kb.ErrNotReady) {
		t.Fatalf("redelivered parsed: %v", err)
	}
	if got := e.load(t, f.FileID); got.Status != kb.StatusIndexed || !got.UpdatedAt.Equal(done.UpdatedAt) {
		t.Fatalf("redeliveries changed the file: %+v", got)
	}
	if got := e.events(t, f.FileID); len(got) != 2 {
		t.Fatalf("indexing emitted events: %v", got)
	}
}

// TestFinishParseWithoutAutoIndexEmitsNothing: a file added with
// auto_index=false stops at parsed.
func testFinishParseWithoutAutoIndexEmitsNothing(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	var f kb.File
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		fs, err := e.store.AddFilesTx(e.ctx, tx, emit, k.KBID, []kb.NewFile{{Filename: "a.md", ObjectKey: "k/a.md", Processing: kb.Processing{AutoIndex: false}}})
		if err == nil {
			f = fs[0]
		}
		return err
	})
	e.parse(t, f.FileID)
	if got := e.events(t, f.FileID); !slices.Equal(got, []string{events.TypeDocumentUploaded}) {
		t.Fatalf("events = %v, want only the upload", got)
	}
}

// TestClaimFromEachStatus: a stage starts only from its own input status (or
// from its own status once the lease expired); every other claim is refused
// and leaves the row untouched. This covers redelivered events for files
// that are already parsed or indexed: they are no-ops.
func testClaimFromEachStatus(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	type want struct {
		parse, index error // nil: the claim succeeds
	}
	cases := map[string]want{
		kb.StatusUploaded:      {nil, kb.ErrNotReady},
		kb.StatusParsing:       {kb.ErrBusy, kb.ErrNotReady},
		kb.StatusParsed:        {kb.ErrNotReady, nil},
		kb.StatusErrorParsing:  {kb.ErrNotReady, kb.ErrNotReady},
		kb.StatusIndexing:      {kb.ErrNotReady, kb.ErrBusy},
		kb.StatusIndexed:       {kb.ErrNotReady, kb.ErrNotReady},
		kb.StatusErrorIndexing: {kb.ErrNotReady, kb.ErrNotReady},
	}
	for status, w := range cases {
		for _, stage := range []string{"parse", "index"} {
			f := e.addFile(t, k.KBID, status+"-"+stage+".md")
			started := any(nil)
			if status == kb.StatusParsing || status == kb.StatusIndexing {
				started = time.Now()
			}
			e.exec(t, `UPDATE knowledge_files SET status = $2, stage_started_at = $3, markdown_key = 'md' WHERE file_id = $1`,
				f.FileID, status, started)
			before := e.load(t, f.FileID)
			claim, wantErr, to := e.store.ClaimParse, w.parse, kb.StatusParsing
			if stage == "index" {
				claim, wantErr, to = e.store.ClaimIndex, w.index, kb.StatusIndexing
			}
			got, err := claim(e.ctx, f.FileID, time.Minute)
			if wantErr == nil {
				if err != nil || got.Status != to || got.StageAttempts != before.StageAttempts+1 {
					t.Errorf("%s from %s = %s/%d, %v; want %s", stage, status, got.Status, got.StageAttempts, err, to)
				}
				continue
			}
			if !errors.Is(err, wantErr) {
				t.Errorf("%s from %s: error %v, want %v", stage, status, err, wantErr)
			}
			after := e.load(t, f.FileID)
			if after.Status != before.Status || after.StageAttempts != before.StageAttempts || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("%s from %s: refused claim changed the row: %+v → %+v", stage, status, before, after)
			}
		}
	}

	var folder kb.File
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		var err error
		folder, err = e.store.CreateFolderTx(e.ctx, tx, k.KBID, "docs", nil, owner.UID)
		return err
	})
	for _, claim := range []func() error{
		func() error { _, err := e.store.ClaimParse(e.ctx, folder.FileID, time.Minute); return err },
		func() error { _, err := e.store.ClaimIndex(e.ctx, folder.FileID, time.Minute); return err },
	} {
		wantErr(t, claim(), kb.ErrNotReady)
	}
	_, err := e.store.ClaimParse(e.ctx, "file_missing", time.Minute)
	wantErr(t, err, kb.ErrFileNotFound)
}

// TestConcurrentClaimsOneWinner: goroutines racing to claim the same file
// through separate connections: exactly one wins, the others see ErrBusy.
func testConcurrentClaimsOneWinner(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	const racers = 6
	for round := range 5 {
		f := e.addFile(t, k.KBID, "race"+string(rune('a'+round))+".md")
		claim := e.store.ClaimParse
		if round%2 == 1 { // odd rounds race for the index stage
			e.parse(t, f.FileID)
			claim = e.store.ClaimIndex
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, racers)
		got := make([]kb.File, racers)
		for i := range racers {
			wg.Go(func() {
				<-start
				got[i], errs[i] = claim(e.ctx, f.FileID, time.Minute)
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for i, err := range errs {
			switch {
			case err == nil:
				winners++
				if got[i].StageAttempts != 1 {
					t.Errorf("round %d: winner holds attempt %d, want 1", round, got[i].StageAttempts)
				}
			case !errors.Is(err, kb.ErrBusy):
				t.Errorf("round %d: loser error %v, want ErrBusy", round, err)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1 (errors %v)", round, winners, errs)
		}
		if f := e.load(t, f.FileID); f.StageAttempts != 1 {
			t.Fatalf("round %d: stage_attempts = %d after the race, want 1", round, f.StageAttempts)
		}
	}
}

// TestExpiredLeaseIsReclaimedAndStaleOwnerFenced: a worker that outlived its
// lease can no longer finish, fail or release the stage; the new owner can.
func testExpiredLeaseIsReclaimedAndStaleOwnerFenced(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})

	t.Run("parse", func(t *testing.T) {
		f := e.addFile(t, k.KBID, "lease-parse.md")
		stale, err := e.store.ClaimParse(e.ctx, f.FileID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.store.ClaimParse(e.ctx, f.FileID, time.Minute)
		wantErr(t, err, kb.ErrBusy) // lease still running
		e.expireStage(t, f.FileID)
		fresh, err := e.store.ClaimParse(e.ctx, f.FileID, time.Minute)
		if err != nil || fresh.StageAttempts != stale.StageAttempts+1 {
			t.Fatalf("reclaim = %+v, %v", fresh, err)
		}
		err = e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, emit outbox.Emit) error {
			return e.store.FinishParseTx(e.ctx, tx, emit, stale, "parsed/stale.md", nil)
		})
		wantErr(t, err, kb.ErrStageLost)
		if ok, err := e.store.FailStage(e.ctx, stale, "stale failure"); ok || err != nil {
			t.Fatalf("stale FailStage = %v, %v", ok, err)
		}
		if err := e.store.ReleaseStage(e.ctx, stale); err != nil {
			t.Fatal(err)
		}
		if cur := e.load(t, f.FileID); cur.Status != kb.StatusParsing || cur.StageAttempts != fresh.StageAttempts || cur.ErrorMessage != nil {
			t.Fatalf("stale owner changed the row: %+v", cur)
		}
		e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
			return e.store.FinishParseTx(e.ctx, tx, emit, fresh, "parsed/fresh.md", nil)
		})
		if cur := e.load(t, f.FileID); cur.Status != kb.StatusParsed || *cur.MarkdownKey != "parsed/fresh.md" {
			t.Fatalf("after fresh FinishParse: %+v", cur)
		}
		if got := e.events(t, f.FileID); !slices.Equal(got, []string{events.TypeDocumentUploaded, events.TypeDocumentParsed}) {
			t.Fatalf("events = %v, want one upload and one parsed", got)
		}
	})

	t.Run("index", func(t *testing.T) {
		f := e.addFile(t, k.KBID, "lease-index.md")
		e.parse(t, f.FileID)
		stale, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		e.expireStage(t, f.FileID)
		fresh, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		err = e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, _ outbox.Emit) error {
			_, err := e.store.CommitIndexTx(e.ctx, tx, e.kw, stale, chunksOf(f.FileID, "stale words"))
			return err
		})
		wantErr(t, err, kb.ErrStageLost)
		e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
			_, err := e.store.CommitIndexTx(e.ctx, tx, e.kw, fresh, chunksOf(f.FileID, "fresh words"))
			return err
		})
		cs, err := e.store.FileChunks(e.ctx, f.FileID)
		if err != nil || len(cs) != 1 || cs[0].Content != "fresh words" {
			t.Fatalf("chunks = %+v, %v", cs, err)
		}
		// The stale owner cannot fail the finished stage either.
		if ok, _ := e.store.FailStage(e.ctx, stale, "late"); ok {
			t.Fatal("stale FailStage succeeded on an indexed file")
		}
	})

	t.Run("zombie across a restage", func(t *testing.T) {
		// A worker whose lease expired long ago must not commit into a later
		// indexing stage of the same file, even one whose attempt counter
		// happens to equal its own.
		f := e.addFile(t, k.KBID, "zombie.md")
		e.parse(t, f.FileID)
		zombie, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		e.expireStage(t, f.FileID)
		e.index(t, f.FileID, "first")
		if r := e.restage(t, k.KBID, f.FileID, kb.StatusParsed); r["status"] != kb.StatusParsed {
			t.Fatalf("restage = %v", r)
		}
		if _, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute); err != nil {
			t.Fatal(err)
		}
		err = e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, _ outbox.Emit) error {
			_, err := e.store.CommitIndexTx(e.ctx, tx, e.kw, zombie, chunksOf(f.FileID, "zombie"))
			return err
		})
		wantErr(t, err, kb.ErrStageLost)
	})
}

// TestFailAndReleaseStage: FailStage ends a stage in its error status;
// ReleaseStage hands it back to its input status for an immediate retry,
// keeping the attempt count (the retry budget).
func testFailAndReleaseStage(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})

	f := e.addFile(t, k.KBID, "fail-parse.md")
	p, _ := e.store.ClaimParse(e.ctx, f.FileID, time.Minute)
	// A long message in a multi-byte script, with a NUL and an invalid
	// byte from a quoted file, is stored cut on a character boundary.
	long := "x" + strings.Repeat("解析失败", 250) + "\x00\xff"
	if ok, err := e.store.FailStage(e.ctx, p, long); !ok || err != nil {
		t.Fatalf("FailStage = %v, %v", ok, err)
	}
	cur := e.load(t, f.FileID)
	if cur.Status != kb.StatusErrorParsing || cur.ErrorMessage == nil || cur.StageStartedAt != nil {
		t.Fatalf("after FailStage (parse): %+v", cur)
	}
	if msg := *cur.ErrorMessage; len(msg) > 2000 || len(msg) < 1990 || !utf8.ValidString(msg) || !strings.HasPrefix(long, msg) {
		t.Fatalf("stored message: %d bytes, valid UTF-8 %v", len(msg), utf8.ValidString(msg))
	}
	if ok, _ := e.store.FailStage(e.ctx, p, "again"); ok {
		t.Fatal("FailStage twice succeeded")
	}

	g := e.addFile(t, k.KBID, "fail-index.md")
	e.parse(t, g.FileID)
	ix, _ := e.store.ClaimIndex(e.ctx, g.FileID, time.Minute)
	if ok, err := e.store.FailStage(e.ctx, ix, "dimension mismatch"); !ok || err != nil {
		t.Fatalf("FailStage = %v, %v", ok, err)
	}
	if cur := e.load(t, g.FileID); cur.Status != kb.StatusErrorIndexing || *cur.ErrorMessage != "dimension mismatch" {
		t.Fatalf("after FailStage (index): %+v", cur)
	}

	h := e.addFile(t, k.KBID, "release.md")
	p1, _ := e.store.ClaimParse(e.ctx, h.FileID, time.Minute)
	if err := e.store.ReleaseStage(e.ctx, p1); err != nil {
		t.Fatal(err)
	}
	if cur := e.load(t, h.FileID); cur.Status != kb.StatusUploaded || cur.StageStartedAt != nil {
		t.Fatalf("after ReleaseStage (parse): %+v", cur)
	}
	p2, err := e.store.ClaimParse(e.ctx, h.FileID, time.Minute)
	if err != nil || p2.StageAttempts != 2 {
		t.Fatalf("retry claim = %+v, %v; want attempt 2", p2, err)
	}
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error { return e.store.FinishParseTx(e.ctx, tx, emit, p2, "md", nil) })
	i1, _ := e.store.ClaimIndex(e.ctx, h.FileID, time.Minute)
	if err := e.store.ReleaseStage(e.ctx, i1); err != nil {
		t.Fatal(err)
	}
	if cur := e.load(t, h.FileID); cur.Status != kb.StatusParsed {
		t.Fatalf("after ReleaseStage (index): %+v", cur)
	}
	i2, err := e.store.ClaimIndex(e.ctx, h.FileID, time.Minute)
	if err != nil || i2.StageAttempts != i1.StageAttempts+1 {
		t.Fatalf("index retry = %+v, %v; want attempt %d", i2, err, i1.StageAttempts+1)
	}
}

// TestRestageFromEachStatus: settled files go back to a stage (with the
// matching event); files in a stage are "busy"; a file never parsed cannot
// be re-indexed; a folder is not processed.
func testRestageFromEachStatus(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	type want struct{ toUploaded, toParsed string } // resulting status, or the error message
	cases := map[string]want{
		kb.StatusUploaded:      {kb.StatusUploaded, "not parsed yet"},
		kb.StatusParsing:       {"busy", "busy"},
		kb.StatusParsed:        {kb.StatusUploaded, kb.StatusParsed},
		kb.StatusErrorParsing:  {kb.StatusUploaded, "not parsed yet"},
		kb.StatusIndexing:      {"busy", "busy"},
		kb.StatusIndexed:       {kb.StatusUploaded, kb.StatusParsed},
		kb.StatusErrorIndexing: {kb.StatusUploaded, kb.StatusParsed},
	}
	for status, w := range cases {
		for _, to := range []string{kb.StatusUploaded, kb.StatusParsed} {
			f := e.addFile(t, k.KBID, "restage-"+status+"-"+to+".md")
			var md any
			if status != kb.StatusUploaded && status != kb.StatusErrorParsing && status != kb.StatusParsing {
				md = "parsed/" + f.FileID + ".md"
			}
			e.exec(t, `UPDATE knowledge_files SET status = $2, markdown_key = $3, error_message = 'old',
				processing_params = '{"auto_index": false}' WHERE file_id = $1`, f.FileID, status, md)
			before := len(e.events(t, f.FileID))
			var res []map[string]any
			e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
				var err error
				res, err = e.store.RestageTx(e.ctx, tx, emit, k.KBID, []string{f.FileID}, to, []byte(`{"chunk_preset_id":"qa"}`))
				return err
			})
			expect := w.toUploaded
			if to == kb.StatusParsed {
				expect = w.toParsed
			}
			cur := e.load(t, f.FileID)
			evs := e.events(t, f.FileID)[before:]
			if expect == to {
				wantEvent := events.TypeDocumentUploaded
				if to == kb.StatusParsed {
					wantEvent = events.TypeDocumentParsed
				}
				if res[0]["status"] != to || res[0]["error"] != nil || cur.Status != to || cur.ErrorMessage != nil ||
					!cur.Processing().AutoIndex || !jsonEqual(cur.Processing().Chunking, `{"chunk_preset_id":"qa"}`) ||
					!slices.Equal(evs, []string{wantEvent}) {
					t.Errorf("restage %s → %s: result %v, row %s %v %s, events %v", status, to, res[0], cur.Status,
						cur.ErrorMessage, cur.ProcessingParams, evs)
				}
				continue
			}
			if res[0]["error"] != expect || res[0]["status"] != status || cur.Status != status || len(evs) != 0 {
				t.Errorf("restage %s → %s: result %v, row %s, events %v; want refusal %q", status, to, res[0], cur.Status, evs, expect)
			}
		}
	}

	var folder kb.File
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		var err error
		folder, err = e.store.CreateFolderTx(e.ctx, tx, k.KBID, "dir", nil, owner.UID)
		return err
	})
	if r := e.restage(t, k.KBID, folder.FileID, kb.StatusUploaded); r["error"] != "folders are not processed" {
		t.Fatalf("restage folder = %v", r)
	}
	other := e.createKB(t, kb.CreateInput{})
	g := e.addFile(t, other.KBID, "elsewhere.md")
	err := e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		_, err := e.store.RestageTx(e.ctx, tx, emit, k.KBID, []string{g.FileID}, kb.StatusUploaded, nil)
		return err
	})
	wantCode(t, err, failure.KindNotFound, "file_not_found")
}

// TestRestageStartsAFreshRetryBudget: every new stage of a file starts
// counting its attempts from one, so re-indexing a file many times does not
// use up the retry budget of its next stage.
func testRestageStartsAFreshRetryBudget(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	f, _ := e.ingest(t, k.KBID, "often.md", "v0")
	for i := range 6 {
		e.restage(t, k.KBID, f.FileID, kb.StatusParsed)
		ix, err := e.store.ClaimIndex(e.ctx, f.FileID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ix.StageAttempts != 1 {
			t.Fatalf("re-index %d: claim holds attempt %d, want 1", i, ix.StageAttempts)
		}
		e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
			_, err := e.store.CommitIndexTx(e.ctx, tx, e.kw, ix, chunksOf(f.FileID, "v"+string(rune('1'+i))))
			return err
		})
	}
	e.restage(t, k.KBID, f.FileID, kb.StatusUploaded)
	p, err := e.store.ClaimParse(e.ctx, f.FileID, time.Minute)
	if err != nil || p.StageAttempts != 1 {
		t.Fatalf("re-parse claim = attempt %d, %v; want 1", p.StageAttempts, err)
	}
}

// TestAddFilesValidation: names are checked, duplicate content is a
// conflict, a parent must be a folder of the same KB.
func testAddFilesValidation(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	add := func(nf kb.NewFile) ([]kb.File, error) {
		var out []kb.File
		err := e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, emit outbox.Emit) error {
			var err error
			out, err = e.store.AddFilesTx(e.ctx, tx, emit, k.KBID, []kb.NewFile{nf})
			return err
		})
		return out, err
	}
	for _, name := range []string{"", ".", "/", strings.Repeat("n", 256)} {
		_, err := add(kb.NewFile{Filename: name, ObjectKey: "x"})
		wantCode(t, err, failure.KindUnprocessable, "invalid_filename")
	}
	if _, err := add(kb.NewFile{Filename: "a.md", ObjectKey: "a", ContentHash: "h1"}); err != nil {
		t.Fatal(err)
	}
	_, err := add(kb.NewFile{Filename: "b.md", ObjectKey: "b", ContentHash: "h1"})
	wantCode(t, err, failure.KindConflict, "duplicate_content")
	// The same content in another KB is fine.
	other := e.createKB(t, kb.CreateInput{})
	err = e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		_, err := e.store.AddFilesTx(e.ctx, tx, emit, other.KBID, []kb.NewFile{{Filename: "b.md", ObjectKey: "b", ContentHash: "h1"}})
		return err
	})
	if err != nil {
		t.Fatalf("same content in another KB: %v", err)
	}
	missing := "file_nope"
	_, err = add(kb.NewFile{Filename: "c.md", ObjectKey: "c", ParentID: &missing})
	wantCode(t, err, failure.KindNotFound, "folder_not_found")
	// A failed batch leaves nothing behind: no file, no event.
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM knowledge_files WHERE kb_id = $1`, k.KBID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("files in KB = %d, %v; want 1", n, err)
	}
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM outbox WHERE data->>'kb_id' = $1`, k.KBID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("events of KB = %d, %v; want 1", n, err)
	}
}

// TestFoldersListingAndSearch: folder rules, listing order and paging,
// filename search across KBs.
func testFoldersListingAndSearch(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	var dir, sub kb.File
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		var err error
		if dir, err = e.store.CreateFolderTx(e.ctx, tx, k.KBID, " Reports ", nil, owner.UID); err != nil {
			return err
		}
		sub, err = e.store.CreateFolderTx(e.ctx, tx, k.KBID, "2024", &dir.FileID, owner.UID)
		return err
	})
	if !dir.IsFolder || dir.Filename != "Reports" || dir.Status != kb.StatusIndexed || sub.ParentID == nil || *sub.ParentID != dir.FileID {
		t.Fatalf("folders = %+v / %+v", dir, sub)
	}
	folderErr := func(name string, parent *string) error {
		return e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, _ outbox.Emit) error {
			_, err := e.store.CreateFolderTx(e.ctx, tx, k.KBID, name, parent, owner.UID)
			return err
		})
	}
	wantCode(t, folderErr("Reports", nil), failure.KindConflict, "folder_exists")
	wantCode(t, folderErr("a/b", nil), failure.KindUnprocessable, "invalid_folder")
	wantCode(t, folderErr("  ", nil), failure.KindUnprocessable, "invalid_folder")
	wantCode(t, folderErr(".", nil), failure.KindUnprocessable, "invalid_folder")
	wantCode(t, folderErr(" .. ", nil), failure.KindUnprocessable, "invalid_folder")
	nope := "file_nope"
	wantCode(t, folderErr("x", &nope), failure.KindNotFound, "folder_not_found")
	if err := folderErr("Reports", &dir.FileID); err != nil { // same name, other parent
		t.Fatalf("same folder name under another parent: %v", err)
	}

	for _, n := range []string{"b.md", "a.md", "c.txt"} {
		e.addFile(t, k.KBID, n)
	}
	var inDir kb.File
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		fs, err := e.store.AddFilesTx(e.ctx, tx, emit, k.KBID, []kb.NewFile{{Filename: "nested.md", ObjectKey: "n", ParentID: &dir.FileID}})
		if err == nil {
			inDir = fs[0]
		}
		return err
	})

	names := func(fs []kb.File) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.Filename
		}
		return out
	}
	root, total, err := e.store.ListFiles(e.ctx, k.KBID, kb.ListInput{})
	if err != nil || total != 4 || !slices.Equal(names(root), []string{"Reports", "a.md", "b.md", "c.txt"}) {
		t.Fatalf("root = %v (total %d), %v", names(root), total, err)
	}
	page, total, _ := e.store.ListFiles(e.ctx, k.KBID, kb.ListInput{Offset: 1, Limit: 2})
	if total != 4 || !slices.Equal(names(page), []string{"a.md", "b.md"}) {
		t.Fatalf("page = %v (total %d)", names(page), total)
	}
	inside, _, _ := e.store.ListFiles(e.ctx, k.KBID, kb.ListInput{ParentID: &dir.FileID})
	if !slices.Equal(names(inside), []string{"2024", "Reports", "nested.md"}) {
		t.Fatalf("inside Reports = %v", names(inside))
	}
	found, total, _ := e.store.ListFiles(e.ctx, k.KBID, kb.ListInput{Query: ".MD", AllLevels: true})
	if total != 3 || !slices.Equal(names(found), []string{"a.md", "b.md", "nested.md"}) {
		t.Fatalf("search .MD = %v (total %d)", names(found), total)
	}
	e.exec(t, `UPDATE knowledge_files SET status = 'indexed' WHERE file_id = $1`, inDir.FileID)
	byStatus, _, _ := e.store.ListFiles(e.ctx, k.KBID, kb.ListInput{Status: kb.StatusUploaded, AllLevels: true})
	if !slices.Equal(names(byStatus), []string{"a.md", "b.md", "c.txt"}) {
		t.Fatalf("uploaded = %v", names(byStatus))
	}

	other := e.createKB(t, kb.CreateInput{})
	e.addFile(t, other.KBID, "a-other.md")
	hits, total, err := e.store.SearchFiles(e.ctx, []string{k.KBID, other.KBID}, "A", 0, 10)
	if err != nil || total != 2 || len(hits) != 2 {
		t.Fatalf("SearchFiles = %v (total %d), %v", names(hits), total, err)
	}
	if hits, total, _ := e.store.SearchFiles(e.ctx, nil, "a", 0, 10); total != 0 || len(hits) != 0 {
		t.Fatalf("SearchFiles without KBs = %v", hits)
	}
	if _, total, _ := e.store.SearchFiles(e.ctx, []string{k.KBID}, "reports", 0, 10); total != 0 {
		t.Fatal("SearchFiles returned a folder")
	}

	// GetFile checks the KB and that the file belongs to it.
	if _, _, err := e.store.GetFile(e.ctx, owner, other.KBID, inDir.FileID); !errors.Is(err, kb.ErrFileNotFound) {
		t.Fatalf("GetFile across KBs = %v", err)
	}
	if _, f, err := e.store.GetFile(e.ctx, owner, k.KBID, inDir.FileID); err != nil || f.FileID != inDir.FileID {
		t.Fatalf("GetFile = %v", err)
	}
	if _, _, err := e.store.GetFile(e.ctx, user("stranger"), k.KBID, inDir.FileID); !errors.Is(err, kb.ErrNotFound) {
		t.Fatalf("GetFile by a stranger = %v", err)
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want bool
	}{
		{errors.New("connection reset"), false},
		{failure.New(failure.KindUnavailable, "x", "down"), false},
		{failure.New(failure.KindTooMany, "x", "slow down"), false},
		{failure.New(failure.KindInternal, "x", "bug"), false},
		{failure.Unprocessable("unsupported", "no"), true},
		{failure.New(failure.KindTooLarge, "too_large", "big"), true},
		{errors.Join(errors.New("wrapped"), failure.Unprocessable("embedding_dimension_mismatch", "dim")), true},
	}
	for _, c := range cases {
		if got := kb.Permanent(c.err); got != c.want {
			t.Errorf("Permanent(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// testConcurrentTreeChanges: two folders moved into each other at the same
// time, and two folders of one name created at once: one of each wins, the
// tree keeps no cycle and no duplicate.
func testConcurrentTreeChanges(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	var a, b kb.File
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		var err error
		if a, err = e.store.CreateFolderTx(e.ctx, tx, k.KBID, "A", nil, owner.UID); err != nil {
			return err
		}
		b, err = e.store.CreateFolderTx(e.ctx, tx, k.KBID, "B", nil, owner.UID)
		return err
	})
	for round := range 5 {
		errs := make(chan error, 4)
		var wg sync.WaitGroup
		run := func(fn func(tx pgx.Tx) error) {
			wg.Go(func() {
				errs <- e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, _ outbox.Emit) error { return fn(tx) })
			})
		}
		run(func(tx pgx.Tx) error {
			_, err := e.store.MoveFileTx(e.ctx, tx, k.KBID, a.FileID, &b.FileID)
			return err
		})
		run(func(tx pgx.Tx) error {
			_, err := e.store.MoveFileTx(e.ctx, tx, k.KBID, b.FileID, &a.FileID)
			return err
		})
		name := fmt.Sprintf("same-%d", round)
		run(func(tx pgx.Tx) error {
			_, err := e.store.CreateFolderTx(e.ctx, tx, k.KBID, name, nil, owner.UID)
			return err
		})
		run(func(tx pgx.Tx) error {
			_, err := e.store.CreateFolderTx(e.ctx, tx, k.KBID, name, nil, owner.UID)
			return err
		})
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if err != nil {
				failed++
			}
		}
		if failed != 2 {
			t.Fatalf("round %d: %d of 4 changes failed, want one move and one create", round, failed)
		}
		var cycle bool
		if err := e.pool.QueryRow(e.ctx, `SELECT (SELECT parent_id FROM knowledge_files WHERE file_id = $1) = $2
			AND (SELECT parent_id FROM knowledge_files WHERE file_id = $2) = $1`, a.FileID, b.FileID).Scan(&cycle); err == nil && cycle {
			t.Fatalf("round %d: A and B are each other's parent", round)
		}
		// Back to the root for the next round.
		e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
			if _, err := e.store.MoveFileTx(e.ctx, tx, k.KBID, a.FileID, nil); err != nil {
				return err
			}
			_, err := e.store.MoveFileTx(e.ctx, tx, k.KBID, b.FileID, nil)
			return err
		})
	}
}
