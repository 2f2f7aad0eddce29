package multiprocess

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// On AWS, a bucket tells the platform about new and removed objects by
// invoking doc-parse itself — S3 event records as the Lambda payload, or an
// EventBridge rule's events through SQS — not through the webhook. Here
// doc-parse runs as a Lambda function under the Runtime Interface Emulator,
// next to the Knative-style cluster it publishes to (K_SINK): what it takes
// from a notification is parsed and indexed by the cluster's functions.
func TestBucketNotificationsInvokeDocParseOnLambda(t *testing.T) {
	t.Parallel()
	s3 := testkit.NewFakeS3(t)
	c := newCluster(t, s3.SourceEnv())
	fn := testkit.StartLambda(t, c.bins["doc-parse"], c.env)
	api := c.client(t)
	drop := s3.Bucket(t, "acme-drop")

	kbID := api.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "inbox", "description": "S3 on Lambda"})["kb_id"].(string)
	api.BindSource(s3, kbID, "s3", "acme-drop", "inbox/")

	// fileOf waits until the object's file is in status want ("" = gone).
	fileOf := func(key, want string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got map[string]any
			for _, f := range api.KBFiles(kbID) {
				if f["source_uri"] == "s3://acme-drop/"+key {
					got = f
				}
			}
			if (want == "" && got == nil) || (got != nil && got["status"] == want) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("file of %s: %v, want status %q\n%s\ndoc-parse on Lambda:\n%s", key, got, want, c.logs(), fn.Logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	put := func(key, content string) testkit.ObjectEvent {
		info, err := drop.Put(t.Context(), key, strings.NewReader(content), int64(len(content)), "")
		if err != nil {
			t.Fatal(err)
		}
		return testkit.ObjectEvent{Bucket: "acme-drop", Key: key, Size: info.Size, ETag: info.ETag}
	}

	// S3 → Lambda: the event records are the payload.
	o := put("inbox/pump manual.md", "# Pump\n\nPrime the centrifugal pump before the first start.\n")
	o.Sequencer = "0A01"
	var rep struct{ Outcome string }
	if body := fn.Invoke(testkit.S3EventRecords(t, "ObjectCreated:Put", o)); json.Unmarshal(body, &rep) != nil || rep.Outcome != "ack" {
		t.Fatalf("S3 records: %s\n%s", body, fn.Logs.String())
	}
	pump := fileOf(o.Key, "indexed")
	if hits := fileHits(api, kbID, "centrifugal pump", pump["file_id"].(string)); hits == 0 {
		t.Error("the object S3 announced is not searchable")
	}

	// EventBridge → SQS → Lambda, with a batch of two messages.
	v := put("inbox/valve.md", "# Valve\n\nClose the gate valve slowly to avoid water hammer.\n")
	v.Sequencer = "0B01"
	sqs := func(id string, body []byte) map[string]any {
		return map[string]any{"messageId": id, "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:doc-parse", "body": string(body)}
	}
	batch, _ := json.Marshal(map[string]any{"Records": []any{
		sqs("m-1", testkit.EventBridgeObjectEvent(t, "Object Created", "eb-valve-1", v)),
		sqs("m-2", testkit.EventBridgeObjectEvent(t, "Object Created", "eb-valve-1", v)), // redelivered: one file
	}})
	var failures struct {
		BatchItemFailures []any `json:"batchItemFailures"`
	}
	if body := fn.Invoke(batch); json.Unmarshal(body, &failures) != nil || failures.BatchItemFailures == nil || len(failures.BatchItemFailures) != 0 {
		t.Fatalf("SQS batch: %s\n%s", body, fn.Logs.String())
	}
	valve := fileOf(v.Key, "indexed")
	if hits := fileHits(api, kbID, "gate valve water hammer", valve["file_id"].(string)); hits == 0 {
		t.Error("the object EventBridge announced is not searchable")
	}

	// Removed: S3 → Lambda again; the file and its index entries go.
	if err := drop.Delete(t.Context(), o.Key); err != nil {
		t.Fatal(err)
	}
	o.Sequencer = "0A02"
	if body := fn.Invoke(testkit.S3EventRecords(t, "ObjectRemoved:Delete", o)); json.Unmarshal(body, &rep) != nil || rep.Outcome != "ack" {
		t.Fatalf("S3 removal: %s\n%s", body, fn.Logs.String())
	}
	fileOf(o.Key, "")
	if hits := fileHits(api, kbID, "centrifugal pump", pump["file_id"].(string)); hits != 0 {
		t.Errorf("the removed object is still found %d times", hits)
	}
	if n := len(api.KBFiles(kbID)); n != 1 {
		t.Errorf("the KB holds %d files, want the valve manual alone", n)
	}

	// What the function cannot read is a function error, not a crash.
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
	}
	if body := fn.Invoke([]byte(`{"Records":[{"eventSource":"aws:kinesis"}]}`)); json.Unmarshal(body, &fnErr) != nil || fnErr.ErrorMessage == "" {
		t.Errorf("unknown records: %s", body)
	}
}
