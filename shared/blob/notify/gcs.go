package notify

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// Cloud Storage CloudEvent types (Eventarc, Cloud Run functions).
const (
	GCSFinalized       = "google.cloud.storage.object.v1.finalized"
	GCSDeleted         = "google.cloud.storage.object.v1.deleted"
	GCSArchived        = "google.cloud.storage.object.v1.archived"
	GCSMetadataUpdated = "google.cloud.storage.object.v1.metadataUpdated"
)

// gcsObject is the Cloud Storage object resource (JSON API), the data of GCS
// CloudEvents and of Pub/Sub notifications with payload format JSON_API_V1.
// int64 fields are JSON strings there; flexInt also accepts numbers.
type gcsObject struct {
	Kind        string  `json:"kind"`
	Name        string  `json:"name"`
	Bucket      string  `json:"bucket"`
	Generation  flexInt `json:"generation"`
	ContentType string  `json:"contentType"`
	TimeCreated string  `json:"timeCreated"`
	Updated     string  `json:"updated"`
	Size        flexInt `json:"size"`
	MD5Hash     string  `json:"md5Hash"`
	ETag        string  `json:"etag"`
}

// flexInt is an int64 written as a JSON string or number; it keeps the
// decimal text (generations exceed float64 precision).
type flexInt string

func (f *flexInt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*f = ""
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	if s != "" {
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("not an integer: %.40q", s)
		}
	}
	*f = flexInt(s)
	return nil
}

func (f flexInt) int64() int64 {
	n, _ := strconv.ParseInt(string(f), 10, 64) // checked when decoded
	return n
}

// change builds the Change for obj; id and t come from the envelope when it
// has them.
func (obj gcsObject) change(op, id string, t time.Time) ([]Change, error) {
	if obj.Bucket == "" || obj.Name == "" {
		return nil, fmt.Errorf("notify: GCS object without bucket or name")
	}
	if isFolder(obj.Name) {
		return nil, nil
	}
	if t.IsZero() {
		ts := obj.Updated
		if ts == "" {
			ts = obj.TimeCreated
		}
		var err error
		if t, err = parseTime("GCS object", ts); err != nil {
			return nil, err
		}
	}
	// The hex MD5 matches the ETag S3-protocol reads of the object report;
	// composite objects have no MD5, so GCS's own etag stands in.
	etag := obj.ETag
	if obj.MD5Hash != "" {
		sum, err := base64.StdEncoding.DecodeString(obj.MD5Hash)
		if err != nil {
			return nil, fmt.Errorf("notify: GCS md5Hash %.40q: %w", obj.MD5Hash, err)
		}
		etag = hex.EncodeToString(sum)
	}
	c := Change{
		Provider: ProviderGCS,
		Bucket:   obj.Bucket,
		Key:      obj.Name,
		ETag:     etag,
		Version:  string(obj.Generation),
		Op:       op,
		Time:     t,
		EventID:  id,
	}
	if op == OpCreated {
		c.Size = obj.Size.int64()
	}
	if c.EventID == "" {
		c.EventID = c.Bucket + "/" + c.Key + "#" + c.Version + "/" + op
	}
	return []Change{c}, nil
}

// gcsOp maps a GCS CloudEvent type to an operation; ok is false for types
// that change no content, err is set for types that are not GCS object events.
func gcsOp(typ string) (op string, ok bool, err error) {
	switch typ {
	case GCSFinalized:
		return OpCreated, true, nil
	case GCSDeleted:
		return OpDeleted, true, nil
	case GCSArchived, GCSMetadataUpdated:
		return "", false, nil
	}
	return "", false, fmt.Errorf("%w: CloudEvent type %.80q", ErrUnknownFormat, typ)
}

// FromCloudEvent returns the change a Cloud Storage CloudEvent describes, as
// delivered over HTTP by Eventarc (binary or structured mode, decoded by the
// CloudEvents SDK). Archive and metadata-update events yield no change; other
// event types are ErrUnknownFormat. ctx is unused today; it is the first
// parameter so that receivers can pass theirs through.
func FromCloudEvent(ctx context.Context, ev event.Event) ([]Change, error) {
	op, ok, err := gcsOp(ev.Type())
	if err != nil || !ok {
		return nil, err
	}
	if ct := ev.DataContentType(); ct != "" && !strings.Contains(ct, "json") {
		return nil, fmt.Errorf("notify: %s event %s with data content type %q, want JSON", ev.Type(), ev.ID(), ct)
	}
	var obj gcsObject
	if err := json.Unmarshal(ev.Data(), &obj); err != nil {
		return nil, fmt.Errorf("notify: %s event %s data: %w", ev.Type(), ev.ID(), err)
	}
	// source is //storage.googleapis.com/projects/_/buckets/<bucket> and
	// subject objects/<name>: fall back on them if the data lacks either.
	if obj.Bucket == "" {
		_, obj.Bucket, _ = strings.Cut(ev.Source(), "/buckets/")
	}
	if obj.Name == "" {
		obj.Name, _ = strings.CutPrefix(ev.Subject(), "objects/")
	}
	return obj.change(op, ev.ID(), ev.Time())
}

func decodeStructuredCloudEvent(body []byte) ([]Change, error) {
	var ev event.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: structured CloudEvent: %v", ErrUnknownFormat, err)
	}
	return FromCloudEvent(context.Background(), ev)
}

// decodeGCSObjectAlone handles the object resource without its envelope:
// the body of a binary-mode CloudEvent, whose type travels in the ce-type
// header. The body cannot say whether the object was finalized or deleted,
// so it is reported as created; receivers that see headers should use
// FromCloudEvent.
func decodeGCSObjectAlone(body []byte) ([]Change, error) {
	var obj gcsObject
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("notify: GCS object: %w", err)
	}
	return obj.change(OpCreated, "", time.Time{})
}

// pubSubPush is the body a Pub/Sub push subscription posts; for Cloud
// Storage Pub/Sub notifications the attributes describe the event and data
// holds the object resource (payload format JSON_API_V1) or nothing (NONE).
type pubSubPush struct {
	Message struct {
		Attributes  map[string]string `json:"attributes"`
		Data        string            `json:"data"`
		MessageID   string            `json:"messageId"`
		PublishTime string            `json:"publishTime"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

func decodePubSubPush(body []byte) ([]Change, error) {
	var p pubSubPush
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: Pub/Sub push: %v", ErrUnknownFormat, err)
	}
	attrs := p.Message.Attributes
	var op string
	switch attrs["eventType"] {
	case "OBJECT_FINALIZE":
		op = OpCreated
	case "OBJECT_DELETE":
		if attrs["overwrittenByGeneration"] != "" {
			// Replaced, not removed: the new generation's OBJECT_FINALIZE is the
			// change. Reporting a delete here could, delivered late, remove it.
			return nil, nil
		}
		op = OpDeleted
	case "OBJECT_METADATA_UPDATE", "OBJECT_ARCHIVE":
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: Pub/Sub message %s is not a Cloud Storage notification (eventType %.40q)",
			ErrUnknownFormat, p.Message.MessageID, attrs["eventType"])
	}
	var obj gcsObject
	if p.Message.Data != "" && attrs["payloadFormat"] != "NONE" {
		data, err := base64.StdEncoding.DecodeString(p.Message.Data)
		if err != nil {
			return nil, fmt.Errorf("notify: Pub/Sub message %s data: %w", p.Message.MessageID, err)
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, fmt.Errorf("notify: Pub/Sub message %s object: %w", p.Message.MessageID, err)
		}
	}
	if obj.Bucket == "" {
		obj.Bucket = attrs["bucketId"]
	}
	if obj.Name == "" {
		obj.Name = attrs["objectId"]
	}
	if obj.Generation == "" {
		obj.Generation = flexInt(attrs["objectGeneration"])
	}
	t, err := parseTime("Pub/Sub eventTime", attrs["eventTime"])
	if err != nil {
		return nil, err
	}
	return obj.change(op, p.Message.MessageID, t)
}
