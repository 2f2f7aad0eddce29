package parsedoc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/doc-parse/parsedoc"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

const page = `<html><body><h1>Tide tables</h1><p>High water at Brest is at 06:12.</p>
<ul><li>spring tides</li><li>neap tides</li></ul></body></html>`

// An uploaded file is parsed: its Markdown (converted, not the original
// copied) is stored at kb.MarkdownKey, the row says parsed and points at it,
// and document.parsed is emitted for kb-index in the same transaction.
func TestUploadedParsesStoresMarkdownAndEmitsParsed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.upload(t, "tides.html", page)

	if err := e.handler(parsedoc.Config{}).Uploaded(e.Ctx, uploaded(f)); err != nil {
		t.Fatalf("Uploaded: %v", err)
	}
	got := e.load(t, f.FileID)
	key := kb.MarkdownKey(f.KBID, f.FileID)
	if got.Status != kb.StatusParsed || got.MarkdownKey == nil || *got.MarkdownKey != key || got.ErrorMessage != nil {
		t.Fatalf("file after parse = %s, markdown %v, error %v; want parsed at %s", got.Status, got.MarkdownKey, got.ErrorMessage, key)
	}
	if got.StageAttempts != 0 || got.StageStartedAt != nil {
		t.Errorf("a finished stage leaves attempts %d, started %v; want 0, nil", got.StageAttempts, got.StageStartedAt)
	}
	md, ok := e.object(t, key)
	if !ok {
		t.Fatalf("no Markdown stored at %s", key)
	}
	for _, want := range []string{"# Tide tables", "High water at Brest is at 06:12.", "spring tides"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "<h1>") {
		t.Errorf("Markdown is the original HTML, not its conversion:\n%s", md)
	}
	e.wantEvents(t, f.FileID, events.TypeDocumentUploaded, events.TypeDocumentParsed)
}

// A redelivered document.uploaded changes nothing: after the parse it finds
// the file past its stage, and while another delivery holds a live stage it
// leaves that stage alone. Neither writes a second document.parsed.
func TestUploadedTwiceParsesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.handler(parsedoc.Config{})

	done := e.upload(t, "done.html", page)
	if err := h.Uploaded(e.Ctx, uploaded(done)); err != nil {
		t.Fatal(err)
	}
	before := e.load(t, done.FileID)
	if before.Status != kb.StatusParsed {
		t.Fatalf("first delivery left %s, want parsed", before.Status)
	}
	if err := h.Uploaded(e.Ctx, uploaded(done)); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	if after := e.load(t, done.FileID); !after.UpdatedAt.Equal(before.UpdatedAt) || after.Status != kb.StatusParsed {
		t.Errorf("second delivery changed the file: %s at %v → %s at %v", before.Status, before.UpdatedAt, after.Status, after.UpdatedAt)
	}
	e.wantEvents(t, done.FileID, events.TypeDocumentUploaded, events.TypeDocumentParsed)

	// Another worker claimed this one a moment ago and is still parsing it.
	held := e.upload(t, "held.html", page+"<p>held</p>")
	e.exec(t, `UPDATE knowledge_files SET status = 'parsing', stage_started_at = clock_timestamp(), stage_attempts = 1
		WHERE file_id = $1`, held.FileID)
	before = e.load(t, held.FileID)
	if err := h.Uploaded(e.Ctx, uploaded(held)); err != nil {
		t.Fatalf("delivery of a held file: %v", err)
	}
	after := e.load(t, held.FileID)
	if after.Status != kb.StatusParsing || after.StageAttempts != 1 || !after.StageStartedAt.Equal(*before.StageStartedAt) {
		t.Errorf("delivery took a live stage: %s/%d → %s/%d", before.Status, before.StageAttempts, after.Status, after.StageAttempts)
	}
	if _, ok := e.object(t, kb.MarkdownKey(held.KBID, held.FileID)); ok {
		t.Error("delivery of a held file parsed it anyway")
	}
	e.wantEvents(t, held.FileID, events.TypeDocumentUploaded)
}

// Bad input — a file whose content is not what its name says, an empty
// file — ends in error_parsing with the parser's message, and the delivery
// is acknowledged (nil: the function is not retried). A later delivery
// leaves the failed file alone.
func TestUploadedBadInputEndsErrorParsingAndIsAcknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.handler(parsedoc.Config{})
	for _, c := range []struct{ name, content string }{
		{"report.pdf", "this is plain text, not a PDF"},
		{"empty.md", ""},
	} {
		f := e.upload(t, c.name, c.content)
		_, perr := e.parser.Parse(e.Ctx, c.name, strings.NewReader(c.content), int64(len(c.content)))
		fe, ok := failure.As(perr)
		if !ok || !kb.Permanent(perr) {
			t.Fatalf("%s: the parser's error %v is not a permanent coded failure; pick other bad input", c.name, perr)
		}

		if err := h.Uploaded(e.Ctx, uploaded(f)); err != nil {
			t.Fatalf("%s: Uploaded = %v, want nil (acknowledged, not retried)", c.name, err)
		}
		got := e.load(t, f.FileID)
		if got.Status != kb.StatusErrorParsing || got.ErrorMessage == nil || *got.ErrorMessage != fe.Message {
			t.Fatalf("%s: file = %s, error %v; want error_parsing, %q", c.name, got.Status, got.ErrorMessage, fe.Message)
		}
		if got.StageAttempts != 1 || got.MarkdownKey != nil {
			t.Errorf("%s: attempts %d, markdown %v; want one attempt and no Markdown", c.name, got.StageAttempts, got.MarkdownKey)
		}
		if err := h.Uploaded(e.Ctx, uploaded(f)); err != nil {
			t.Fatalf("%s: redelivery: %v", c.name, err)
		}
		if again := e.load(t, f.FileID); again.Status != kb.StatusErrorParsing || again.StageAttempts != 1 {
			t.Errorf("%s: redelivery parsed a failed file again: %s/%d", c.name, again.Status, again.StageAttempts)
		}
		e.wantEvents(t, f.FileID, events.TypeDocumentUploaded)
	}
}

// A passing fault (the stored original unreadable for a moment) releases
// the stage and returns the error, so that the event is delivered again;
// after MaxAttempts the file ends in error_parsing and the delivery is
// acknowledged.
func TestUploadedPassingFaultIsRetriedThenGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := parsedoc.New(e.KBs, e.Outbox, failingGets{e.Objs}, nil, e.parser, e.Keyword, e.Vectors, nil, parsedoc.Config{MaxAttempts: 2}, e.Log)
	f := e.upload(t, "flaky.html", page)

	if err := h.Uploaded(e.Ctx, uploaded(f)); !errors.Is(err, errStoreDown) {
		t.Fatalf("first attempt = %v, want the fault returned for redelivery", err)
	}
	if got := e.load(t, f.FileID); got.Status != kb.StatusUploaded || got.StageAttempts != 1 || got.StageStartedAt != nil {
		t.Fatalf("after a passing fault the file is %s/%d (stage %v); want uploaded/1, released", got.Status, got.StageAttempts, got.StageStartedAt)
	}
	if err := h.Uploaded(e.Ctx, uploaded(f)); err != nil {
		t.Fatalf("last attempt = %v, want nil (acknowledged)", err)
	}
	got := e.load(t, f.FileID)
	if got.Status != kb.StatusErrorParsing || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, errStoreDown.Error()) {
		t.Fatalf("after the last attempt the file is %s, error %v; want error_parsing with the fault", got.Status, got.ErrorMessage)
	}
	e.wantEvents(t, f.FileID, events.TypeDocumentUploaded)
}

// A parsing stage whose worker died (older than the lease) is taken over by
// the next delivery and finished.
func TestUploadedTakesOverAStaleStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.upload(t, "stale.html", page)
	e.exec(t, `UPDATE knowledge_files SET status = 'parsing', stage_started_at = clock_timestamp() - interval '1 hour',
		stage_attempts = 1 WHERE file_id = $1`, f.FileID)

	var claimed kb.File
	h := e.handler(parsedoc.Config{Lease: time.Minute, Crash: func(point string) {
		if point == "parse.claimed" {
			claimed = e.load(t, f.FileID)
		}
	}})
	if err := h.Uploaded(e.Ctx, uploaded(f)); err != nil {
		t.Fatal(err)
	}
	if claimed.Status != kb.StatusParsing || claimed.StageAttempts != 2 {
		t.Fatalf("the stale stage was not reclaimed: %s/%d at the claim, want parsing/2", claimed.Status, claimed.StageAttempts)
	}
	if got := e.load(t, f.FileID); got.Status != kb.StatusParsed {
		t.Fatalf("file = %s, want parsed", got.Status)
	}
	if _, ok := e.object(t, kb.MarkdownKey(f.KBID, f.FileID)); !ok {
		t.Error("no Markdown stored")
	}
	e.wantEvents(t, f.FileID, events.TypeDocumentUploaded, events.TypeDocumentParsed)
}

// A file deleted while it is being parsed: the commit finds it gone, and the
// handler deletes the Markdown it had just written (the deletion could not
// know of it) and emits nothing.
func TestUploadedFileDeletedMidStageIsCleanedUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.upload(t, "doomed.html", page)
	key := kb.MarkdownKey(f.KBID, f.FileID)
	var written bool
	h := e.handler(parsedoc.Config{Crash: func(point string) {
		if point != "parse.before_commit" {
			return
		}
		_, written = e.object(t, key)
		if _, err := e.Lib.RemoveFiles(e.Ctx, admin, f.KBID, []string{f.FileID}); err != nil {
			t.Errorf("delete the file mid-stage: %v", err)
		}
	}})
	if err := h.Uploaded(e.Ctx, uploaded(f)); err != nil {
		t.Fatalf("Uploaded = %v, want nil", err)
	}
	if !written {
		t.Fatal("the stage had not written its Markdown when the file was deleted")
	}
	if _, err := e.KBs.LoadFile(e.Ctx, f.FileID); !errors.Is(err, kb.ErrFileNotFound) {
		t.Fatalf("file after deletion: %v", err)
	}
	if _, ok := e.object(t, key); ok {
		t.Errorf("the Markdown of the deleted file is still stored at %s", key)
	}
	if n := e.count(t, `SELECT count(*) FROM knowledge_images WHERE file_id = $1`, f.FileID); n != 0 {
		t.Errorf("%d image rows of the deleted file", n)
	}
	e.wantEvents(t, f.FileID, events.TypeDocumentUploaded)
}

// A KB deleted (and purged) while one of its files is being parsed: the
// stage's objects would outlive the purge, so the handler owes the KB's
// purge again, and the sweep's purge leaves nothing under its prefix.
func TestUploadedKBDeletedMidStageOwesItsPurge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.upload(t, "orphan.html", page)
	h := e.handler(parsedoc.Config{Crash: func(point string) {
		if point == "parse.before_commit" {
			if _, err := e.Lib.DeleteKB(e.Ctx, admin, f.KBID); err != nil {
				t.Errorf("delete the KB mid-stage: %v", err)
			}
			// Parsing writes after the purge (images of a slow parse).
			if _, err := e.Objs.Put(e.Ctx, kb.ImageKey(f.KBID, f.FileID, 1, "late.png"), strings.NewReader("png"), 3, "image/png"); err != nil {
				t.Error(err)
			}
		}
	}})
	owed := func() int {
		return e.count(t, `SELECT count(*) FROM knowledge_base_purges WHERE kb_id = $1`, f.KBID)
	}
	if err := h.Uploaded(e.Ctx, uploaded(f)); err != nil {
		t.Fatalf("Uploaded = %v, want nil", err)
	}
	if owed() != 1 {
		t.Fatalf("the purge of the deleted KB is not owed again after the stage lost its file")
	}
	if _, err := e.KBs.PurgeDeleted(e.Ctx, e.Vectors, e.Objs, f.KBID); err != nil {
		t.Fatal(err)
	}
	if list, err := e.Objs.List(e.Ctx, kb.ObjectPrefix(f.KBID)); err != nil || len(list) != 0 {
		t.Errorf("objects left under the deleted KB: %v, %v", list, err)
	}
	if owed() != 0 {
		t.Error("the purge is still owed after it ran")
	}
}
