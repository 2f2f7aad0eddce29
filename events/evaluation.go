package events

// Evaluation events: the evaluate function's batches, scheduler ticks and
// regression notices.
const (
	// TypeEvaluationBatchReady asks evaluate to evaluate one batch of a RAG
	// evaluation run (its earlier batches are committed).
	TypeEvaluationBatchReady = "io.yuxi.evaluation.batch.ready.v1"
	// TypeEvaluationTick is a scheduler tick: evaluate starts the evaluations
	// whose schedule is due at Time. Every scheduler delivers it (the local
	// runner's ticker, a Knative PingSource, EventBridge Scheduler, Cloud
	// Scheduler over Pub/Sub); all of its fields are optional so that a
	// scheduler with a fixed body needs no templating.
	TypeEvaluationTick = "io.yuxi.evaluation.tick.v1"
	// TypeEvaluationRegressed tells subscribers that a gated run scored below
	// its baseline by more than the gate's tolerance.
	TypeEvaluationRegressed = "io.yuxi.evaluation.regressed.v1"
	// TypeDatasetBatchReady asks evaluate to generate one batch of items of a
	// benchmark dataset generated from a knowledge base.
	TypeDatasetBatchReady = "io.yuxi.evaluation.dataset.batch.ready.v1"
)

// EvaluationBatchReady: batch Batch (0-based) of evaluation run RunID is due.
// A batch whose number is not the run's next batch is a no-op.
type EvaluationBatchReady struct {
	RunID string `json:"run_id"`
	Batch int    `json:"batch"`
}

func (EvaluationBatchReady) EventType() string { return TypeEvaluationBatchReady }

// EvaluationTick: a scheduler fired. Time (RFC 3339) is the tick's scheduled
// time; without it the receiver takes its own clock. Reason is informational.
type EvaluationTick struct {
	Time   string `json:"time,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (EvaluationTick) EventType() string { return TypeEvaluationTick }

// EvaluationRegressed: run RunID of schedule ScheduleID scored Value on
// Metric against Baseline (from run BaselineRunID, or pinned) with Tolerance.
// The run is a RAG run of knowledge base KBID or a run of agent evaluation
// suite SuiteID.
type EvaluationRegressed struct {
	RunID         string  `json:"run_id"`
	ScheduleID    string  `json:"schedule_id"`
	KBID          string  `json:"kb_id,omitempty"`
	SuiteID       string  `json:"suite_id,omitempty"`
	Metric        string  `json:"metric"`
	Value         float64 `json:"value"`
	Baseline      float64 `json:"baseline"`
	BaselineRunID string  `json:"baseline_run_id,omitempty"`
	Tolerance     float64 `json:"tolerance"`
}

func (EvaluationRegressed) EventType() string { return TypeEvaluationRegressed }

// DatasetBatchReady: batch Batch (0-based) of the generation of dataset
// DatasetID is due. A batch that is not the generation's next is a no-op.
type DatasetBatchReady struct {
	DatasetID string `json:"dataset_id"`
	Batch     int    `json:"batch"`
}

func (DatasetBatchReady) EventType() string { return TypeDatasetBatchReady }
