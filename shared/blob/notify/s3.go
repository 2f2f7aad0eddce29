package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// s3Record is one S3 event notification record (event versions 2.x; AWS
// documents its layout under "Event message structure", MinIO sends the same
// with eventSource "minio:s3" and eventName prefixed "s3:").
type s3Record struct {
	EventVersion     string         `json:"eventVersion"`
	EventSource      string         `json:"eventSource"`
	AWSRegion        string         `json:"awsRegion"`
	EventTime        string         `json:"eventTime"`
	EventName        string         `json:"eventName"`
	ResponseElements map[string]any `json:"responseElements"`
	S3               struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       string `json:"key"`
			Size      int64  `json:"size"`
			ETag      string `json:"eTag"`
			VersionID string `json:"versionId"`
			Sequencer string `json:"sequencer"`
		} `json:"object"`
	} `json:"s3"`
}

// recordProbe tells the kinds of "Records" entries apart: S3 records and
// the records of Lambda's SQS and SNS events (which spell the field
// EventSource).
type recordProbe struct {
	EventSource  string          `json:"eventSource"`
	EventSource2 string          `json:"EventSource"`
	Body         *string         `json:"body"` // aws:sqs
	SNS          json.RawMessage `json:"Sns"`  // aws:sns
}

func decodeRecords(raw json.RawMessage, depth int) ([]Change, error) {
	var records []json.RawMessage
	if err := json.Unmarshal(raw, &records); err != nil {
		return nil, fmt.Errorf("%w: Records is not an array", ErrUnknownFormat)
	}
	var out []Change
	for i, rec := range records {
		var p recordProbe
		if err := json.Unmarshal(rec, &p); err != nil {
			return nil, fmt.Errorf("%w: record %d is not an object", ErrUnknownFormat, i)
		}
		// encoding/json matches names case-insensitively, so both fields may
		// hold the same value; either one names the source.
		source := p.EventSource
		if source == "" {
			source = p.EventSource2
		}
		var changes []Change
		var err error
		switch {
		case strings.HasSuffix(source, ":s3"): // aws:s3, minio:s3, ceph:s3 …
			changes, err = decodeS3Record(rec)
		case source == "aws:sqs":
			if p.Body == nil {
				return nil, fmt.Errorf("%w: SQS record %d has no body", ErrUnknownFormat, i)
			}
			changes, err = decode([]byte(*p.Body), depth+1)
		case source == "aws:sns":
			if len(p.SNS) == 0 {
				return nil, fmt.Errorf("%w: SNS record %d has no Sns", ErrUnknownFormat, i)
			}
			changes, err = decodeSNS(p.SNS, depth+1)
		default:
			return nil, fmt.Errorf("%w: record %d from event source %.40q", ErrUnknownFormat, i, source)
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		out = append(out, changes...)
	}
	return out, nil
}

func decodeS3Record(raw json.RawMessage) ([]Change, error) {
	var r s3Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("notify: s3 record: %w", err)
	}
	op, ok := s3Op(r.EventName)
	if !ok {
		return nil, nil
	}
	if r.S3.Bucket.Name == "" || r.S3.Object.Key == "" {
		return nil, fmt.Errorf("notify: s3 record %s without bucket or key", r.EventName)
	}
	// Keys are form-encoded: "+" is a space, "%2B" a plus.
	key, err := url.QueryUnescape(r.S3.Object.Key)
	if err != nil {
		return nil, fmt.Errorf("notify: s3 record key %.80q: %w", r.S3.Object.Key, err)
	}
	if isFolder(key) {
		return nil, nil
	}
	t, err := parseTime("s3 record", r.EventTime)
	if err != nil {
		return nil, err
	}
	c := Change{
		Provider: ProviderS3,
		Bucket:   r.S3.Bucket.Name,
		Key:      key,
		ETag:     strings.Trim(r.S3.Object.ETag, `"`),
		Version:  r.S3.Object.VersionID,
		Op:       op,
		Time:     t,
	}
	if op == OpCreated {
		c.Size = r.S3.Object.Size
	}
	switch {
	case r.S3.Object.Sequencer != "":
		c.EventID = c.Bucket + "/" + key + "#" + r.S3.Object.Sequencer
	default:
		if id, _ := r.ResponseElements["x-amz-request-id"].(string); id != "" {
			c.EventID = c.Bucket + "/" + key + "#" + id
		}
	}
	return []Change{c}, nil
}

// s3Op maps an S3 event name (AWS "ObjectCreated:Put", MinIO
// "s3:ObjectCreated:Put") to an operation; ok is false for events that do not
// change content.
func s3Op(name string) (op string, ok bool) {
	name = strings.TrimPrefix(name, "s3:")
	kind, detail, _ := strings.Cut(name, ":")
	switch kind {
	case "ObjectCreated":
		switch detail {
		case "PutRetention", "PutLegalHold", "PutTagging", "DeleteTagging": // MinIO: metadata only
			return "", false
		}
		return OpCreated, true // Put, Post, Copy, CompleteMultipartUpload, …
	case "ObjectRemoved":
		if detail == "NoOP" { // MinIO: delete of a missing object
			return "", false
		}
		return OpDeleted, true // Delete, DeleteMarkerCreated, DeleteAllVersions
	case "LifecycleExpiration":
		return OpDeleted, true // Delete, DeleteMarkerCreated
	}
	return "", false // ObjectRestore, ObjectTagging, ObjectAcl, Replication, LifecycleTransition, …
}

// snsEnvelope is an SNS message as delivered to HTTP endpoints and SQS
// queues (and, as "Sns", inside a Lambda SNS event record).
type snsEnvelope struct {
	Type      string `json:"Type"`
	MessageID string `json:"MessageId"`
	TopicArn  string `json:"TopicArn"`
	Message   string `json:"Message"`
}

func decodeSNS(body []byte, depth int) ([]Change, error) {
	var env snsEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: SNS envelope: %v", ErrUnknownFormat, err)
	}
	switch env.Type {
	case "Notification":
		changes, err := decode([]byte(env.Message), depth+1)
		if err != nil {
			return nil, fmt.Errorf("SNS message %s: %w", env.MessageID, err)
		}
		return changes, nil
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		return nil, fmt.Errorf("%w: topic %s", ErrSubscriptionConfirmation, env.TopicArn)
	}
	return nil, fmt.Errorf("%w: SNS message type %.40q", ErrUnknownFormat, env.Type)
}

// ebEvent is an Amazon EventBridge event from S3 (source "aws.s3").
type ebEvent struct {
	ID         string `json:"id"`
	DetailType string `json:"detail-type"`
	Source     string `json:"source"`
	Time       string `json:"time"`
	Detail     struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       string `json:"key"`
			Size      int64  `json:"size"`
			ETag      string `json:"etag"`
			VersionID string `json:"version-id"`
			Sequencer string `json:"sequencer"`
		} `json:"object"`
		Reason       string `json:"reason"`
		DeletionType string `json:"deletion-type"`
	} `json:"detail"`
}

func decodeEventBridge(body []byte) ([]Change, error) {
	var ev ebEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: EventBridge event: %v", ErrUnknownFormat, err)
	}
	if ev.Source != "aws.s3" {
		return nil, fmt.Errorf("%w: EventBridge event from %.40q", ErrUnknownFormat, ev.Source)
	}
	var op string
	switch ev.DetailType {
	case "Object Created":
		op = OpCreated
	case "Object Deleted":
		op = OpDeleted
	default: // Object Restore *, Object Tags *, Object ACL Updated, Object Storage Class Changed, …
		return nil, nil
	}
	// EventBridge keys are not URL-encoded (unlike S3 event records).
	key := ev.Detail.Object.Key
	if ev.Detail.Bucket.Name == "" || key == "" {
		return nil, fmt.Errorf("notify: EventBridge %s event %s without bucket or key", ev.DetailType, ev.ID)
	}
	if isFolder(key) {
		return nil, nil
	}
	t, err := parseTime("EventBridge", ev.Time)
	if err != nil {
		return nil, err
	}
	c := Change{
		Provider: ProviderS3,
		Bucket:   ev.Detail.Bucket.Name,
		Key:      key,
		ETag:     strings.Trim(ev.Detail.Object.ETag, `"`),
		Version:  ev.Detail.Object.VersionID,
		Op:       op,
		Time:     t,
		EventID:  ev.ID,
	}
	if op == OpCreated {
		c.Size = ev.Detail.Object.Size
	}
	return []Change{c}, nil
}
