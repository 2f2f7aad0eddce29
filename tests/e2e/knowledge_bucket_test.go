package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Bucket-triggered ingestion: a customer's bucket (an S3-protocol server in
// the test) is bound to a knowledge base; notifications in each real format
// make its objects files of the KB, re-ingest overwritten objects and remove
// deleted ones. The platform reads the objects from the bucket itself.

const bucketSettle = 20 * time.Second

type bucketKB struct {
	t    *testing.T
	p    *testkit.Local
	c    *testkit.Client
	kbID string
}

func newBucketKB(t *testing.T, p *testkit.Local, s3 *testkit.FakeS3, name, provider, bucket, prefix string) bucketKB {
	t.Helper()
	c := p.Admin
	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": name, "description": "bound to " + bucket})["kb_id"].(string)
	src := c.BindSource(s3, kbID, provider, bucket, prefix)
	if src["kb_id"] != kbID || src["provider"] != provider || src["bucket"] != bucket || src["prefix"] != prefix {
		t.Fatalf("source binding = %v", src)
	}
	return bucketKB{t: t, p: p, c: c, kbID: kbID}
}

// files returns the KB's files by source URI.
func (k bucketKB) files() map[string]map[string]any {
	k.t.Helper()
	out := map[string]map[string]any{}
	for _, f := range k.c.KBFiles(k.kbID) {
		uri, _ := f["source_uri"].(string)
		if _, dup := out[uri]; dup {
			k.t.Fatalf("two files of %s come from %q", k.kbID, uri)
		}
		out[uri] = f
	}
	return out
}

// indexed returns the file ingested from uri, which must be indexed.
func (k bucketKB) indexed(uri string) map[string]any {
	k.t.Helper()
	f, ok := k.files()[uri]
	if !ok {
		k.t.Fatalf("no file of %s comes from %s; files: %v", k.kbID, uri, k.files())
	}
	if f["status"] != "indexed" || f["source"] != "bucket" || f["chunk_count"].(float64) < 1 {
		k.t.Fatalf("file from %s: %v", uri, f)
	}
	return f
}

// hits returns the contents of the query's keyword hits in fileID.
func (k bucketKB) hits(query, fileID string) []string {
	k.t.Helper()
	var out []string
	for _, h := range k.c.QueryKB(k.kbID, query, "keyword") {
		if h["file_id"] == fileID {
			out = append(out, h["content"].(string))
		}
	}
	return out
}

func bucketPut(t *testing.T, s blob.Store, key, content string) blob.Info {
	t.Helper()
	info, err := s.Put(t.Context(), key, strings.NewReader(content), int64(len(content)), "")
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func bucketNotify(t *testing.T, p *testkit.Local, body []byte, header ...string) {
	t.Helper()
	if len(header) == 0 {
		header = []string{"Authorization", "Bearer " + testkit.NotifyToken}
	}
	r := p.Admin.Notify(body, header...)
	if r.Status != http.StatusAccepted || r.JSON()["accepted"] != float64(1) {
		t.Fatalf("notification: %d %s", r.Status, r.Body)
	}
	testkit.WaitKnowledgeSettled(t, p.P.App.Pool, bucketSettle)
}

func bucketFileGone(t *testing.T, k bucketKB, fileID, query string) {
	t.Helper()
	if r := k.c.Do("GET", "/api/knowledge/databases/"+k.kbID+"/documents/"+fileID+"/basic", nil); r.Status != http.StatusNotFound {
		t.Errorf("deleted file %s: GET basic %d %s", fileID, r.Status, r.Body)
	}
	if h := k.hits(query, fileID); len(h) != 0 {
		t.Errorf("deleted file %s is still found: %q", fileID, h)
	}
	if tr := testkit.KnowledgeFileTraces(t, k.p.P.App.Pool, fileID); tr != (testkit.FileTraces{}) {
		t.Errorf("deleted file %s left %+v", fileID, tr)
	}
}

func TestKnowledgeBucketS3Notifications(t *testing.T) {
	t.Parallel()
	s3 := testkit.NewFakeS3(t)
	p := testkit.StartLocal(t, s3.SourceEnv())
	drop, unbound := s3.Bucket(t, "acme-drop"), s3.Bucket(t, "acme-unbound")
	hb := newBucketKB(t, p, s3, "handbook", "s3", "acme-drop", "handbook/")
	notes := newBucketKB(t, p, s3, "notes", "s3", "acme-drop", "notes/")
	pool := p.P.App.Pool

	// S3 event records: the key is form-encoded ("+" for spaces).
	const key1 = "handbook/Team Handbook (2025).md"
	v1 := bucketPut(t, drop, key1, "# Vacation\n\nEvery employee gets 27 vacation days. Unused days carryover until March.\n")
	created1 := testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-drop", Key: key1, Size: v1.Size, ETag: v1.ETag, Sequencer: "0A01"})
	if !strings.Contains(string(created1), `"handbook/Team+Handbook+%282025%29.md"`) {
		t.Fatalf("the record does not encode the key as S3 does: %s", created1)
	}
	before := s3.Requests()
	bucketNotify(t, p, created1)
	if s3.Requests() == before {
		t.Error("the platform ingested an object without reading the bucket")
	}
	f1 := hb.indexed("s3://acme-drop/" + key1)
	id1 := f1["file_id"].(string)
	if f1["original_filename"] != "Team Handbook (2025).md" || f1["file_size"] != float64(v1.Size) {
		t.Errorf("file from the bucket: %v", f1)
	}
	if h := hb.hits("vacation days", id1); len(h) == 0 || !strings.Contains(h[0], "27 vacation days") {
		t.Fatalf("the ingested object is not searchable: %q", h)
	}

	// The same notification again, and the same change told by EventBridge
	// too, change nothing: no second file, no re-parse.
	bucketNotify(t, p, created1)
	bucketNotify(t, p, testkit.EventBridgeObjectEvent(t, "Object Created", "eb-created-0", testkit.ObjectEvent{Bucket: "acme-drop", Key: key1, Size: v1.Size, ETag: v1.ETag, Sequencer: "0A01"}))
	if f := hb.indexed("s3://acme-drop/" + key1); f["file_id"] != id1 || f["stage_attempts"] != f1["stage_attempts"] || len(hb.files()) != 1 {
		t.Errorf("redelivery: %v (was %v), %d files", f, f1, len(hb.files()))
	}

	// Outdated notifications — a deletion of an object that is still there, a
	// creation of one that is gone — are checked against the bucket and
	// change nothing.
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectRemoved:Delete", testkit.ObjectEvent{Bucket: "acme-drop", Key: key1, Sequencer: "0A00"}))
	if f := hb.indexed("s3://acme-drop/" + key1); f["file_id"] != id1 {
		t.Errorf("an outdated deletion removed the file: %v", f)
	}
	if h := hb.hits("vacation days", id1); len(h) == 0 {
		t.Error("an outdated deletion emptied the index")
	}
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-drop", Key: "handbook/ghost.md", Size: 10, ETag: `"0123"`, Sequencer: "0A09"}))
	if got := hb.files(); len(got) != 1 {
		t.Errorf("a creation of a missing object added a file: %v", got)
	}

	// Outside the prefix: another KB's prefix takes it, the handbook does
	// not. An unbound bucket's object goes nowhere.
	vo := bucketPut(t, drop, "notes/outside.md", "Standup notes: the outside contractor starts Monday.\n")
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-drop", Key: "notes/outside.md", Size: vo.Size, ETag: vo.ETag, Sequencer: "0A02"}))
	vu := bucketPut(t, unbound, "handbook/stray.md", "A stray document nobody bound.\n")
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-unbound", Key: "handbook/stray.md", Size: vu.Size, ETag: vu.ETag, Sequencer: "0A03"}))
	notes.indexed("s3://acme-drop/notes/outside.md")
	if got := hb.files(); len(got) != 1 {
		t.Errorf("the handbook KB took objects outside its binding: %v", got)
	}
	var unboundFiles int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM knowledge_files WHERE source_uri LIKE 's3://acme-unbound/%'`).Scan(&unboundFiles); err != nil || unboundFiles != 0 {
		t.Errorf("files from the unbound bucket: %d (%v)", unboundFiles, err)
	}

	// EventBridge "Object Created".
	const key2 = "handbook/Expense Policy.txt"
	v2 := bucketPut(t, drop, key2, "Meals abroad are reimbursed up to 60 euros per day.\n")
	bucketNotify(t, p, testkit.EventBridgeObjectEvent(t, "Object Created", "eb-created-1", testkit.ObjectEvent{Bucket: "acme-drop", Key: key2, Size: v2.Size, ETag: v2.ETag, Sequencer: "0B01"}))
	id2 := hb.indexed("s3://acme-drop/" + key2)["file_id"].(string)
	if h := hb.hits("reimbursed euros", id2); len(h) == 0 {
		t.Error("the EventBridge-notified object is not searchable")
	}

	// A MinIO webhook ("/" encoded as %2F), authenticated with the other header.
	const key3 = "handbook/travel/flights #1.md"
	v3 := bucketPut(t, drop, key3, "Book flights through the travel desk two weeks ahead.\n")
	bucketNotify(t, p, testkit.MinIOWebhook(t, "s3:ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-drop", Key: key3, Size: v3.Size, ETag: v3.ETag, Sequencer: "0C01"}),
		"X-Yuxi-Notify-Token", testkit.NotifyToken)
	id3 := hb.indexed("s3://acme-drop/" + key3)["file_id"].(string)
	if h := hb.hits("travel desk flights", id3); len(h) == 0 {
		t.Error("the MinIO-notified object is not searchable")
	}

	// Overwritten (new ETag): the same file is parsed and indexed again, the
	// new content replaces the old.
	v1b := bucketPut(t, drop, key1, "# Vacation\n\nEvery employee gets 30 vacation days and a sabbatical after five years.\n")
	if v1b.ETag == v1.ETag {
		t.Fatal("the overwrite kept the ETag")
	}
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-drop", Key: key1, Size: v1b.Size, ETag: v1b.ETag, Sequencer: "0A04"}))
	f1b := hb.indexed("s3://acme-drop/" + key1)
	if f1b["file_id"] != id1 || f1b["file_size"] != float64(v1b.Size) || len(hb.files()) != 3 {
		t.Errorf("after the overwrite: %v; files %v", f1b, hb.files())
	}
	if h := hb.hits("sabbatical", id1); len(h) != 1 || !strings.Contains(h[0], "30 vacation days") {
		t.Errorf("new content not found: %q", h)
	}
	if h := hb.hits("carryover", id1); len(h) != 0 {
		t.Errorf("old content still found: %q", h)
	}
	if tr := testkit.KnowledgeFileTraces(t, pool, id1); tr.Chunks != int(f1b["chunk_count"].(float64)) || tr.Vectors != tr.Chunks || tr.KeywordDocs != tr.Chunks {
		t.Errorf("after the overwrite the index holds %+v for %v chunks", tr, f1b["chunk_count"])
	}

	// Deleted, in each format: the file, its chunks, vectors and keyword
	// entries go.
	if err := drop.Delete(t.Context(), key1); err != nil {
		t.Fatal(err)
	}
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectRemoved:Delete", testkit.ObjectEvent{Bucket: "acme-drop", Key: key1, Sequencer: "0A05"}))
	bucketFileGone(t, hb, id1, "sabbatical")
	if err := drop.Delete(t.Context(), key2); err != nil {
		t.Fatal(err)
	}
	bucketNotify(t, p, testkit.EventBridgeObjectEvent(t, "Object Deleted", "eb-deleted-1", testkit.ObjectEvent{Bucket: "acme-drop", Key: key2, Sequencer: "0B02"}))
	bucketFileGone(t, hb, id2, "reimbursed euros")
	if err := drop.Delete(t.Context(), key3); err != nil {
		t.Fatal(err)
	}
	bucketNotify(t, p, testkit.MinIOWebhook(t, "s3:ObjectRemoved:Delete", testkit.ObjectEvent{Bucket: "acme-drop", Key: key3, Sequencer: "0C02"}))
	bucketFileGone(t, hb, id3, "travel desk flights")
	if got := hb.files(); len(got) != 0 {
		t.Errorf("files left after the deletions: %v", got)
	}
	notes.indexed("s3://acme-drop/notes/outside.md")

	// Put back with the same content (same ETag as before the deletion): a new
	// event of the same object version is ingested again.
	v1c := bucketPut(t, drop, key1, "# Vacation\n\nEvery employee gets 30 vacation days and a sabbatical after five years.\n")
	if v1c.ETag != v1b.ETag {
		t.Fatalf("same content, ETag %s then %s", v1b.ETag, v1c.ETag)
	}
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-drop", Key: key1, Size: v1c.Size, ETag: v1c.ETag, Sequencer: "0A06"}))
	if h := hb.hits("sabbatical", hb.indexed("s3://acme-drop/" + key1)["file_id"].(string)); len(h) != 1 {
		t.Errorf("the re-created object is not searchable: %q", h)
	}
}

func TestKnowledgeBucketNotificationsAreAuthenticatedAndValidated(t *testing.T) {
	t.Parallel()
	s3 := testkit.NewFakeS3(t)
	p := testkit.StartLocal(t, s3.SourceEnv())
	drop := s3.Bucket(t, "acme-drop")
	hb := newBucketKB(t, p, s3, "handbook", "s3", "acme-drop", "")
	v := bucketPut(t, drop, "policy.md", "The policy.\n")
	valid := testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-drop", Key: "policy.md", Size: v.Size, ETag: v.ETag, Sequencer: "01"})

	for name, header := range map[string][]string{
		"no token":            nil,
		"wrong bearer":        {"Authorization", "Bearer " + strings.Repeat("x", len(testkit.NotifyToken))},
		"token prefix":        {"Authorization", "Bearer " + testkit.NotifyToken[:32]},
		"wrong header token":  {"X-Yuxi-Notify-Token", "nope"},
		"basic auth":          {"Authorization", "Basic " + testkit.NotifyToken},
		"user's bearer token": {"Authorization", "Bearer " + p.Admin.Token},
	} {
		r := p.Admin.Notify(valid, header...)
		if r.Status != http.StatusUnauthorized || r.Code() != "invalid_notify_token" {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	auth := []string{"Authorization", "Bearer " + testkit.NotifyToken}
	for name, body := range map[string]string{
		"garbage":        "this is not a notification",
		"unknown JSON":   `{"hello":"world"}`,
		"truncated JSON": string(valid[:len(valid)/2]),
		"bad key escape": strings.Replace(string(valid), `"policy.md"`, `"policy%zz.md"`, 1),
	} {
		r := p.Admin.Notify([]byte(body), auth...)
		if r.Status < 400 || r.Status > 499 || r.Code() != "invalid_notification" {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	// An SNS subscription confirmation is not confirmed (that takes a visit to
	// SubscribeURL after checking SNS's signature): it is refused as no
	// notification, and SNS retries it until someone confirms by hand.
	r := p.Admin.Notify(testkit.SNSSubscriptionConfirmation(t), auth...)
	if r.Status != http.StatusBadRequest || r.Code() != "invalid_notification" || !strings.Contains(string(r.Body), "subscription confirmation") {
		t.Errorf("SNS SubscriptionConfirmation: %d %s", r.Status, r.Body)
	}
	// The S3 test event that comes when a notification is configured is accepted and does nothing.
	r = p.Admin.Notify([]byte(`{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2025-03-14T09:00:00.000Z","Bucket":"acme-drop"}`), auth...)
	if r.Status != http.StatusAccepted || r.JSON()["accepted"] != float64(0) {
		t.Errorf("s3:TestEvent: %d %s", r.Status, r.Body)
	}
	testkit.WaitKnowledgeSettled(t, p.P.App.Pool, bucketSettle)
	if got := hb.files(); len(got) != 0 {
		t.Fatalf("refused notifications made files: %v", got)
	}
	// The valid one, with the token, works.
	bucketNotify(t, p, valid)
	hb.indexed("s3://acme-drop/policy.md")
}

func TestKnowledgeBucketGCSCloudEvents(t *testing.T) {
	t.Parallel()
	s3 := testkit.NewFakeS3(t) // Cloud Storage's S3-interoperable API (YUXI_SOURCE_GCS_ENDPOINT)
	p := testkit.StartLocal(t, s3.SourceEnv())
	bucket := s3.Bucket(t, "acme-gcs-drop")
	k := newBucketKB(t, p, s3, "research", "gcs", "acme-gcs-drop", "inbox/")
	docParse := testkit.FunctionEndpoint(t, p, "doc-parse")
	deliver := func(typ, id string, o testkit.ObjectEvent) {
		t.Helper()
		if st := testkit.SendCloudEvent(t, docParse, testkit.GCSObjectEvent(t, typ, id, o)); st != http.StatusOK {
			t.Fatalf("%s %s: status %d", typ, id, st)
		}
		testkit.WaitKnowledgeSettled(t, p.P.App.Pool, bucketSettle)
	}
	const (
		finalized = "google.cloud.storage.object.v1.finalized"
		deleted   = "google.cloud.storage.object.v1.deleted"
		key       = "inbox/研究 notes.md"
		uri       = "gcs://acme-gcs-drop/" + key
	)
	obj := func(gen string, info blob.Info) testkit.ObjectEvent {
		return testkit.ObjectEvent{Bucket: "acme-gcs-drop", Key: key, Size: info.Size, Generation: gen, MD5Base64: testkit.MD5Base64(t, info.ETag)}
	}

	v1 := bucketPut(t, bucket, key, "# Research notes\n\nThe glacier samples were taken at 4000 metres.\n")
	deliver(finalized, "9963614581593519", obj("1741944413589000", v1))
	f := k.indexed(uri)
	id := f["file_id"].(string)
	if h := k.hits("glacier samples", id); len(h) == 0 {
		t.Fatal("the finalized object is not searchable")
	}

	// Eventarc redelivers: nothing changes.
	deliver(finalized, "9963614581593519", obj("1741944413589000", v1))
	if g := k.indexed(uri); g["file_id"] != id || g["stage_attempts"] != f["stage_attempts"] || len(k.files()) != 1 {
		t.Errorf("redelivered finalized event: %v (was %v)", g, f)
	}

	// Overwritten: GCS sends finalized for the new generation, then deleted
	// for the overwritten one. The file stays, with the new content.
	v2 := bucketPut(t, bucket, key, "# Research notes\n\nThe moraine samples were taken at 4200 metres.\n")
	deliver(finalized, "9963614581600001", obj("1741944413590000", v2))
	deliver(deleted, "9963614581600002", obj("1741944413589000", v1))
	g := k.indexed(uri)
	if g["file_id"] != id {
		t.Errorf("after the overwrite the file is %v, was %s", g, id)
	}
	if h := k.hits("moraine samples", id); len(h) != 1 {
		t.Errorf("new generation not found: %q", h)
	}
	if h := k.hits("glacier", id); len(h) != 0 {
		t.Errorf("old generation still found: %q", h)
	}

	// The same kind of event also arrives through the webhook (a Pub/Sub push
	// or a structured CloudEvent posted by a relay).
	const key2 = "inbox/field log.txt"
	v3 := bucketPut(t, bucket, key2, "Day three: the weather station recorded minus twelve degrees.\n")
	ev := testkit.GCSObjectEvent(t, finalized, "9963614581600003", testkit.ObjectEvent{Bucket: "acme-gcs-drop", Key: key2, Size: v3.Size,
		Generation: "1741944413591000", MD5Base64: testkit.MD5Base64(t, v3.ETag)})
	structured, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	bucketNotify(t, p, structured)
	id2 := k.indexed("gcs://acme-gcs-drop/" + key2)["file_id"].(string)
	if h := k.hits("weather station", id2); len(h) == 0 {
		t.Error("the object notified through the webhook is not searchable")
	}

	// Deleted (the current generation): the file and its index entries go.
	if err := bucket.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	deliver(deleted, "9963614581600004", obj("1741944413590000", v2))
	bucketFileGone(t, k, id, "moraine samples")
	if got := k.files(); len(got) != 1 {
		t.Errorf("files after the deletion: %v", got)
	}
}
