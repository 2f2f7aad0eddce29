package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// NotifyToken is the bucket-notification token the knowledge tests configure
// (YUXI_NOTIFY_TOKEN, ≥ 32 bytes).
const NotifyToken = "test-notify-token-0123456789abcdef0123"

// Access keys the fake S3 server accepts. Each client of the server signs
// with its own key, so a request signed with another configuration's key (or
// not signed at all) is refused and the test notices.
const (
	FakeS3SourceKey = "AKIASOURCEBUCKETS" // YUXI_SOURCE_S3_ACCESS_KEY
	FakeGCSHMACKey  = "GOOG1EHMACKEYFORTESTS"
	FakeS3StoreKey  = "AKIAPLATFORMSTORE" // YUXI_S3_ACCESS_KEY
	FakeS3OwnerKey  = "AKIABUCKETOWNER"   // the test itself, writing objects as the customer
	fakeS3Secret    = "fake-s3-secret-key"
)

// FakeS3 is an in-memory S3-protocol server (gofakes3) on plain HTTP, as a
// customer's bucket service (S3, MinIO, Cloud Storage's S3-interoperable API)
// or as the platform's own object store.
//
// Over plain HTTP minio-go signs request bodies as aws-chunked streams;
// gofakes3 decodes them for PutObject but not for UploadPart, so the server
// decodes streaming bodies before gofakes3 sees them (as S3 and MinIO do).
// It also refuses requests that are not SigV4-signed with one of its keys.
type FakeS3 struct {
	Endpoint string // host:port
	Backend  *s3mem.Backend
	requests atomic.Int64
}

// NewFakeS3 starts a server that lives until t ends.
func NewFakeS3(t testing.TB) *FakeS3 {
	t.Helper()
	f := &FakeS3{Backend: s3mem.New()}
	s3 := gofakes3.New(f.Backend).Server()
	keys := map[string]bool{FakeS3SourceKey: true, FakeGCSHMACKey: true, FakeS3StoreKey: true, FakeS3OwnerKey: true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if !signedBy(r, keys) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code><Message>unknown or missing access key</Message></Error>`)
			return
		}
		if err := decodeAWSChunked(r); err != nil {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>IncompleteBody</Code><Message>%s</Message></Error>`, err)
			return
		}
		s3.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.Endpoint = strings.TrimPrefix(srv.URL, "http://")
	return f
}

// Requests counts the requests the server received.
func (f *FakeS3) Requests() int64 { return f.requests.Load() }

// signedBy reports whether r carries a SigV4 Authorization header with one of keys.
func signedBy(r *http.Request, keys map[string]bool) bool {
	auth := r.Header.Get("Authorization")
	_, rest, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return false
	}
	key, _, _ := strings.Cut(rest, "/")
	return keys[key]
}

// decodeAWSChunked replaces an aws-chunked body ("<hex size>;chunk-signature=…\r\n<data>\r\n"
// chunks, optionally followed by trailers) with the plain payload.
func decodeAWSChunked(r *http.Request) error {
	sha := r.Header.Get("X-Amz-Content-Sha256")
	if !strings.HasPrefix(sha, "STREAMING-") {
		return nil
	}
	br := bufio.NewReader(r.Body)
	var out bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("aws-chunked: chunk header: %v", err)
		}
		sizeHex, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ";")
		n, err := strconv.ParseInt(sizeHex, 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("aws-chunked: chunk size %q", sizeHex)
		}
		if n == 0 {
			break // trailers (checksums, their signature) follow; they are not checked here
		}
		if _, err := io.CopyN(&out, br, n); err != nil {
			return fmt.Errorf("aws-chunked: chunk data: %v", err)
		}
		if _, err := br.Discard(2); err != nil {
			return fmt.Errorf("aws-chunked: chunk end: %v", err)
		}
	}
	_ = r.Body.Close()
	if want := r.Header.Get("X-Amz-Decoded-Content-Length"); want != "" && want != strconv.Itoa(out.Len()) {
		return fmt.Errorf("aws-chunked: decoded %d bytes, header says %s", out.Len(), want)
	}
	r.Body = io.NopCloser(&out)
	r.ContentLength = int64(out.Len())
	r.Header.Set("Content-Length", strconv.Itoa(out.Len()))
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	r.Header.Del("X-Amz-Decoded-Content-Length")
	r.Header.Del("X-Amz-Trailer")
	r.Header.Del("Content-Encoding")
	return nil
}

// Bucket creates bucket (when missing) and returns a store over it, as the
// bucket's owner: the test writes and deletes objects through it.
func (f *FakeS3) Bucket(t testing.TB, bucket string) blob.Store {
	t.Helper()
	s, err := blob.NewS3(blob.S3Config{Endpoint: f.Endpoint, Region: "us-east-1", AccessKey: FakeS3OwnerKey, SecretKey: fakeS3Secret,
		Bucket: bucket, PathStyle: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SourceEnv points the platform's bucket readers (YUXI_SOURCE_S3_* and
// YUXI_SOURCE_GCS_*) at the server.
func (f *FakeS3) SourceEnv() Env {
	return Env{
		"YUXI_SOURCE_S3_ENDPOINT":    f.Endpoint,
		"YUXI_SOURCE_S3_REGION":      "us-east-1",
		"YUXI_SOURCE_S3_ACCESS_KEY":  FakeS3SourceKey,
		"YUXI_SOURCE_S3_SECRET_KEY":  fakeS3Secret,
		"YUXI_SOURCE_S3_SSL":         "false",
		"YUXI_SOURCE_GCS_ENDPOINT":   f.Endpoint,
		"YUXI_SOURCE_GCS_ACCESS_KEY": FakeGCSHMACKey,
		"YUXI_SOURCE_GCS_SECRET_KEY": fakeS3Secret,
		"YUXI_SOURCE_GCS_SSL":        "false",
		"YUXI_NOTIFY_TOKEN":          NotifyToken,
	}
}

// StoreEnv makes the server's bucket the platform's object store
// (YUXI_BLOB_URI=s3://bucket?endpoint=…), with partSize-byte multipart parts.
func (f *FakeS3) StoreEnv(bucket string, partSize int) Env {
	q := url.Values{"endpoint": {f.Endpoint}, "region": {"us-east-1"}, "ssl": {"false"}, "path_style": {"true"},
		"create_bucket": {"true"}, "part_size": {strconv.Itoa(partSize)}}
	return Env{
		"YUXI_BLOB_URI":      "s3://" + bucket + "?" + q.Encode(),
		"YUXI_S3_ACCESS_KEY": FakeS3StoreKey,
		"YUXI_S3_SECRET_KEY": fakeS3Secret,
	}
}

// ObjectEvent describes the object a test notification is about.
type ObjectEvent struct {
	Bucket    string
	Key       string // as stored; encoded the way each format encodes it
	Size      int64
	ETag      string // hex MD5 (S3 formats)
	Sequencer string // distinct per event of a key (S3 formats)
	// Generation, MD5Base64 (GCS)
	Generation string
	MD5Base64  string
}

func notifyFixture(t testing.TB, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(t), "shared", "blob", "notify", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return m
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// s3RecordKey encodes a key as S3 event records do: form-encoded, "/" kept.
func s3RecordKey(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.QueryEscape(p)
	}
	return strings.Join(parts, "/")
}

// S3EventRecords is an S3 event notification (the body S3 posts through
// SNS/SQS/Lambda, here posted directly) with one record of eventName
// ("ObjectCreated:Put", "ObjectRemoved:Delete", …), based on the AWS fixture
// s3_object_created_put.json. The bucket is unversioned: no versionId.
func S3EventRecords(t testing.TB, eventName string, o ObjectEvent) []byte {
	t.Helper()
	m := notifyFixture(t, "s3_object_created_put.json")
	rec := m["Records"].([]any)[0].(map[string]any)
	rec["eventName"] = eventName
	rec["eventTime"] = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	s3 := rec["s3"].(map[string]any)
	b := s3["bucket"].(map[string]any)
	b["name"], b["arn"] = o.Bucket, "arn:aws:s3:::"+o.Bucket
	obj := map[string]any{"key": s3RecordKey(o.Key), "sequencer": o.Sequencer}
	if strings.HasPrefix(eventName, "ObjectCreated:") {
		obj["size"], obj["eTag"] = o.Size, o.ETag
	}
	s3["object"] = obj
	return mustJSON(t, m)
}

// EventBridgeObjectEvent is an Amazon EventBridge S3 event ("Object Created"
// or "Object Deleted"), based on eventbridge_object_created.json.
func EventBridgeObjectEvent(t testing.TB, detailType, id string, o ObjectEvent) []byte {
	t.Helper()
	m := notifyFixture(t, "eventbridge_object_created.json")
	m["id"], m["detail-type"] = id, detailType
	m["time"] = time.Now().UTC().Format(time.RFC3339)
	m["resources"] = []any{"arn:aws:s3:::" + o.Bucket}
	d := m["detail"].(map[string]any)
	d["bucket"] = map[string]any{"name": o.Bucket}
	obj := map[string]any{"key": o.Key, "sequencer": o.Sequencer}
	if detailType == "Object Created" {
		obj["size"], obj["etag"] = o.Size, o.ETag
	} else {
		d["reason"], d["deletion-type"] = "DeleteObject", "Permanently Deleted"
	}
	d["object"] = obj
	return mustJSON(t, m)
}

// MinIOWebhook is what a MinIO webhook target posts for eventName
// ("s3:ObjectCreated:Put", "s3:ObjectRemoved:Delete"), based on
// minio_webhook_put.json: the top-level Key is "bucket/key", the record's key
// is fully form-encoded ("/" as %2F).
func MinIOWebhook(t testing.TB, eventName string, o ObjectEvent) []byte {
	t.Helper()
	m := notifyFixture(t, "minio_webhook_put.json")
	m["EventName"], m["Key"] = eventName, o.Bucket+"/"+o.Key
	rec := m["Records"].([]any)[0].(map[string]any)
	rec["eventName"] = eventName
	s3 := rec["s3"].(map[string]any)
	b := s3["bucket"].(map[string]any)
	b["name"], b["arn"] = o.Bucket, "arn:aws:s3:::"+o.Bucket
	obj := map[string]any{"key": url.QueryEscape(o.Key), "sequencer": o.Sequencer}
	if strings.Contains(eventName, "ObjectCreated:") {
		obj["size"], obj["eTag"], obj["contentType"] = o.Size, o.ETag, "text/markdown"
	}
	s3["object"] = obj
	return mustJSON(t, m)
}

// SNSSubscriptionConfirmation is the message SNS posts to a new HTTP(S)
// subscription (sns_subscription_confirmation.json).
func SNSSubscriptionConfirmation(t testing.TB) []byte {
	t.Helper()
	return mustJSON(t, notifyFixture(t, "sns_subscription_confirmation.json"))
}

// GCSObjectEvent is a Cloud Storage CloudEvent (typ
// google.cloud.storage.object.v1.finalized or .deleted) as Eventarc delivers
// it, based on gcs_cloudevent_finalized.json.
func GCSObjectEvent(t testing.TB, typ, id string, o ObjectEvent) cloudevents.Event {
	t.Helper()
	m := notifyFixture(t, "gcs_cloudevent_finalized.json")
	data := m["data"].(map[string]any)
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	data["bucket"], data["name"], data["generation"] = o.Bucket, o.Key, o.Generation
	data["id"] = o.Bucket + "/" + o.Key + "/" + o.Generation
	data["selfLink"] = "https://www.googleapis.com/storage/v1/b/" + o.Bucket + "/o/" + url.PathEscape(o.Key)
	data["mediaLink"] = "https://storage.googleapis.com/download/storage/v1/b/" + o.Bucket + "/o/" + url.PathEscape(o.Key) +
		"?generation=" + o.Generation + "&alt=media"
	data["size"], data["md5Hash"], data["updated"], data["timeCreated"] = strconv.FormatInt(o.Size, 10), o.MD5Base64, now, now
	data["etag"] = base64.StdEncoding.EncodeToString([]byte(o.Generation))
	if typ == "google.cloud.storage.object.v1.deleted" {
		data["timeDeleted"] = now
	}
	ev := cloudevents.NewEvent()
	ev.SetID(id)
	ev.SetSource("//storage.googleapis.com/projects/_/buckets/" + o.Bucket)
	ev.SetType(typ)
	ev.SetSubject("objects/" + o.Key)
	ev.SetTime(time.Now())
	if err := ev.SetData(cloudevents.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	return ev
}

// MD5Base64 converts a hex MD5 (an S3 ETag) to GCS's md5Hash form.
func MD5Base64(t testing.TB, hexMD5 string) string {
	t.Helper()
	b, err := hex.DecodeString(hexMD5)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Notify posts a bucket notification with the given header pairs (name,
// value, …), e.g. "Authorization", "Bearer "+NotifyToken.
func (c *Client) Notify(body []byte, header ...string) Response {
	c.T.Helper()
	req, err := http.NewRequest("POST", c.Base+"/api/knowledge/notifications", bytes.NewReader(body))
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http().Do(req)
	if err != nil {
		c.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// FunctionEndpoint serves the in-process platform's router of function name
// with the CloudEvents HTTP receiver the deployed function uses (Knative,
// Cloud Run), and returns its URL. The all-in-one runner has no events
// endpoint of its own: its functions receive events from the in-process bus.
func FunctionEndpoint(t testing.TB, p *Local, name string) string {
	t.Helper()
	for _, r := range p.P.Routers {
		if r.Name() == name {
			srv := httptest.NewServer(faas.NewHTTPReceiver(r))
			t.Cleanup(srv.Close)
			return srv.URL
		}
	}
	t.Fatalf("the platform has no %s router", name)
	return ""
}

// SendCloudEvent delivers ev to target in binary content mode and returns the
// HTTP status of the answer.
func SendCloudEvent(t testing.TB, target string, ev cloudevents.Event) int {
	t.Helper()
	client, err := cloudevents.NewClientHTTP(cloudevents.WithTarget(target))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := client.Send(binding.WithForceBinary(ctx), ev)
	var hr *cehttp.Result
	if cloudevents.ResultAs(res, &hr) {
		return hr.StatusCode
	}
	t.Fatalf("send %s: %v", ev.Type(), res)
	return 0
}

// WaitKnowledgeSettled waits until no event is left to publish and no file
// is between stages (uploaded, parsing, parsed with auto-index, indexing):
// then every notification accepted so far has had all its effects. It fails
// on recorded permanent event failures.
func WaitKnowledgeSettled(t testing.TB, pool *pgxpool.Pool, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		var pending, moving, failures int
		err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM outbox WHERE published_at IS NULL),
			(SELECT count(*) FROM knowledge_files WHERE NOT is_folder AND (status IN ('uploaded', 'parsing', 'indexing')
				OR (status = 'parsed' AND coalesce(processing_params->>'auto_index', 'true') = 'true'))),
			(SELECT count(*) FROM event_failures)`).Scan(&pending, &moving, &failures)
		if err != nil {
			t.Fatal(err)
		}
		if failures > 0 {
			var typ, handler, msg string
			_ = pool.QueryRow(ctx, `SELECT type, handler, error FROM event_failures LIMIT 1`).Scan(&typ, &handler, &msg)
			t.Fatalf("%d events failed permanently, e.g. %s in %s: %s", failures, typ, handler, msg)
		}
		if pending == 0 && moving == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("knowledge work not settled after %s: %d unpublished events, %d files between stages", timeout, pending, moving)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KBFiles lists a KB's files (root folder, up to 500).
func (c *Client) KBFiles(kbID string) []map[string]any {
	c.T.Helper()
	var out struct {
		Files []map[string]any `json:"files"`
	}
	c.Do("GET", "/api/knowledge/databases/"+kbID+"/documents?limit=500", nil).Decode(c.T, &out)
	return out.Files
}

// QueryKB searches a KB in mode (vector | keyword | hybrid) and returns the hits.
func (c *Client) QueryKB(kbID, query, mode string) []map[string]any {
	c.T.Helper()
	var out struct {
		Result []map[string]any `json:"result"`
	}
	r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query", map[string]any{"query": query, "meta": map[string]any{"search_mode": mode}})
	if r.Status != http.StatusOK {
		c.T.Fatalf("query %s: %d %s", kbID, r.Status, r.Body)
	}
	r.Decode(c.T, &out)
	return out.Result
}

// FileTraces counts what the index holds for a file: chunk rows, vectors
// (the Postgres vector store) and keyword-index documents.
type FileTraces struct{ Chunks, Vectors, KeywordDocs int }

// KnowledgeFileTraces reads a file's FileTraces.
func KnowledgeFileTraces(t testing.TB, pool *pgxpool.Pool, fileID string) FileTraces {
	t.Helper()
	var ft FileTraces
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM knowledge_chunks WHERE file_id = $1),
		(SELECT count(*) FROM vector_items WHERE grp = $1),
		(SELECT count(*) FROM keyword_docs WHERE starts_with(doc_id, $1 || '_'))`, fileID).Scan(&ft.Chunks, &ft.Vectors, &ft.KeywordDocs)
	if err != nil {
		t.Fatal(err)
	}
	return ft
}

var buildAllMu sync.Mutex

// BuildAll compiles main packages (e.g. "./functions/doc-parse") with one go
// build, which shares the work between them and links them in parallel, and
// returns package → executable. Packages Build or BuildAll compiled before are
// reused, and Build reuses what BuildAll compiled.
func BuildAll(t testing.TB, pkgs ...string) map[string]string {
	t.Helper()
	buildAllMu.Lock()
	var todo []string
	for _, pkg := range pkgs {
		if _, ok := builds.Load(pkg); !ok {
			todo = append(todo, pkg)
		}
	}
	if len(todo) > 0 {
		dir, err := os.MkdirTemp("", "yuxi-build-")
		if err == nil {
			cmd := exec.Command("go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, todo...)...)
			cmd.Dir = RepoRoot(t)
			var out []byte
			if out, err = cmd.CombinedOutput(); err != nil {
				err = fmt.Errorf("go build %s: %v\n%s", strings.Join(todo, " "), err, out)
			}
		}
		for _, pkg := range todo {
			b := &buildResult{path: filepath.Join(dir, filepath.Base(pkg)), err: err}
			b.once.Do(func() {}) // built: Build must not build it again
			builds.LoadOrStore(pkg, b)
		}
	}
	buildAllMu.Unlock()
	out := make(map[string]string, len(pkgs))
	for _, pkg := range pkgs {
		out[pkg] = Build(t, pkg)
	}
	return out
}

// BindSource binds bucket (and prefix) to kbID and proves it as the bucket's
// owner would: writes the source's verification token to its verification
// object in the fake bucket, then asks the platform to verify. It returns
// the verified source.
func (c *Client) BindSource(f *FakeS3, kbID, provider, bucket, prefix string) map[string]any {
	c.T.Helper()
	base := "/api/knowledge/databases/" + kbID + "/sources"
	src := c.OK("POST", base, map[string]any{"provider": provider, "bucket": bucket, "prefix": prefix})
	key, _ := src["verification_key"].(string)
	token, _ := src["verification_token"].(string)
	if key == "" || token == "" || src["verified_at"] != nil {
		c.T.Fatalf("new source without a pending verification: %v", src)
	}
	if _, err := f.Bucket(c.T, bucket).Put(context.Background(), key, strings.NewReader(token), int64(len(token)), "text/plain"); err != nil {
		c.T.Fatal(err)
	}
	out := c.OK("POST", fmt.Sprintf("%s/%v/verify", base, src["id"]), nil)
	if out["verified_at"] == nil {
		c.T.Fatalf("verify answered %v", out)
	}
	return out
}
