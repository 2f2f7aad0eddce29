package kb_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

func supported(name string) bool { return !strings.HasSuffix(name, ".exe") }

// apply runs ApplyChange in its own transaction.
func (e *env) apply(t *testing.T, ch events.BucketObjectChanged) ([]kb.ChangeOutcome, []kb.Removed) {
	t.Helper()
	var out []kb.ChangeOutcome
	var rm []kb.Removed
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		out, rm, err = e.store.ApplyChangeTx(e.ctx, tx, emit, e.kw, ch, supported)
		return err
	})
	return out, rm
}

func actions(out []kb.ChangeOutcome) []string {
	var s []string
	for _, o := range out {
		s = append(s, o.KBID+":"+o.Action)
	}
	slices.Sort(s)
	return s
}

func testSources(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	src, err := e.store.AddSource(e.ctx, owner, k.KBID, "s3", "docs", "/team/")
	if err != nil || src.Prefix != "team/" || src.Bucket != "docs" || src.CreatedBy != "owner" {
		t.Fatalf("AddSource = %+v, %v", src, err)
	}
	again, err := e.store.AddSource(e.ctx, superadmin(), k.KBID, "s3", "docs", "team/")
	if err != nil || again.ID != src.ID || again.CreatedBy != "owner" {
		t.Fatalf("binding the same prefix twice = %+v, %v", again, err)
	}
	for _, c := range []struct{ provider, bucket, prefix string }{
		{"azure", "docs", ""}, {"s3", "", ""}, {"s3", "a/b", ""}, {"s3", "a b", ""}, {"gcs", "docs", "../up"},
	} {
		_, err := e.store.AddSource(e.ctx, owner, k.KBID, c.provider, c.bucket, c.prefix)
		wantCode(t, err, failure.KindUnprocessable, "invalid_source")
	}
	list, err := e.store.Sources(e.ctx, owner, k.KBID)
	if err != nil || len(list) != 1 {
		t.Fatalf("Sources = %+v, %v", list, err)
	}
	wantCode(t, e.store.RemoveSource(e.ctx, owner, k.KBID, src.ID+100), failure.KindNotFound, "source_not_found")
	if err := e.store.RemoveSource(e.ctx, owner, k.KBID, src.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.store.Sources(e.ctx, owner, k.KBID); len(list) != 0 {
		t.Fatalf("after remove: %+v", list)
	}

	uri := kb.SourceURI("gcs", "b", "dir/a file.pdf")
	p, b, key, err := kb.ParseSourceURI(uri)
	if err != nil || p != "gcs" || b != "b" || key != "dir/a file.pdf" {
		t.Fatalf("ParseSourceURI(%q) = %s %s %s, %v", uri, p, b, key, err)
	}
	for _, bad := range []string{"s3:/b/k", "s3://b", "s3:///k", "s3://b/"} {
		if _, _, _, err := kb.ParseSourceURI(bad); err == nil {
			t.Errorf("ParseSourceURI(%q) accepted", bad)
		}
	}
}

// TestApplyChange: objects created under a bound prefix become files (one
// uploaded event each, however often the notification is delivered), a new
// version re-parses, deletions remove the file; everything else is ignored.
func testApplyChange(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	other := e.createKB(t, kb.CreateInput{})
	for _, s := range []struct{ kb, prefix string }{{k.KBID, "team/"}, {k.KBID, "team/sub/"}, {other.KBID, ""}} {
		if _, err := e.store.AddSource(e.ctx, owner, s.kb, "s3", "apply-docs", s.prefix); err != nil {
			t.Fatal(err)
		}
	}
	// These bindings are proved (VerifySource, tested end to end in
	// tests/e2e/probe_bucket_test.go); a third, unproved one gets nothing.
	if _, err := e.pool.Exec(e.ctx, `UPDATE knowledge_sources SET verified_at = now() WHERE bucket = 'apply-docs'`); err != nil {
		t.Fatal(err)
	}
	unproved := e.createKB(t, kb.CreateInput{})
	if _, err := e.store.AddSource(e.ctx, owner, unproved.KBID, "s3", "apply-docs", "team/"); err != nil {
		t.Fatal(err)
	}
	created := events.BucketObjectChanged{Provider: "s3", Bucket: "apply-docs", Key: "team/sub/Guide.md", Size: 42, ETag: "e1", Op: "created"}

	out, _ := e.apply(t, created)
	if got := actions(out); !slices.Equal(got, sorted([]string{k.KBID + ":added", other.KBID + ":added"})) {
		t.Fatalf("first notification: %v (two prefixes of one KB must make one file)", got)
	}
	files := map[string]string{}
	for _, o := range out {
		files[o.KBID] = o.FileID
	}
	f := e.load(t, files[k.KBID])
	if f.Status != kb.StatusUploaded || f.Source != "bucket" || f.SourceURI == nil || *f.SourceURI != "s3://apply-docs/team/sub/Guide.md" ||
		f.Filename != "guide.md" || f.SourceVersion == nil || *f.SourceVersion != "e1" || *f.CreatedBy != "owner" || !f.Processing().AutoIndex {
		t.Fatalf("bucket file = %+v", f)
	}

	// Redelivery, sequential and concurrent: nothing new.
	out, _ = e.apply(t, created)
	if got := actions(out); !slices.Equal(got, sorted([]string{k.KBID + ":unchanged", other.KBID + ":unchanged"})) {
		t.Fatalf("redelivery: %v", got)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, emit outbox.Emit) error {
				_, _, err := e.store.ApplyChangeTx(e.ctx, tx, emit, e.kw, created, supported)
				return err
			})
		})
	}
	wg.Wait()
	for kbID, id := range files {
		if got := e.events(t, id); !slices.Equal(got, []string{events.TypeDocumentUploaded}) {
			t.Fatalf("events of %s's file: %v, want one upload", kbID, got)
		}
		if fs, total, _ := e.store.ListFiles(e.ctx, kbID, kb.ListInput{}); total != 1 || fs[0].FileID != id {
			t.Fatalf("files of %s: %d", kbID, total)
		}
	}

	// Concurrent first deliveries of a new object make one file too.
	fresh := events.BucketObjectChanged{Provider: "s3", Bucket: "apply-docs", Key: "team/race.md", ETag: "r1", Op: "created"}
	results := make([][]kb.ChangeOutcome, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			errs[i] = e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, emit outbox.Emit) error {
				var err error
				results[i], _, err = e.store.ApplyChangeTx(e.ctx, tx, emit, e.kw, fresh, supported)
				return err
			})
		})
	}
	wg.Wait()
	added := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent delivery %d: %v", i, err)
		}
		if results[i][0].Action == "added" {
			added++
		}
	}
	if added != 1 {
		t.Fatalf("concurrent deliveries added %d files: %v", added, results)
	}

	// A new version sends the (parsed) file back to be parsed, once.
	e.parse(t, f.FileID)
	v2 := created
	v2.ETag, v2.Size = "e2", 50
	out, _ = e.apply(t, v2)
	out, _ = e.apply(t, v2)
	if got := actions(out); !slices.Equal(got, sorted([]string{k.KBID + ":unchanged", other.KBID + ":unchanged"})) {
		t.Fatalf("new version redelivered: %v", got)
	}
	f = e.load(t, f.FileID)
	if f.Status != kb.StatusUploaded || *f.SourceVersion != "e2" || *f.FileSize != 50 || f.StageAttempts != 0 {
		t.Fatalf("after a new version: %+v", f)
	}
	if got := e.events(t, f.FileID); !slices.Equal(got, []string{events.TypeDocumentUploaded, events.TypeDocumentParsed, events.TypeDocumentUploaded}) {
		t.Fatalf("events after a new version: %v", got)
	}
	// The object version wins over the etag when both are given.
	v3 := v2
	v3.Version = "gen-3"
	if out, _ := e.apply(t, v3); out[0].Action != "updated" || *e.load(t, f.FileID).SourceVersion != "gen-3" {
		t.Fatalf("versioned change: %v", actions(out))
	}

	// Outside every prefix, another bucket or provider, unsupported types: ignored.
	for _, ch := range []events.BucketObjectChanged{
		{Provider: "s3", Bucket: "other", Key: "team/x.md", ETag: "1", Op: "created"},
		{Provider: "gcs", Bucket: "apply-docs", Key: "team/x.md", ETag: "1", Op: "created"},
	} {
		if out, _ := e.apply(t, ch); len(out) != 0 {
			t.Fatalf("%+v: %v", ch, actions(out))
		}
	}
	out, _ = e.apply(t, events.BucketObjectChanged{Provider: "s3", Bucket: "apply-docs", Key: "elsewhere/x.md", ETag: "1", Op: "created"})
	if got := actions(out); !slices.Equal(got, []string{other.KBID + ":added"}) {
		t.Fatalf("outside the team/ prefix: %v", got)
	}
	out, _ = e.apply(t, events.BucketObjectChanged{Provider: "s3", Bucket: "apply-docs", Key: "team/tool.exe", ETag: "1", Op: "created"})
	if len(out) != 2 || out[0].Action != "ignored" || out[0].Reason != "unsupported file type" || out[1].Action != "ignored" {
		t.Fatalf("unsupported type: %+v", out)
	}

	// Deletion removes the file (chunks, keyword postings, owed vectors).
	e.restage(t, k.KBID, f.FileID, kb.StatusUploaded)
	e.parse(t, f.FileID)
	cs, _ := e.index(t, f.FileID, "bucket words")
	out, rm := e.apply(t, events.BucketObjectChanged{Provider: "s3", Bucket: "apply-docs", Key: "team/sub/Guide.md", Op: "deleted"})
	if got := actions(out); !slices.Equal(got, sorted([]string{k.KBID + ":deleted", other.KBID + ":deleted"})) {
		t.Fatalf("deletion: %v", got)
	}
	if len(rm) != 2 {
		t.Fatalf("removed = %+v", rm)
	}
	for _, r := range rm {
		for _, key := range r.ObjectKeys {
			if strings.HasPrefix(key, "s3://") {
				t.Fatalf("deletion asks to delete the bucket object itself: %v", r.ObjectKeys)
			}
		}
	}
	if _, err := e.store.LoadFile(e.ctx, f.FileID); err != kb.ErrFileNotFound {
		t.Fatalf("file after deletion: %v", err)
	}
	if ids := e.keywordIDs(t, k.KBID, "bucket"); len(ids) != 0 {
		t.Fatalf("keyword hits after deletion: %v", ids)
	}
	if got := e.owedDeletes(t, k.KBID); !slices.Equal(got, chunkIDs(cs)) {
		t.Fatalf("owed vector deletes = %v", got)
	}
	out, _ = e.apply(t, events.BucketObjectChanged{Provider: "s3", Bucket: "apply-docs", Key: "team/sub/Guide.md", Op: "deleted"})
	if len(out) != 2 || out[0].Action != "ignored" || out[0].Reason != "not ingested" {
		t.Fatalf("second deletion: %+v", out)
	}
	// Re-creating the object after its deletion ingests it afresh.
	out, _ = e.apply(t, created)
	if got := actions(out); !slices.Equal(got, sorted([]string{k.KBID + ":added", other.KBID + ":added"})) || out[0].FileID == f.FileID {
		t.Fatalf("re-created object: %+v", out)
	}
}
