package notify_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/yuxi-serverless/yuxi/shared/blob/notify"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The change every S3 → SNS / SQS fixture carries (an S3 record with a
// URL-encoded UTF-8 key).
var apacCopy = notify.Change{
	Provider: "s3", Bucket: "yuxi-apac", Key: "docs/手册 v2.pdf", Size: 20480,
	ETag: "7215ee9c7d9dc229d2921a40e899ec5f", Op: "created", Time: ts("2025-03-14T08:15:30.250Z"),
	EventID: "yuxi-apac/docs/手册 v2.pdf#0065F2D8A0B1C2D417",
}

var ebCreated = notify.Change{
	Provider: "s3", Bucket: "yuxi-drop", Key: "inbox/Quarterly Report (2024)+draft.pdf", Size: 5,
	ETag: "b1946ac92492d2347c6235b4d2611184", Version: "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
	Op: "created", Time: ts("2025-03-14T09:40:00Z"), EventID: "17793124-05d4-b198-2fde-7ededc63b103",
}

var gcsNotes = notify.Change{
	Provider: "gcs", Bucket: "yuxi-gcs-drop", Key: "inbox/研究 notes.md", Size: 4521,
	ETag: "7215ee9c7d9dc229d2921a40e899ec5f", Version: "1741944413589000", Op: "created",
}

func with(c notify.Change, f func(*notify.Change)) notify.Change {
	f(&c)
	return c
}

func TestDecodeFixtures(t *testing.T) {
	cases := []struct {
		file string
		want []notify.Change
	}{
		{"s3_object_created_put.json", []notify.Change{{
			Provider: "s3", Bucket: "yuxi-drop", Key: "inbox/Quarterly Report (2024) 报告 a+b.pdf", Size: 1048576,
			ETag: "b1946ac92492d2347c6235b4d2611184", Version: "096fKKXTRTtl3on89fVO.nfljtsv6qko",
			Op: "created", Time: ts("2025-03-14T09:26:53.589Z"),
			EventID: "yuxi-drop/inbox/Quarterly Report (2024) 报告 a+b.pdf#0055AED6DCD90281E5",
		}}},
		{"s3_multipart_and_deletes.json", []notify.Change{
			{
				Provider: "s3", Bucket: "yuxi-drop", Key: "kb/manuals/big manual.pdf", Size: 73400320,
				ETag: "9b2cf535f27731c974343645a3985328-5", Version: "3HL4kqtJlcpXroDTDmjVBH40Nrjfkd",
				Op: "created", Time: ts("2025-03-14T10:00:01Z"), EventID: "yuxi-drop/kb/manuals/big manual.pdf#0055AED6DCD90281E6",
			},
			{
				Provider: "s3", Bucket: "yuxi-drop", Key: "kb/old/notes.txt", Op: "deleted",
				Time: ts("2025-03-14T10:05:42.125Z"), EventID: "yuxi-drop/kb/old/notes.txt#0055AED6DCD90281F0",
			},
			{
				Provider: "s3", Bucket: "yuxi-drop", Key: "kb/manuals/big manual.pdf", Version: "Vn8pDXBd6GjEIZ1r4nYUS.YYmoBJ7fFd",
				Op: "deleted", Time: ts("2025-03-14T10:06:00.5Z"), EventID: "yuxi-drop/kb/manuals/big manual.pdf#0055AED6DCD90281F7",
			},
			{
				Provider: "s3", Bucket: "yuxi-drop", Key: "tmp/expired.csv", Op: "deleted",
				Time: ts("2025-03-15T00:00:00Z"), EventID: "yuxi-drop/tmp/expired.csv#0055AED6DCD9028200",
			},
		}},
		// A folder placeholder, a tagging event and a restore: nothing to ingest.
		{"s3_ignored_events.json", nil},
		{"s3_test_event.json", nil},
		{"minio_webhook_put.json", []notify.Change{{
			Provider: "s3", Bucket: "yuxi-local", Key: "uploads/team photo #1.jpg", Size: 6474,
			ETag: "430f89010c77aa34fc8760696da62d08", Op: "created", Time: ts("2025-03-14T09:30:00.123Z"),
			EventID: "yuxi-local/uploads/team photo #1.jpg#182C8B4F2D8B46C5",
		}}},
		{"minio_webhook_delete.json", []notify.Change{{
			Provider: "s3", Bucket: "yuxi-local", Key: "uploads/old.docx", Op: "deleted",
			Time: ts("2025-03-14T09:31:10.456Z"), EventID: "yuxi-local/uploads/old.docx#182C8B5E9A1C2D34",
		}}},
		{"sqs_body_s3.json", []notify.Change{apacCopy}},
		{"sns_notification_s3.json", []notify.Change{apacCopy}},
		{"lambda_sns_event.json", []notify.Change{apacCopy}},
		// S3 → SQS, S3 → SNS → SQS and EventBridge → SQS message bodies.
		{"lambda_sqs_event.json", []notify.Change{apacCopy, apacCopy, ebCreated}},
		{"eventbridge_object_created.json", []notify.Change{ebCreated}},
		{"eventbridge_object_deleted.json", []notify.Change{{
			Provider: "s3", Bucket: "yuxi-drop", Key: "inbox/Quarterly Report (2024)+draft.pdf",
			ETag: "d41d8cd98f00b204e9800998ecf8427e", Version: "1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF",
			Op: "deleted", Time: ts("2025-03-14T09:45:00Z"), EventID: "2ee9cc15-d022-99ea-1fb8-1b1bac4850f9",
		}}},
		{"eventbridge_restore_completed.json", nil},
		{"gcs_cloudevent_finalized.json", []notify.Change{with(gcsNotes, func(c *notify.Change) {
			c.Time, c.EventID = ts("2025-03-14T09:26:53.589Z"), "9963614581593519"
		})}},
		// A composite object: no md5Hash, so GCS's etag stands in.
		{"gcs_cloudevent_deleted.json", []notify.Change{{
			Provider: "gcs", Bucket: "yuxi-gcs-drop", Key: "exports/merged.csv", ETag: "CIDg7bT8q4QDEAE=",
			Version: "1741950000000000", Op: "deleted", Time: ts("2025-03-14T12:00:00.25Z"), EventID: "9963614581999999",
		}}},
		{"gcs_cloudevent_metadata_updated.json", nil},
		// The bare object resource (binary-mode body) cannot tell finalize from
		// delete: reported as created, identified by generation.
		{"gcs_object_data.json", []notify.Change{with(gcsNotes, func(c *notify.Change) {
			c.Time = ts("2025-03-14T09:26:53.589Z")
			c.EventID = "yuxi-gcs-drop/inbox/研究 notes.md#1741944413589000/created"
		})}},
		{"gcs_pubsub_push_finalize.json", []notify.Change{with(gcsNotes, func(c *notify.Change) {
			c.Time, c.EventID = ts("2025-03-14T09:26:53.589123Z"), "10945678901234567"
		})}},
		// Overwritten, not deleted: the new generation's finalize is the change.
		{"gcs_pubsub_push_delete_overwritten.json", nil},
		{"gcs_pubsub_push_delete_nopayload.json", []notify.Change{{
			Provider: "gcs", Bucket: "yuxi-gcs-drop", Key: "exports/merged.csv", Version: "1741950000000000",
			Op: "deleted", Time: ts("2025-03-14T15:00:00.000002Z"), EventID: "10945678901300000",
		}}},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.file] = true
		t.Run(strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			got, err := notify.Decode(fixture(t, c.file))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !equalChanges(got, c.want) {
				t.Errorf("Decode =\n%s\nwant\n%s", dump(got), dump(c.want))
			}
		})
	}
	// Every fixture is covered (the SNS confirmation has its own test).
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		name := filepath.Base(f)
		if !seen[name] && name != "sns_subscription_confirmation.json" {
			t.Errorf("fixture %s has no expected changes in this test", name)
		}
	}
}

func equalChanges(a, b []notify.Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Time.Equal(y.Time) {
			return false
		}
		x.Time, y.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func TestS3KeysAreURLDecoded(t *testing.T) {
	for encoded, want := range map[string]string{
		"plain.txt":                        "plain.txt",
		"with+space.txt":                   "with space.txt",
		"a%2Bb.txt":                        "a+b.txt",
		"dir%2Fsub%2Ffile.md":              "dir/sub/file.md",
		"%E4%B8%AD%E6%96%87.pdf":           "中文.pdf",
		"100%25+done%3F.txt":               "100% done?.txt",
		"Quarterly+Report+%282024%29.xlsx": "Quarterly Report (2024).xlsx",
	} {
		body := `{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","eventTime":"2025-01-01T00:00:00.000Z",` +
			`"eventName":"ObjectCreated:Post","s3":{"bucket":{"name":"b"},"object":{"key":"` + encoded + `","size":1,"sequencer":"01"}}}]}`
		got, err := notify.Decode([]byte(body))
		if err != nil {
			t.Errorf("%s: %v", encoded, err)
			continue
		}
		if len(got) != 1 || got[0].Key != want {
			t.Errorf("key %q decoded to %+v, want %q", encoded, got, want)
		}
	}
	bad := `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"bad%ZZ"}}}]}`
	if _, err := notify.Decode([]byte(bad)); err == nil {
		t.Error("a key with a broken escape decoded")
	}
}

func TestS3EventNames(t *testing.T) {
	for name, want := range map[string]string{
		"ObjectCreated:Put":                      "created",
		"ObjectCreated:Post":                     "created",
		"ObjectCreated:Copy":                     "created",
		"ObjectCreated:CompleteMultipartUpload":  "created",
		"s3:ObjectCreated:Put":                   "created", // MinIO
		"s3:ObjectCreated:PutTagging":            "",        // MinIO, metadata only
		"s3:ObjectCreated:PutRetention":          "",
		"ObjectRemoved:Delete":                   "deleted",
		"ObjectRemoved:DeleteMarkerCreated":      "deleted",
		"s3:ObjectRemoved:DeleteAllVersions":     "deleted",
		"s3:ObjectRemoved:NoOP":                  "",
		"LifecycleExpiration:Delete":             "deleted",
		"ObjectRestore:Post":                     "",
		"ObjectAcl:Put":                          "",
		"Replication:OperationFailedReplication": "",
		"s3:ObjectAccessed:Get":                  "",
	} {
		body := `{"Records":[{"eventSource":"aws:s3","eventTime":"2025-01-01T00:00:00Z","eventName":"` + name +
			`","s3":{"bucket":{"name":"b"},"object":{"key":"k","size":3,"sequencer":"01"}}}]}`
		got, err := notify.Decode([]byte(body))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		op := ""
		if len(got) == 1 {
			op = got[0].Op
		}
		if op != want {
			t.Errorf("%s: op %q, want %q", name, op, want)
		}
	}
}

func TestS3EventIDWithoutSequencer(t *testing.T) {
	body := `{"Records":[{"eventSource":"ceph:s3","eventTime":"2025-01-01T00:00:00Z","eventName":"ObjectCreated:Put",` +
		`"responseElements":{"x-amz-request-id":"tx000001","x-amz-id-2":"abc"},"s3":{"bucket":{"name":"b"},"object":{"key":"k","size":3}}}]}`
	got, err := notify.Decode([]byte(body))
	if err != nil || len(got) != 1 || got[0].EventID != "b/k#tx000001" || got[0].Provider != "s3" {
		t.Errorf("Decode = %+v, %v; want EventID b/k#tx000001", got, err)
	}
}

func TestSNSSubscriptionConfirmation(t *testing.T) {
	_, err := notify.Decode(fixture(t, "sns_subscription_confirmation.json"))
	if !errors.Is(err, notify.ErrSubscriptionConfirmation) {
		t.Errorf("err = %v, want ErrSubscriptionConfirmation", err)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for name, body := range map[string]string{
		"empty":              ``,
		"not json":           `hello`,
		"truncated":          `{"Records":[{"eventSource":"aws:s3"`,
		"array":              `[{"Records":[]}]`,
		"string":             `"Records"`,
		"unrelated object":   `{"foo":1,"bar":[2]}`,
		"dynamodb records":   `{"Records":[{"eventSource":"aws:dynamodb","dynamodb":{}}]}`,
		"records not array":  `{"Records":{"eventSource":"aws:s3"}}`,
		"sns unknown type":   `{"Type":"Gossip","MessageId":"1","Message":"{}"}`,
		"sns non-json":       `{"Type":"Notification","MessageId":"1","TopicArn":"arn","Message":"plain text"}`,
		"eventbridge ec2":    `{"version":"0","id":"1","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{}}`,
		"cloudevent other":   `{"specversion":"1.0","id":"1","source":"/x","type":"io.yuxi.run.requested.v1","data":{}}`,
		"pubsub other":       `{"message":{"attributes":{"foo":"bar"},"data":"e30=","messageId":"1"},"subscription":"projects/p/subscriptions/s"}`,
		"sqs record no body": `{"Records":[{"eventSource":"aws:sqs","messageId":"1"}]}`,
		"nested too deep":    nest(`{"Records":[]}`, 6),
	} {
		got, err := notify.Decode([]byte(body))
		if err == nil {
			t.Errorf("%s: decoded to %+v, want an error", name, got)
			continue
		}
		if !errors.Is(err, notify.ErrUnknownFormat) {
			t.Errorf("%s: err = %v, want ErrUnknownFormat", name, err)
		}
	}
}

// nest wraps body in n SNS envelopes.
func nest(body string, n int) string {
	for range n {
		b, _ := json.Marshal(map[string]string{"Type": "Notification", "MessageId": "m", "TopicArn": "arn", "Message": body})
		body = string(b)
	}
	return body
}

func TestDecodeRejectsMalformedKnownFormats(t *testing.T) {
	for name, body := range map[string]string{
		"s3 record without bucket": `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"object":{"key":"k"}}}]}`,
		"s3 bad time":              `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","eventTime":"yesterday","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`,
		"gcs size not a number":    `{"kind":"storage#object","bucket":"b","name":"n","generation":"1","size":"big"}`,
		"gcs bad md5":              `{"kind":"storage#object","bucket":"b","name":"n","generation":"1","md5Hash":"%%%"}`,
		"pubsub bad base64":        `{"message":{"attributes":{"eventType":"OBJECT_FINALIZE","payloadFormat":"JSON_API_V1"},"data":"***","messageId":"1"},"subscription":"s"}`,
	} {
		if got, err := notify.Decode([]byte(body)); err == nil {
			t.Errorf("%s: decoded to %+v, want an error", name, got)
		}
	}
}

func TestFromCloudEvent(t *testing.T) {
	// Structured JSON through the SDK, as an HTTP receiver would get it.
	var ev event.Event
	if err := json.Unmarshal(fixture(t, "gcs_cloudevent_finalized.json"), &ev); err != nil {
		t.Fatal(err)
	}
	got, err := notify.FromCloudEvent(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	want := with(gcsNotes, func(c *notify.Change) { c.Time, c.EventID = ts("2025-03-14T09:26:53.589Z"), "9963614581593519" })
	if !equalChanges(got, []notify.Change{want}) {
		t.Errorf("FromCloudEvent = %s", dump(got))
	}

	// Binary mode: attributes from headers, the bare object as data.
	bin := event.New()
	bin.SetID("binary-1")
	bin.SetType(notify.GCSDeleted)
	bin.SetSource("//storage.googleapis.com/projects/_/buckets/yuxi-gcs-drop")
	bin.SetSubject("objects/inbox/研究 notes.md")
	bin.SetTime(ts("2025-03-14T16:00:00Z"))
	if err := bin.SetData(event.ApplicationJSON, json.RawMessage(fixture(t, "gcs_object_data.json"))); err != nil {
		t.Fatal(err)
	}
	got, err = notify.FromCloudEvent(t.Context(), bin)
	if err != nil {
		t.Fatal(err)
	}
	want = with(gcsNotes, func(c *notify.Change) {
		c.Op, c.Size, c.Time, c.EventID = "deleted", 0, ts("2025-03-14T16:00:00Z"), "binary-1"
	})
	if !equalChanges(got, []notify.Change{want}) {
		t.Errorf("FromCloudEvent(binary deleted) = %s", dump(got))
	}

	// Data without bucket and name: taken from source and subject.
	sparse := event.New()
	sparse.SetID("sparse-1")
	sparse.SetType(notify.GCSFinalized)
	sparse.SetSource("//storage.googleapis.com/projects/_/buckets/other-bucket")
	sparse.SetSubject("objects/a/b.txt")
	if err := sparse.SetData(event.ApplicationJSON, map[string]string{"generation": "7", "size": "12", "updated": "2025-01-01T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	got, err = notify.FromCloudEvent(t.Context(), sparse)
	if err != nil || len(got) != 1 || got[0].Bucket != "other-bucket" || got[0].Key != "a/b.txt" || got[0].Size != 12 || got[0].Version != "7" {
		t.Errorf("FromCloudEvent(sparse) = %+v, %v", got, err)
	}

	// Other types: archive is ignored, anything else is unknown.
	arch := event.New()
	arch.SetID("a")
	arch.SetType(notify.GCSArchived)
	arch.SetSource("//storage.googleapis.com/projects/_/buckets/b")
	if got, err := notify.FromCloudEvent(t.Context(), arch); err != nil || len(got) != 0 {
		t.Errorf("archived: %+v, %v; want nothing", got, err)
	}
	other := event.New()
	other.SetID("o")
	other.SetType("io.yuxi.document.uploaded.v1")
	other.SetSource("/intake")
	if _, err := notify.FromCloudEvent(t.Context(), other); !errors.Is(err, notify.ErrUnknownFormat) {
		t.Errorf("other type: err = %v, want ErrUnknownFormat", err)
	}
}
