// Package events is the contract between functions: CloudEvents type
// constants, typed payloads, their JSON Schemas and fixtures.
//
// Types are reverse-DNS, past tense and versioned (io.yuxi.<noun>.<verb-past>.v1);
// a breaking payload change is a new type. Payloads carry ids, never large data.
// Extensions: runid, threadid and W3C traceparent/tracestate. source + id is the
// idempotency key of an event; handlers must tolerate duplicates and reordering.
//
// Imported by: shared/* and functions/*. May import: the standard library and
// the CloudEvents SDK only.
package events

import (
	"embed"
	"fmt"
)

// Event types.
const (
	// TypeStepReady asks agent-step to run one model turn of a run.
	TypeStepReady = "io.yuxi.agent.step.ready.v1"
	// TypeToolCallRequested asks tool-invoke to run exactly one tool call.
	TypeToolCallRequested = "io.yuxi.tool.call.requested.v1"
	// TypeRunFinished tells the dispatcher a run reached a terminal status.
	TypeRunFinished = "io.yuxi.run.finished.v1"
	// TypeSweepRequested asks the dispatcher to run its recovery sweeps.
	TypeSweepRequested = "io.yuxi.dispatcher.sweep.requested.v1"
	// TypeKnativePing is the fixed type of a Knative PingSource event; the
	// dispatcher treats it as TypeSweepRequested.
	TypeKnativePing = "dev.knative.sources.ping"

	// TypeDocumentUploaded asks doc-parse to turn a stored file into Markdown.
	TypeDocumentUploaded = "io.yuxi.document.uploaded.v1"
	// TypeDocumentParsed asks kb-index to chunk, embed and index a parsed file.
	TypeDocumentParsed = "io.yuxi.document.parsed.v1"
	// TypeDocumentIndexed tells kb-graph that a file's chunks were committed
	// (kb-index emits it in the commit's transaction).
	TypeDocumentIndexed = "io.yuxi.document.indexed.v1"
	// TypeBucketObjectChanged: an object was created or deleted in a bucket
	// bound to knowledge bases (decoded from S3/MinIO/GCS notifications).
	TypeBucketObjectChanged = "io.yuxi.bucket.object.changed.v1"

	// External types doc-parse accepts directly from cloud event routers.
	TypeGCSObjectFinalized = "google.cloud.storage.object.v1.finalized"
	TypeGCSObjectDeleted   = "google.cloud.storage.object.v1.deleted"
)

// CloudEvents extension attribute names.
const (
	ExtRunID       = "runid"
	ExtThreadID    = "threadid"
	ExtTraceparent = "traceparent"
	ExtTracestate  = "tracestate"
)

// Payload is implemented by every event payload.
type Payload interface {
	EventType() string
}

// Correlated payloads name the run and thread they belong to; producers copy
// them into the runid/threadid extensions so brokers can filter and trace.
type Correlated interface {
	Correlation() (runID, threadID string)
}

// StepReady: run step StepNo of RunID is ready to execute (its inputs are committed).
type StepReady struct {
	RunID    string `json:"run_id"`
	ThreadID string `json:"thread_id"`
	StepNo   int    `json:"step_no"`
}

func (StepReady) EventType() string               { return TypeStepReady }
func (e StepReady) Correlation() (string, string) { return e.RunID, e.ThreadID }

// ToolCallRequested: run the tool call ToolCallID recorded by step StepNo.
// ToolCallID is the idempotency key tools with side effects deduplicate on.
type ToolCallRequested struct {
	RunID    string `json:"run_id"`
	ThreadID string `json:"thread_id"`
	// StepNo is the step whose turn made the call; 0 for the calls a
	// resume approved (tool approval), which run before its step 1.
	StepNo     int    `json:"step_no"`
	ToolCallID string `json:"tool_call_id"`
}

func (ToolCallRequested) EventType() string               { return TypeToolCallRequested }
func (e ToolCallRequested) Correlation() (string, string) { return e.RunID, e.ThreadID }

// RunFinished: a run reached a terminal status (completed, failed, cancelled, interrupted).
type RunFinished struct {
	RunID     string `json:"run_id"`
	ThreadID  string `json:"thread_id"`
	UID       string `json:"uid"`
	AgentSlug string `json:"agent_slug"`
	Status    string `json:"status"`
}

func (RunFinished) EventType() string               { return TypeRunFinished }
func (e RunFinished) Correlation() (string, string) { return e.RunID, e.ThreadID }

// DocumentUploaded: file FileID of knowledge base KBID is stored and waits to be parsed.
type DocumentUploaded struct {
	KBID   string `json:"kb_id"`
	FileID string `json:"file_id"`
}

func (DocumentUploaded) EventType() string { return TypeDocumentUploaded }

// DocumentParsed: file FileID of knowledge base KBID has Markdown and waits to be indexed.
type DocumentParsed struct {
	KBID   string `json:"kb_id"`
	FileID string `json:"file_id"`
}

func (DocumentParsed) EventType() string { return TypeDocumentParsed }

// DocumentIndexed: file FileID of knowledge base KBID has committed chunks
// (any version: the receiver reads the file's current chunks, so a stale
// or redelivered event is harmless).
type DocumentIndexed struct {
	KBID   string `json:"kb_id"`
	FileID string `json:"file_id"`
}

func (DocumentIndexed) EventType() string { return TypeDocumentIndexed }

// BucketObjectChanged: Op ("created" | "deleted") happened to Key in Bucket.
// Version (an S3 version id or ETag, a GCS generation) tells repeated
// notifications of the same object version apart from new versions.
type BucketObjectChanged struct {
	Provider string `json:"provider"`
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	Size     int64  `json:"size"`
	ETag     string `json:"etag,omitempty"`
	Version  string `json:"version,omitempty"`
	Op       string `json:"op"`
	Time     string `json:"time,omitempty"`
}

func (BucketObjectChanged) EventType() string { return TypeBucketObjectChanged }

// GCSObject is the data of Google Cloud Storage object events (the object
// resource; only the fields the platform reads are declared, the others are
// ignored: Google adds fields over time).
type GCSObject struct {
	Bucket      string `json:"bucket"`
	Name        string `json:"name"`
	Generation  string `json:"generation,omitempty"`
	Size        string `json:"size,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	ETag        string `json:"etag,omitempty"`
	Updated     string `json:"updated,omitempty"`
}

// EventType is the finalized type; the deleted type shares the payload.
func (GCSObject) EventType() string { return TypeGCSObjectFinalized }

// AllowUnknownFields marks a payload defined by another party.
func (GCSObject) AllowUnknownFields() {}

// SweepRequested: a scheduled tick; Reason is informational ("schedule", "startup").
type SweepRequested struct {
	Reason string `json:"reason,omitempty"`
}

func (SweepRequested) EventType() string { return TypeSweepRequested }

//go:embed schemas/*.json
var schemaFiles embed.FS

// Schema returns the JSON Schema of an event type's data.
func Schema(eventType string) ([]byte, error) {
	name, ok := schemaNames[eventType]
	if !ok {
		return nil, fmt.Errorf("no schema for event type %q", eventType)
	}
	return schemaFiles.ReadFile("schemas/" + name)
}

var schemaNames = map[string]string{
	TypeStepReady:            "agent.step.ready.v1.json",
	TypeToolCallRequested:    "tool.call.requested.v1.json",
	TypeRunFinished:          "run.finished.v1.json",
	TypeSweepRequested:       "dispatcher.sweep.requested.v1.json",
	TypeDocumentUploaded:     "document.uploaded.v1.json",
	TypeDocumentParsed:       "document.parsed.v1.json",
	TypeDocumentIndexed:      "document.indexed.v1.json",
	TypeBucketObjectChanged:  "bucket.object.changed.v1.json",
	TypeGCSObjectFinalized:   "gcs.object.v1.json",
	TypeGCSObjectDeleted:     "gcs.object.v1.json",
	TypeEvaluationBatchReady: "evaluation.batch.ready.v1.json",
	TypeEvaluationTick:       "evaluation.tick.v1.json",
	TypeEvaluationRegressed:  "evaluation.regressed.v1.json",
	TypeDatasetBatchReady:    "evaluation.dataset.batch.ready.v1.json",
}

// Types lists every event type this package defines a payload for.
func Types() []string {
	return []string{TypeStepReady, TypeToolCallRequested, TypeRunFinished, TypeSweepRequested,
		TypeDocumentUploaded, TypeDocumentParsed, TypeDocumentIndexed, TypeBucketObjectChanged, TypeGCSObjectFinalized, TypeGCSObjectDeleted,
		TypeEvaluationBatchReady, TypeDatasetBatchReady, TypeEvaluationTick, TypeEvaluationRegressed}
}
