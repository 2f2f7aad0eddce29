package faas_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// keysTranslator reads a made-up foreign format — {"Records":[{"eventSource":
// "aws:s3","key":…}]}, or an EventBridge event {"detail-type":"Object
// Created","detail":{"key":…}} — and turns each key into a StepReady for the
// run named by the key. A record without a key is malformed.
func keysTranslator(t *testing.T) faas.Translator {
	return func(raw []byte) ([]cloudevents.Event, bool, error) {
		var p struct {
			Records []struct {
				EventSource string  `json:"eventSource"`
				Key         *string `json:"key"`
			} `json:"Records"`
			Event      string `json:"Event"`
			DetailType string `json:"detail-type"`
			Detail     struct {
				Key string `json:"key"`
			} `json:"detail"`
		}
		if json.Unmarshal(raw, &p) != nil {
			return nil, false, nil
		}
		var keys []string
		switch {
		case p.DetailType == "Object Created":
			keys = []string{p.Detail.Key}
		case len(p.Records) > 0 && p.Records[0].EventSource == "aws:s3":
			for _, r := range p.Records {
				if r.Key == nil {
					return nil, true, errors.New("a record without a key")
				}
				keys = append(keys, *r.Key)
			}
		case p.Event == "s3:TestEvent":
			return nil, true, nil // a test notification: nothing to do
		default:
			return nil, false, nil
		}
		var out []cloudevents.Event
		for i, k := range keys {
			out = append(out, stepEvent(t, fmt.Sprintf("s3-%s-%d", k, i), k))
		}
		return out, true, nil
	}
}

func s3Records(keys ...string) string {
	var recs []string
	for _, k := range keys {
		recs = append(recs, fmt.Sprintf(`{"eventSource":"aws:s3","key":%q}`, k))
	}
	return `{"Records":[` + strings.Join(recs, ",") + `]}`
}

// TestLambdaTranslatesForeignPayloads: S3 records invoking the function
// directly, an EventBridge S3 event (directly and through SQS) and S3 records
// in an SQS body reach the handlers through the router's translator; what the
// translator does not know is still refused, and without a translator nothing
// changes.
func TestLambdaTranslatesForeignPayloads(t *testing.T) {
	t.Parallel()
	objectCreated := `{"version":"0","id":"eb-1","detail-type":"Object Created","source":"aws.s3","time":"2026-11-30T10:00:00Z","detail":{"key":"run_ok_eb"}}`

	direct := []struct {
		name    string
		payload string
		outcome string // "" means: an error (Lambda retries)
		handled []string
	}{
		{"S3 records", s3Records("run_ok_1", "run_ok_2"), "ack", []string{"run_ok_1", "run_ok_2"}},
		{"S3 records, one permanent", s3Records("run_perm_1", "run_ok_3"), "permanent_failure", []string{"run_perm_1", "run_ok_3"}},
		{"S3 records, one to retry", s3Records("run_ok_4", "run_retry_1", "run_ok_5"), "", []string{"run_ok_4", "run_retry_1"}},
		{"S3 record without key", `{"Records":[{"eventSource":"aws:s3"}]}`, "malformed", nil},
		{"test notification", `{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"acme-drop"}`, "ack", nil},
		{"EventBridge Object Created", objectCreated, "ack", []string{"run_ok_eb"}},
	}
	for _, tc := range direct {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn := newScripted(t)
			fn.router.Translate(keysTranslator(t))
			out, err := faas.LambdaHandler(fn.router)(t.Context(), json.RawMessage(tc.payload))
			if tc.outcome == "" {
				if err == nil || !strings.Contains(err.Error(), errTransient.Error()) {
					t.Fatalf("err = %v, want the handler's transient error", err)
				}
			} else if rep, ok := out.(faas.LambdaReport); err != nil || !ok || rep.Outcome != tc.outcome {
				t.Fatalf("result = %#v, %v; want outcome %s", out, err, tc.outcome)
			}
			if got := fn.called(); !slices.Equal(got, tc.handled) {
				t.Errorf("handler calls = %v, want %v", got, tc.handled)
			}
		})
	}

	t.Run("SQS bodies", func(t *testing.T) {
		t.Parallel()
		fn := newScripted(t)
		fn.router.Translate(keysTranslator(t))
		sqs := func(id, body string) map[string]any {
			return map[string]any{"messageId": id, "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:eu-west-1:1:doc-parse", "body": body}
		}
		batch, _ := json.Marshal(map[string]any{"Records": []any{
			sqs("m-records", s3Records("run_ok_sqs")),
			sqs("m-eb", strings.Replace(objectCreated, "run_ok_eb", "run_ok_sqs_eb", 1)),
			sqs("m-retry", s3Records("run_retry_sqs")),
			sqs("m-bad", `{"Records":[{"eventSource":"aws:s3"}]}`),
			sqs("m-unknown", `{"what":"ever"}`),
		}})
		out, err := faas.LambdaHandler(fn.router)(t.Context(), batch)
		if err != nil {
			t.Fatal(err)
		}
		if got := failedIDs(t, out); !slices.Equal(got, []string{"m-retry"}) {
			t.Errorf("retried %v, want [m-retry]", got)
		}
		if got := fn.called(); !slices.Equal(got, []string{"run_ok_sqs", "run_ok_sqs_eb", "run_retry_sqs"}) {
			t.Errorf("handler calls = %v", got)
		}
		for _, id := range []string{"m-bad", "m-unknown"} {
			if _, ok := fn.rec.find(id); !ok {
				t.Errorf("message %s was not recorded as malformed; recorded %v", id, fn.rec.ids())
			}
		}
	})

	t.Run("unknown to the translator", func(t *testing.T) {
		t.Parallel()
		fn := newScripted(t)
		fn.router.Translate(keysTranslator(t))
		for _, payload := range []string{`{}`, `{"foo":"bar"}`, `{"Records":[{"EventSource":"aws:sns","Sns":{"Message":"{}"}}]}`} {
			if out, err := faas.LambdaHandler(fn.router)(t.Context(), json.RawMessage(payload)); err == nil {
				t.Errorf("payload %s: %#v, want an error", payload, out)
			}
		}
		if got := fn.called(); len(got) != 0 {
			t.Errorf("handler calls = %v", got)
		}
	})
}
