// Package task is the task centre (/api/tasks): the background work the
// platform runs, as the original's Tasker showed it — ingestion batches,
// evaluation runs, generated evaluation datasets, knowledge-graph builds —
// and, beyond it, agent evaluation suite runs, read from the tables their
// owning packages already keep. It is a read model, not a second writer:
// knowledge_files (shared/kb) and evaluation_runs / evaluation_datasets /
// evaluation_suite_runs (shared/evaluation) are only read here, graph builds
// come from their owner (graph.Builder.Progress); cancelling asks the owner
// (kb.Store.CancelBatch, evaluation.Service.CancelRun / CancelGeneration; a
// graph build cannot be stopped). It owns task_dismissals: DELETE of a
// finished task records that the task is no longer listed.
//
// A knowledge task is visible to an admin who may read its knowledge base
// (as the original's admin-only task routes): an admin of another
// department sees none of it. Cancel and delete need manage rights on it.
// A suite run is its owner's alone (any user: the list and the single task
// are user routes), with its gate status — a scheduled run that regressed
// says so in its message.
//
// Owns the table task_dismissals; reads knowledge_files, knowledge_bases
// (through KBs), evaluation_runs, evaluation_datasets, evaluation_suite_runs.
// Imported by: functions/intake, shared/bootstrap/identity, tests.
// May import: shared/access, shared/failure, shared/graph, shared/kb, pgx.
package task

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// Task types (the original's names where it had one).
const (
	TypeIngest     = "knowledge_ingest"
	TypeEvaluation = "rag_evaluation"
	TypeGeneration = "dataset_generation"
	TypeGraphBuild = "knowledge_graph_build"
	TypeSuiteRun   = "agent_evaluation" // beyond the original: a run of an agent evaluation suite
)

// Statuses, as the original's Tasker.
const (
	Pending   = "pending"
	Running   = "running"
	Success   = "success"
	Failed    = "failed"
	Cancelled = "cancelled"
)

var statuses = []string{Pending, Running, Success, Failed, Cancelled}

// Terminal reports whether a task in status s is finished.
func Terminal(s string) bool { return s == Success || s == Failed || s == Cancelled }

// Task is one task as the original answers it (payload and result only in
// the single-task answer).
type Task struct {
	ID              string     `json:"id"`
	Name            string     `json:"name"`
	Type            string     `json:"type"`
	Status          string     `json:"status"`
	Progress        float64    `json:"progress"`
	Message         string     `json:"message"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	StartedAt       *time.Time `json:"started_at"`
	CompletedAt     *time.Time `json:"completed_at"`
	Payload         any        `json:"payload,omitempty"`
	Result          any        `json:"result,omitempty"`
	Error           *string    `json:"error"`
	CancelRequested bool       `json:"cancel_requested"`
	KBID            string     `json:"kb_id"`
	CreatedBy       string     `json:"created_by"`
	// GateStatus is a scheduled evaluation run's gate verdict (passed |
	// regressed), also in the list (beyond the original).
	GateStatus *string `json:"gate_status,omitempty"`
}

// Summary is the list's summary block.
type Summary struct {
	Total         int            `json:"total"`
	FilteredTotal int            `json:"filtered_total"`
	StatusCounts  map[string]int `json:"status_counts"`
	TypeCounts    map[string]int `json:"type_counts"`
}

// List is GET /api/tasks.
type List struct {
	Tasks   []Task  `json:"tasks"`
	Summary Summary `json:"summary"`
}

// KBs are the knowledge bases a subject may see, and the owner of ingestion
// batches (kb.Store).
type KBs interface {
	List(ctx context.Context, sub access.Subject) ([]kb.KB, error)
	CancelBatch(ctx context.Context, kbID, batch string) (int, error)
}

// Evaluations is the owner of evaluation runs and generated datasets
// (evaluation.Service): asked to stop them at their next batch boundary.
type Evaluations interface {
	CancelRun(ctx context.Context, runID string) (bool, error)
	CancelGeneration(ctx context.Context, taskID string) (bool, error)
}

// GraphBuilds is the owner of knowledge-graph builds (graph.Builder).
type GraphBuilds interface {
	Progress(ctx context.Context, kbIDs []string) ([]graph.BuildProgress, error)
}

// Store answers the task routes.
type Store struct {
	pool   *pgxpool.Pool
	kbs    KBs
	evals  Evaluations // nil: evaluation tasks are not cancellable
	graphs GraphBuilds // nil: graph builds are not listed
}

// New returns the task centre over pool; With gives it the KBs.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// With returns a copy of s that asks kbs for visibility and cancels.
func (s *Store) With(kbs KBs) *Store {
	c := *s
	c.kbs = kbs
	return &c
}

// WithOwners returns a copy of s that asks evals to stop evaluation runs
// and generations, and lists graph builds from graphs (either may be nil).
func (s *Store) WithOwners(evals Evaluations, graphs GraphBuilds) *Store {
	c := *s
	c.evals, c.graphs = evals, graphs
	return &c
}

// window bounds how many recent tasks of each kind a list reads (and its
// summary counts): the original kept at most 200 finished tasks.
const window = 500

// ErrNotFound is 404 task_not_found: no such task, or not visible to the caller.
var ErrNotFound = failure.NotFound("task_not_found", "Task not found")

// levels maps the KBs sub may read to sub's level on each: none for a
// plain user (knowledge tasks are admin work, as the original's).
func (s *Store) levels(ctx context.Context, sub access.Subject) (map[string]access.Level, []string, error) {
	if sub.Role != "admin" && sub.Role != "superadmin" {
		return map[string]access.Level{}, nil, nil
	}
	list, err := s.kbs.List(ctx, sub)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]access.Level, len(list))
	ids := make([]string, 0, len(list))
	for _, k := range list {
		l := access.Read
		if k.Permission == access.Manage.String() {
			l = access.Manage
		}
		out[k.KBID] = l
		ids = append(ids, k.KBID)
	}
	return out, ids, nil
}

// ListTasks is GET /api/tasks?status=&limit= (limit 1..100, default 100).
func (s *Store) ListTasks(ctx context.Context, sub access.Subject, status string, limit int) (List, error) {
	if status != "" && !contains(statuses, status) {
		return List{}, failure.Unprocessable("invalid_status", "status must be one of %s", strings.Join(statuses, ", "))
	}
	if limit < 1 || limit > 100 {
		return List{}, failure.Unprocessable("invalid_limit", "limit must be between 1 and 100")
	}
	_, ids, err := s.levels(ctx, sub)
	if err != nil {
		return List{}, err
	}
	all, err := s.load(ctx, ids, "")
	if err != nil {
		return List{}, err
	}
	own, err := s.suiteRuns(ctx, sub.UID, "")
	if err != nil {
		return List{}, err
	}
	all = append(all, own...)
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID > all[j].ID
	})
	out := List{Tasks: []Task{}, Summary: Summary{Total: len(all), StatusCounts: map[string]int{}, TypeCounts: map[string]int{}}}
	for _, t := range all {
		out.Summary.StatusCounts[t.Status]++
		out.Summary.TypeCounts[t.Type]++
		if status != "" && t.Status != status {
			continue
		}
		out.Summary.FilteredTotal++
		if len(out.Tasks) < limit {
			t.Payload, t.Result = nil, nil
			out.Tasks = append(out.Tasks, t)
		}
	}
	return out, nil
}

// Get is GET /api/tasks/{task_id}: the task with its payload and result.
func (s *Store) Get(ctx context.Context, sub access.Subject, id string) (Task, error) {
	t, _, err := s.get(ctx, sub, id)
	return t, err
}

func (s *Store) get(ctx context.Context, sub access.Subject, id string) (Task, access.Level, error) {
	if strings.HasPrefix(id, "srun_") { // a suite run: its owner's, who manages it
		list, err := s.suiteRuns(ctx, sub.UID, id)
		if err != nil || len(list) == 0 {
			return Task{}, access.None, orNotFound(err)
		}
		return list[0], access.Manage, nil
	}
	lv, ids, err := s.levels(ctx, sub)
	if err != nil {
		return Task{}, access.None, err
	}
	list, err := s.load(ctx, ids, id)
	if err != nil {
		return Task{}, access.None, err
	}
	if len(list) == 0 {
		return Task{}, access.None, ErrNotFound
	}
	t := list[0]
	return t, lv[t.KBID], nil
}

// Cancel is POST /api/tasks/{task_id}/cancel: it asks the task's owner to
// stop. An ingestion batch's files that have not started their next stage
// start none (they keep their status: uploaded, or parsed); running stages
// finish. An evaluation run or a dataset generation finishes the batch in
// flight and stops at that boundary, recording cancelled. A graph build
// cannot be stopped (400 graph_build_not_cancellable: reset the graph
// instead); finished tasks and tasks already cancelling are 400
// task_not_cancellable.
func (s *Store) Cancel(ctx context.Context, sub access.Subject, id string) error {
	t, lv, err := s.get(ctx, sub, id)
	if err != nil {
		return err
	}
	if lv < access.Manage {
		return failure.Forbidden("task_manage_forbidden", "you may not manage this task")
	}
	if t.Type == TypeGraphBuild {
		return failure.Invalid("graph_build_not_cancellable",
			"a knowledge-graph build cannot be stopped; POST /api/graph/…/graph-build/reset removes the graph and its progress")
	}
	if Terminal(t.Status) || t.CancelRequested {
		return errNotCancellable
	}
	var ok bool
	switch {
	case t.Type == TypeIngest:
		n, err := s.kbs.CancelBatch(ctx, t.KBID, t.ID)
		if err != nil {
			return err
		}
		ok = n > 0
	case s.evals == nil:
	case t.Type == TypeEvaluation:
		ok, err = s.evals.CancelRun(ctx, t.ID)
	case t.Type == TypeGeneration:
		ok, err = s.evals.CancelGeneration(ctx, t.ID)
	}
	if err != nil {
		return err
	}
	if !ok {
		return errNotCancellable // finished (or cancelled) since it was read
	}
	return nil
}

var errNotCancellable = failure.Invalid("task_not_cancellable", "Task cannot be cancelled")

// Delete is DELETE /api/tasks/{task_id}: a finished task's record leaves
// the list (409 task_not_finished while it runs). The work it did — files,
// runs, datasets — stays with its owner.
func (s *Store) Delete(ctx context.Context, sub access.Subject, id string) error {
	t, lv, err := s.get(ctx, sub, id)
	if err != nil {
		return err
	}
	if lv < access.Manage {
		return failure.Forbidden("task_manage_forbidden", "you may not manage this task")
	}
	if !Terminal(t.Status) {
		return failure.Conflict("task_not_finished", "only a finished task can be deleted; cancel it first")
	}
	// A graph build keeps its id across builds: a dismissal hides it until
	// the graph changes again (dismissed_at is compared with its last change).
	_, err = s.pool.Exec(ctx, `INSERT INTO task_dismissals (task_id, dismissed_by) VALUES ($1, $2)
		ON CONFLICT (task_id) DO UPDATE SET dismissed_by = EXCLUDED.dismissed_by, dismissed_at = now()`, id, sub.UID)
	return err
}

// load reads the tasks of kbIDs (only task id when one is given), not dismissed.
func (s *Store) load(ctx context.Context, kbIDs []string, id string) ([]Task, error) {
	if len(kbIDs) == 0 {
		return nil, nil
	}
	var out []Task
	names, err := s.kbNames(ctx, kbIDs)
	if err != nil {
		return nil, err
	}
	if id == "" || kb.IsBatchID(id) {
		ts, err := s.batches(ctx, kbIDs, id, names)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	if id == "" || strings.HasPrefix(id, "run_") {
		ts, err := s.evalRuns(ctx, kbIDs, id)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	if id == "" || strings.HasPrefix(id, "task_") {
		ts, err := s.generations(ctx, kbIDs, id)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	if s.graphs != nil && (id == "" || strings.HasPrefix(id, graphTaskPrefix)) {
		ts, err := s.graphBuilds(ctx, kbIDs, id, names)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

func (s *Store) kbNames(ctx context.Context, kbIDs []string) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT kb_id, name FROM knowledge_bases WHERE kb_id = ANY($1)`, kbIDs)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = name
	}
	return out, rows.Err()
}

// batches reads ingestion batches from their files' statuses.
func (s *Store) batches(ctx context.Context, kbIDs []string, id string, names map[string]string) ([]Task, error) {
	rows, err := s.pool.Query(ctx, `SELECT f.ingest_batch, f.kb_id, count(*),
		count(*) FILTER (WHERE f.status IN ('indexed', 'error_parsing', 'error_indexing')
			OR (f.status = 'parsed' AND coalesce(f.processing_params->>'auto_index', 'true') <> 'true')),
		count(*) FILTER (WHERE f.status IN ('error_parsing', 'error_indexing')),
		count(*) FILTER (WHERE f.status IN ('parsing', 'indexing')),
		count(*) FILTER (WHERE f.status = 'uploaded'),
		bool_or(f.ingest_cancelled_at IS NOT NULL),
		min(f.created_at), max(f.updated_at), min(f.stage_started_at), coalesce(min(f.created_by), ''),
		json_agg(json_build_object('file_id', f.file_id, 'filename', f.filename, 'status', f.status, 'error', f.error_message) ORDER BY f.filename)
		FROM knowledge_files f
		WHERE f.kb_id = ANY($1) AND f.ingest_batch IS NOT NULL AND NOT f.is_folder AND ($2 = '' OR f.ingest_batch = $2)
		  AND NOT EXISTS (SELECT 1 FROM task_dismissals d WHERE d.task_id = f.ingest_batch)
		GROUP BY f.ingest_batch, f.kb_id ORDER BY min(f.created_at) DESC LIMIT $3`, kbIDs, id, window)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var t Task
		var total, done, failedN, running, uploaded int
		var cancelled bool
		var started *time.Time
		var items json.RawMessage
		if err := rows.Scan(&t.ID, &t.KBID, &total, &done, &failedN, &running, &uploaded, &cancelled, &t.CreatedAt, &t.UpdatedAt,
			&started, &t.CreatedBy, &items); err != nil {
			return nil, err
		}
		t.Type, t.Name = TypeIngest, fmt.Sprintf("知识库文档处理 %s（%d 个文件）", names[t.KBID], total)
		t.Progress = float64(done) * 100 / float64(total)
		t.CancelRequested = cancelled
		switch {
		case cancelled && running == 0:
			t.Status, t.Message = Cancelled, "任务已取消"
		case cancelled:
			t.Status, t.Message = Running, "取消中：正在进行的阶段完成后停止"
		case done == total && failedN > 0:
			t.Status, t.Message = Failed, fmt.Sprintf("文件处理完成，失败 %d 个", failedN)
			msg := t.Message
			t.Error = &msg
		case done == total:
			t.Status, t.Message = Success, "任务已完成"
		case uploaded == total:
			t.Status, t.Message = Pending, "等待处理"
		default:
			t.Status, t.Message = Running, fmt.Sprintf("已完成 %d/%d", done, total)
		}
		if t.Status != Pending {
			st := t.CreatedAt
			if started != nil && started.Before(st) {
				st = *started
			}
			t.StartedAt = &st
		}
		if Terminal(t.Status) {
			c := t.UpdatedAt
			t.CompletedAt = &c
		}
		t.Payload = map[string]any{"kb_id": t.KBID}
		t.Result = map[string]any{"total": total, "completed": done, "failed": failedN, "items": items}
		out = append(out, t)
	}
	return out, rows.Err()
}

// evalRuns reads evaluation runs (status running | completed | failed).
func (s *Store) evalRuns(ctx context.Context, kbIDs []string, id string) ([]Task, error) {
	return s.runs(ctx, func(t *Task, kbID, name string, refs [2]*string) {
		t.KBID, t.Type, t.Name = kbID, TypeEvaluation, "RAG评估 "+name
		// refs[0] is dataset_id, NOT NULL.
		t.Payload = map[string]any{"kb_id": kbID, "dataset_id": *refs[0], "run_id": t.ID}
	}, `SELECT r.run_id, r.kb_id, r.name, r.status, r.total_items, r.completed_items,
		r.overall_score, r.metrics, r.started_at, r.completed_at, r.created_by, r.gate_status, r.gate, r.cancel_requested_at IS NOT NULL,
		r.dataset_id, NULL::text
		FROM evaluation_runs r
		WHERE r.kb_id = ANY($1) AND ($2 = '' OR r.run_id = $2)
		  AND NOT EXISTS (SELECT 1 FROM task_dismissals d WHERE d.task_id = r.run_id)
		ORDER BY r.started_at DESC LIMIT $3`, kbIDs, id, window)
}

// runs reads evaluation runs of either kind (RAG or agent suite) with
// query, whose columns are, in order: run id, scope (the run's KB or
// suite), name, status, total and completed items, overall score, metrics,
// started, completed, created by, gate status, gate, whether a cancel was
// asked, then two text columns of the kind's own (refs). describe sets each
// task's type, name and payload; status, times and result are the same for
// both kinds.
func (s *Store) runs(ctx context.Context, describe func(t *Task, scope, name string, refs [2]*string), query string, args ...any) ([]Task, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var t Task
		var scope, name, status string
		var total, completed int
		var score *float64
		var metrics, gate json.RawMessage
		var gateStatus *string
		var started time.Time
		var cancelAsked bool
		var refs [2]*string
		if err := rows.Scan(&t.ID, &scope, &name, &status, &total, &completed, &score, &metrics, &started,
			&t.CompletedAt, &t.CreatedBy, &gateStatus, &gate, &cancelAsked, &refs[0], &refs[1]); err != nil {
			return nil, err
		}
		describe(&t, scope, name, refs)
		t.runState(status, started, total, completed, metrics, gateStatus, cancelAsked)
		t.Result = map[string]any{"overall_score": score, "metrics": metrics, "gate_status": gateStatus, "gate": gate}
		out = append(out, t)
	}
	return out, rows.Err()
}

// runState sets an evaluation run's (RAG or suite) status, progress, times
// and message from its row: running | completed | cancelled | failed (a
// running one whose cancel was asked says it stops after its batch), and a
// scheduled run below its gate's baseline says it regressed.
func (t *Task) runState(status string, started time.Time, total, completed int, metrics json.RawMessage, gateStatus *string, cancelAsked bool) {
	t.CreatedAt, t.StartedAt, t.UpdatedAt = started, &started, started
	if t.CompletedAt != nil {
		t.UpdatedAt = *t.CompletedAt
	}
	if total > 0 {
		t.Progress = float64(completed) * 100 / float64(total)
	}
	switch status {
	case "completed":
		t.Status, t.Message, t.Progress = Success, "任务已完成", 100
	case "cancelled":
		t.Status, t.Message, t.CancelRequested = Cancelled, fmt.Sprintf("任务已取消（已评估 %d/%d）", completed, total), true
	case "failed":
		t.Status, t.Message = Failed, "任务执行失败"
		msg := "evaluation failed"
		var m map[string]any
		if json.Unmarshal(metrics, &m) == nil {
			if e, ok := m["error"].(string); ok && e != "" {
				msg = e
			}
		}
		t.Error = &msg
	case "running":
		if cancelAsked {
			t.Status, t.Message, t.CancelRequested = Running, "取消中：当前批次完成后停止", true
			break
		}
		fallthrough
	default:
		t.Status, t.Message = Running, fmt.Sprintf("已评估 %d/%d", completed, total)
	}
	t.GateStatus = gateStatus
	if gateStatus != nil && *gateStatus == "regressed" {
		t.Message = "任务已完成：指标回归（regressed）"
	}
}

// suiteRuns reads uid's agent evaluation suite runs (only run id when one
// is given), not dismissed.
func (s *Store) suiteRuns(ctx context.Context, uid, id string) ([]Task, error) {
	return s.runs(ctx, func(t *Task, suite, name string, refs [2]*string) {
		t.Type, t.Name = TypeSuiteRun, "智能体评估 "+name
		t.Payload = map[string]any{"suite_id": suite, "run_id": t.ID, "agent_slug": refs[0], "schedule_id": refs[1]}
	}, `SELECT r.run_id, r.suite_id, r.name, r.status, r.total_items, r.completed_items,
		r.overall_score, r.metrics, r.started_at, r.completed_at, r.created_by, r.gate_status, r.gate, false,
		r.config->>'agent_slug', r.schedule_id
		FROM evaluation_suite_runs r
		WHERE r.created_by = $1 AND ($2 = '' OR r.run_id = $2)
		  AND NOT EXISTS (SELECT 1 FROM task_dismissals d WHERE d.task_id = r.run_id)
		ORDER BY r.started_at DESC LIMIT $3`, uid, id, window)
}

func orNotFound(err error) error {
	if err != nil {
		return err
	}
	return ErrNotFound
}

// generations reads generated datasets' builds (build_metadata.status
// pending | running | completed | failed; task_id names the attempt).
func (s *Store) generations(ctx context.Context, kbIDs []string, id string) ([]Task, error) {
	rows, err := s.pool.Query(ctx, `SELECT x.build_metadata->>'task_id', x.kb_id, x.dataset_id, x.name,
		coalesce(x.build_metadata->>'status', 'pending'), coalesce((x.build_metadata->>'progress')::float8, 0),
		coalesce(x.build_metadata->>'message', ''), x.created_at, x.updated_at, x.created_by,
		coalesce((x.build_metadata->>'cancel_requested')::boolean, false)
		FROM evaluation_datasets x
		WHERE x.kb_id = ANY($1) AND x.build_metadata->>'source' = 'generated' AND x.build_metadata ? 'task_id'
		  AND ($2 = '' OR x.build_metadata->>'task_id' = $2)
		  AND NOT EXISTS (SELECT 1 FROM task_dismissals d WHERE d.task_id = x.build_metadata->>'task_id')
		ORDER BY x.created_at DESC LIMIT $3`, kbIDs, id, window)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var t Task
		var dataset, name, status string
		if err := rows.Scan(&t.ID, &t.KBID, &dataset, &name, &status, &t.Progress, &t.Message, &t.CreatedAt, &t.UpdatedAt, &t.CreatedBy,
			&t.CancelRequested); err != nil {
			return nil, err
		}
		t.Type, t.Name = TypeGeneration, "生成评估数据集 "+name
		switch status {
		case "completed":
			t.Status, t.Progress = Success, 100
		case "failed":
			t.Status = Failed
			msg := t.Message
			t.Error = &msg
		case "cancelled":
			t.Status = Cancelled
		case "running":
			t.Status = Running
		default:
			t.Status = Pending
		}
		if t.CancelRequested && !Terminal(t.Status) {
			t.Message = "取消中：当前批次完成后停止"
		}
		if t.Status != Pending {
			st := t.CreatedAt
			t.StartedAt = &st
		}
		if Terminal(t.Status) {
			c := t.UpdatedAt
			t.CompletedAt = &c
		}
		t.Payload = map[string]any{"kb_id": t.KBID, "dataset_id": dataset}
		out = append(out, t)
	}
	return out, rows.Err()
}

// graphTaskPrefix starts a graph build's task id: "graph_" + its KB's id
// (a knowledge base has one graph; its build is one task).
const graphTaskPrefix = "graph_"

// graphBuilds reads the graph builds of kbIDs from their owner; a dismissed
// build is listed again once its graph changes after the dismissal.
func (s *Store) graphBuilds(ctx context.Context, kbIDs []string, id string, names map[string]string) ([]Task, error) {
	if id != "" {
		kbID := strings.TrimPrefix(id, graphTaskPrefix)
		if !contains(kbIDs, kbID) {
			return nil, nil
		}
		kbIDs = []string{kbID}
	}
	builds, err := s.graphs.Progress(ctx, kbIDs)
	if err != nil || len(builds) == 0 {
		return nil, err
	}
	ids := make([]string, len(builds))
	for i, b := range builds {
		ids[i] = graphTaskPrefix + b.KBID
	}
	rows, err := s.pool.Query(ctx, `SELECT task_id, dismissed_at FROM task_dismissals WHERE task_id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	dismissed := map[string]time.Time{}
	for rows.Next() {
		var tid string
		var at time.Time
		if err := rows.Scan(&tid, &at); err != nil {
			rows.Close()
			return nil, err
		}
		dismissed[tid] = at
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []Task
	for i, b := range builds {
		if at, ok := dismissed[ids[i]]; ok && !b.UpdatedAt.After(at) {
			continue
		}
		t := Task{ID: ids[i], KBID: b.KBID, Type: TypeGraphBuild, Name: "知识图谱构建 " + names[b.KBID],
			CreatedAt: b.ConfiguredAt, UpdatedAt: b.UpdatedAt}
		if b.TotalChunks > 0 {
			t.Progress = float64(b.DoneChunks) * 100 / float64(b.TotalChunks)
		}
		switch b.Status {
		case "done":
			t.Status, t.Message, t.Progress = Success, "任务已完成", 100
		case "partial":
			t.Status, t.Message = Failed, fmt.Sprintf("抽取完成，失败 %d 个分块", b.FailedChunks)
			msg := t.Message
			t.Error = &msg
		case "empty":
			t.Status, t.Message = Pending, "等待已索引的文件"
		default:
			t.Status, t.Message = Running, fmt.Sprintf("已抽取 %d/%d 个分块", b.DoneChunks+b.FailedChunks, b.TotalChunks)
		}
		if t.Status != Pending {
			st := b.ConfiguredAt
			t.StartedAt = &st
		}
		if Terminal(t.Status) {
			c := b.UpdatedAt
			t.CompletedAt = &c
		}
		t.Payload = map[string]any{"kb_id": b.KBID, "config_version": b.Version}
		t.Result = map[string]any{"total_chunks": b.TotalChunks, "done_chunks": b.DoneChunks, "failed_chunks": b.FailedChunks}
		out = append(out, t)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
