package events_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/yuxi-serverless/yuxi/events"
)

func compile(t *testing.T, eventType string) *jsonschema.Schema {
	t.Helper()
	raw, err := events.Schema(eventType)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("schema %s is not JSON: %v", eventType, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(eventType+".json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(eventType + ".json")
	if err != nil {
		t.Fatalf("compile schema %s: %v", eventType, err)
	}
	return s
}

func decodeAny(t *testing.T, typ string, data []byte) events.Payload {
	t.Helper()
	var (
		p   events.Payload
		err error
	)
	switch typ {
	case events.TypeStepReady:
		p, err = events.Decode[events.StepReady](data)
	case events.TypeToolCallRequested:
		p, err = events.Decode[events.ToolCallRequested](data)
	case events.TypeRunFinished:
		p, err = events.Decode[events.RunFinished](data)
	case events.TypeSweepRequested:
		p, err = events.Decode[events.SweepRequested](data)
	case events.TypeDocumentUploaded:
		p, err = events.Decode[events.DocumentUploaded](data)
	case events.TypeDocumentParsed:
		p, err = events.Decode[events.DocumentParsed](data)
	case events.TypeDocumentIndexed:
		p, err = events.Decode[events.DocumentIndexed](data)
	case events.TypeBucketObjectChanged:
		p, err = events.Decode[events.BucketObjectChanged](data)
	case events.TypeGCSObjectFinalized, events.TypeGCSObjectDeleted:
		p, err = events.Decode[events.GCSObject](data)
	case events.TypeEvaluationBatchReady:
		p, err = events.Decode[events.EvaluationBatchReady](data)
	case events.TypeEvaluationTick:
		p, err = events.Decode[events.EvaluationTick](data)
	case events.TypeEvaluationRegressed:
		p, err = events.Decode[events.EvaluationRegressed](data)
	case events.TypeDatasetBatchReady:
		p, err = events.Decode[events.DatasetBatchReady](data)
	default:
		t.Fatalf("fixture of unknown type %s", typ)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every fixture is a valid structured-mode CloudEvent whose data matches its
// schema, decodes into its typed payload, and re-encodes to the same event.
func TestFixturesRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev cloudevents.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: not a CloudEvent: %v", f, err)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("%s: invalid CloudEvent: %v", f, err)
		}
		seen[ev.Type()] = true
		var data any
		if err := json.Unmarshal(ev.Data(), &data); err != nil {
			t.Fatal(err)
		}
		if err := compile(t, ev.Type()).Validate(data); err != nil {
			t.Fatalf("%s: data does not match schema: %v", f, err)
		}
		p := decodeAny(t, ev.Type(), ev.Data())
		if _, external := p.(events.Lenient); external {
			continue // another party's event: it decodes; its envelope is theirs
		}
		tp, _ := ev.Extensions()[events.ExtTraceparent].(string)
		again, err := events.New(ev.Source(), ev.ID(), p, tp)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(ev)
		b, _ := json.Marshal(again)
		var am, bm map[string]any
		_ = json.Unmarshal(a, &am)
		_ = json.Unmarshal(b, &bm)
		if !jsonEqual(am, bm) {
			t.Errorf("%s: round trip differs:\n fixture %s\n rebuilt %s", f, a, b)
		}
	}
	for _, typ := range events.Types() {
		if !seen[typ] {
			t.Errorf("no fixture for %s", typ)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestSchemasRejectBadPayloads(t *testing.T) {
	cases := []struct {
		typ  string
		data string
	}{
		{events.TypeStepReady, `{"run_id":"r","thread_id":"t"}`},
		{events.TypeStepReady, `{"run_id":"r","thread_id":"t","step_no":0}`},
		{events.TypeStepReady, `{"run_id":"r","thread_id":"t","step_no":1,"extra":true}`},
		{events.TypeToolCallRequested, `{"run_id":"r","thread_id":"t","step_no":1,"tool_call_id":""}`},
		{events.TypeRunFinished, `{"run_id":"r","thread_id":"t","uid":"u","agent_slug":"a","status":"running"}`},
		{events.TypeSweepRequested, `{"reason":5}`},
		{events.TypeDocumentUploaded, `{"kb_id":"k"}`},
		{events.TypeBucketObjectChanged, `{"provider":"ftp","bucket":"b","key":"k","op":"created"}`},
		{events.TypeBucketObjectChanged, `{"provider":"s3","bucket":"b","key":"k","op":"renamed"}`},
		{events.TypeGCSObjectFinalized, `{"bucket":"b"}`},
		{events.TypeEvaluationBatchReady, `{"run_id":"r","batch":-1}`},
		{events.TypeEvaluationTick, `{"time":"yesterday"}`},
		{events.TypeDatasetBatchReady, `{"dataset_id":""}`},
	}
	for _, c := range cases {
		var data any
		if err := json.Unmarshal([]byte(c.data), &data); err != nil {
			t.Fatal(err)
		}
		if err := compile(t, c.typ).Validate(data); err == nil {
			t.Errorf("%s accepted invalid data %s", c.typ, c.data)
		}
	}
}

func TestDecodeRejectsUnknownFields(t *testing.T) {
	if _, err := events.Decode[events.StepReady]([]byte(`{"run_id":"r","thread_id":"t","step_no":1,"x":1}`)); err == nil {
		t.Fatal("unknown field accepted")
	}
}

func TestNewSetsExtensions(t *testing.T) {
	ev, err := events.New(events.Source("agent-step"), "id1", events.StepReady{RunID: "r1", ThreadID: "t1", StepNo: 3}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Extensions()[events.ExtRunID] != "r1" || ev.Extensions()[events.ExtThreadID] != "t1" {
		t.Fatalf("extensions not set: %v", ev.Extensions())
	}
	if ev.Type() != events.TypeStepReady || ev.Source() != "/yuxi/agent-step" {
		t.Fatalf("bad type/source: %s %s", ev.Type(), ev.Source())
	}
}

func TestLenientPayloadsIgnoreUnknownFields(t *testing.T) {
	o, err := events.Decode[events.GCSObject]([]byte(`{"bucket":"b","name":"n","kmsKeyName":"x","metadata":{"a":"b"}}`))
	if err != nil || o.Bucket != "b" || o.Name != "n" {
		t.Fatalf("%+v %v", o, err)
	}
}
