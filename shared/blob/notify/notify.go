// Package notify decodes bucket notifications — "an object was written or
// deleted" — into one form, Change, whatever service delivered them:
//
//   - S3 event notification records, from AWS S3 (eventSource "aws:s3"),
//     MinIO ("minio:s3", also wrapped in its webhook envelope) and other
//     S3-compatible stores ("<vendor>:s3"); the s3:TestEvent S3 sends when a
//     notification is configured is ignored;
//   - those records inside an SNS notification, an SQS message body (S3 → SQS
//     or S3 → SNS → SQS), or a Lambda SQS/SNS event;
//   - Amazon EventBridge S3 events ("Object Created" / "Object Deleted");
//   - Google Cloud Storage CloudEvents (google.cloud.storage.object.v1.finalized
//     and .deleted) as structured JSON, as the bare object resource (the body
//     of a binary-mode delivery), or as a cloudevents Event (FromCloudEvent);
//   - GCS Pub/Sub notifications pushed by a Pub/Sub push subscription.
//
// Decode sniffs the format. Events that change no object content (tagging,
// ACLs, restores, metadata updates, archive transitions) decode to no
// Change; keys ending in "/" (console "folder" placeholders) are skipped.
//
// What a Change is not: proof. Decode does not authenticate the message (SNS
// signatures, Pub/Sub push tokens and the like are checked at the HTTP edge
// or by the platform trigger), and notifications arrive at least once, late
// and out of order. Treat a Change as a hint to look at the bucket: Stat the
// object and ingest what is there, delete what is gone. A "deleted" Change
// names the version it removed; GCS sends one for the old generation when an
// object is overwritten, so ignore it when a newer version is held.
//
// Imported by: the function that ingests objects dropped into a bucket (and
// tests). May import: the standard library and the CloudEvents SDK's event
// package. It does not import shared/blob: keys here are the bucket's own
// and must be checked with blob.ValidateKey before use as store keys.
package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Change is one object created or deleted in a bucket.
type Change struct {
	Provider string // ProviderS3 ("s3": AWS, MinIO, other S3-compatible) or ProviderGCS ("gcs")
	Bucket   string
	Key      string // the object's name, decoded (S3 records URL-encode it)
	Size     int64  // bytes; 0 for deletions
	ETag     string // without quotes; for GCS the hex MD5 when known, else GCS's etag
	Version  string // S3 version id or GCS generation; empty when unversioned
	Op       string // OpCreated or OpDeleted
	Time     time.Time
	// EventID identifies the notification for deduplication: the delivering
	// service's id where there is one (EventBridge id, CloudEvent id, Pub/Sub
	// message id); for S3 event records, which carry none,
	// "<bucket>/<key>#<sequencer>" (the sequencer is unique per event of a key).
	EventID string
}

// Providers and operations.
const (
	ProviderS3  = "s3"
	ProviderGCS = "gcs"
	OpCreated   = "created"
	OpDeleted   = "deleted"
)

var (
	// ErrUnknownFormat is returned (wrapped) for a body that is not one of
	// the supported notification formats.
	ErrUnknownFormat = errors.New("notify: unknown notification format")
	// ErrSubscriptionConfirmation is returned (wrapped) for an SNS
	// SubscriptionConfirmation or UnsubscribeConfirmation message: an HTTP
	// endpoint must confirm by visiting SubscribeURL after verifying the
	// message signature, which is not this package's job.
	ErrSubscriptionConfirmation = errors.New("notify: SNS subscription confirmation, not a notification")
)

// maxDepth bounds envelopes within envelopes (Lambda SQS event → SNS → S3).
const maxDepth = 4

// Decode returns the changes a notification body describes, in delivery
// order. A recognised notification that changes nothing (a test event, a
// tagging event) yields no changes and no error.
func Decode(body []byte) ([]Change, error) {
	return decode(body, 0)
}

func decode(body []byte, depth int) ([]Change, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: envelopes nested more than %d deep", ErrUnknownFormat, maxDepth)
	}
	body = bytes.TrimSpace(body)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object (%s)", ErrUnknownFormat, snippet(body))
	}
	switch {
	case has(top, "Records"):
		return decodeRecords(top["Records"], depth)
	case stringField(top, "Event") == "s3:TestEvent":
		return nil, nil
	case has(top, "Type") && has(top, "Message") && (has(top, "TopicArn") || has(top, "MessageId")):
		return decodeSNS(body, depth)
	case has(top, "detail-type") && has(top, "source") && has(top, "detail"):
		return decodeEventBridge(body)
	case has(top, "specversion"):
		return decodeStructuredCloudEvent(body)
	case has(top, "message") && has(top, "subscription"):
		return decodePubSubPush(body)
	case stringField(top, "kind") == "storage#object" || (has(top, "bucket") && has(top, "name") && has(top, "generation")):
		return decodeGCSObjectAlone(body)
	}
	return nil, fmt.Errorf("%w: JSON object with keys %s", ErrUnknownFormat, keyList(top))
}

func has(m map[string]json.RawMessage, k string) bool {
	_, ok := m[k]
	return ok
}

// stringField returns m[k] when it is a JSON string, else "".
func stringField(m map[string]json.RawMessage, k string) string {
	var s string
	if raw, ok := m[k]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

func keyList(m map[string]json.RawMessage) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, fmt.Sprintf("%.40q", k))
	}
	sort.Strings(keys)
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return "[" + strings.Join(keys, " ") + "]"
}

func snippet(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%q…", b[:40])
	}
	return fmt.Sprintf("%q", b)
}

// parseTime parses an RFC 3339 time; empty is the zero time.
func parseTime(what, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("notify: %s time %q: %w", what, s, err)
	}
	return t, nil
}

// isFolder reports a "folder" placeholder object, which holds no content.
func isFolder(key string) bool { return strings.HasSuffix(key, "/") }
