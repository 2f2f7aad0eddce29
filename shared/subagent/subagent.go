// Package subagent lets a main agent delegate to sub-agents (agents with
// is_subagent) as the original's task middleware does: `task` starts a child
// run and waits for it; `subagent_start`, `subagent_status`,
// `subagent_await` and `subagent_cancel` are the asynchronous lifecycle.
//
// A child is a first-class durable run (shared/run: run_type subagent,
// created_by_run_id = the parent, its own thread
// `<parent thread>_sub_<slug>_<8 hex>` and its own checkpointed steps).
// Waiting never holds a function: a waiting tool call returns
// tool.Result{Deferred: true}, and its result is recorded when the child's
// run.finished event reaches the dispatcher (Service.RunFinished), or — if
// that was lost — when the recovery sweep redelivers the call and the tool
// finds its child finished. Everything is idempotent by (parent run, tool
// call id): a redelivered call finds the child it started.
//
// Rules as the original: a sub-agent cannot start sub-agents (no
// grandchildren) nor ask the user; every child id a tool receives is checked
// to belong to the calling run's thread and user; cancelling the parent
// cascades (shared/run does it in the cancel transaction; RunFinished does it
// for a parent that failed).
//
// Owns the tables subagent_threads, subagent_starts and subagent_waits.
//
// Imported by: shared/bootstrap/chat (tools and the dispatcher hook),
// functions/agent-step (tool visibility), tests.
// May import: shared/run, shared/agent, shared/thread, shared/tool,
// shared/access, shared/outbox, shared/postgres, shared/failure, pgx.
package subagent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Tool names.
const (
	ToolTask   = "task"
	ToolStart  = "subagent_start"
	ToolStatus = "subagent_status"
	ToolAwait  = "subagent_await"
	ToolCancel = "subagent_cancel"
)

// ToolNames are the sub-agent tools.
var toolNames = []string{ToolTask, ToolStart, ToolStatus, ToolAwait, ToolCancel}

// IsTool reports whether name is one of the sub-agent tools.
func IsTool(name string) bool { return slices.Contains(toolNames, name) }

// CancelSignal tells a streaming worker to stop (runstream.Writer).
type CancelSignal interface {
	SignalCancel(ctx context.Context, runID string) error
}

// Deps are what the service uses.
type Deps struct {
	Pool    *pgxpool.Pool
	Runs    *run.Store
	Agents  *agent.Store
	Threads *thread.Store
	Cancel  CancelSignal // nil: children stop at their next step boundary
	Log     *slog.Logger
}

// Service runs the sub-agent tools and the run.finished hook.
type Service struct{ d Deps }

// New returns the service.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Service{d: d}
}

// FilterSpecs removes what a run may not offer the model: a sub-agent run
// gets neither the sub-agent tools nor ask_user_question,
// present_artifacts and install_skill (it cannot reach the user; as the original); a main run gets the sub-agent tools only when its context lists
// sub-agents.
func FilterSpecs(r run.Run, specs []tool.Spec) []tool.Spec {
	sub := r.RunType == run.TypeSubagent
	none := len(r.Payload.Context.Subagents) == 0
	if !sub && !none {
		return specs
	}
	out := make([]tool.Spec, 0, len(specs))
	for _, s := range specs {
		if IsTool(s.Name) || (sub && (s.Name == "ask_user_question" || s.Name == "present_artifacts" || s.Name == "install_skill")) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// errors the model sees as tool errors.
var (
	errNoGrandchildren = errors.New("a sub-agent cannot start sub-agents")
	errUnknownChild    = errors.New("no sub-agent run or thread with this id belongs to this conversation")
)

// parentOf loads the calling run and checks it is the caller's.
func (s *Service) parentOf(ctx context.Context, c tool.Call) (run.Run, error) {
	p, err := s.d.Runs.Get(ctx, c.RunID)
	if err != nil {
		return run.Run{}, err
	}
	if p.UID != c.UID {
		return run.Run{}, run.ErrNotFound
	}
	return p, nil
}

// ownedChild loads child run id and checks that it is a sub-agent run of the
// caller's user whose thread belongs to the caller's thread.
func (s *Service) ownedChild(ctx context.Context, parent run.Run, id string) (run.Run, error) {
	child, err := s.d.Runs.Get(ctx, id)
	if errors.Is(err, run.ErrNotFound) {
		return run.Run{}, errUnknownChild
	}
	if err != nil {
		return run.Run{}, err
	}
	if child.RunType != run.TypeSubagent || child.UID != parent.UID {
		return run.Run{}, errUnknownChild
	}
	var ok bool
	if err := s.d.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM subagent_threads
		WHERE child_thread_id = $1 AND uid = $2 AND parent_thread_id = $3)`, child.ThreadID, parent.UID, parent.ThreadID).Scan(&ok); err != nil {
		return run.Run{}, err
	}
	if !ok {
		return run.Run{}, errUnknownChild
	}
	return child, nil
}

// startArgs are the arguments of task and subagent_start.
type startArgs struct {
	Description  string `json:"description"`
	SubagentSlug string `json:"subagent_slug"`
	ThreadID     string `json:"thread_id"`
}

// started is what start found or created.
type started struct {
	child run.Run
	busy  *run.Run // the child thread already had an active run
}

// start returns the child run started by call c, creating it once (and, with
// wait, the wait of c on it, in the same transaction).
func (s *Service) start(ctx context.Context, c tool.Call, parent run.Run, a startArgs, wait bool) (started, error) {
	if id, found, err := s.startedBy(ctx, parent.ID, c.ToolCallID); err != nil || found {
		if err != nil {
			return started{}, err
		}
		child, err := s.d.Runs.Get(ctx, id)
		if err == nil && wait {
			err = s.addWait(ctx, parent.ID, c.ToolCallID, id)
		}
		return started{child: child}, err
	}
	a.SubagentSlug = strings.TrimSpace(a.SubagentSlug)
	if strings.TrimSpace(a.Description) == "" {
		return started{}, toolError("description is required")
	}
	if !slices.Contains(parent.Payload.Context.Subagents, a.SubagentSlug) {
		return started{}, toolError(fmt.Sprintf("sub-agent %q is not available to this agent; available: %s", a.SubagentSlug,
			strings.Join(parent.Payload.Context.Subagents, ", ")))
	}
	sub, err := s.subject(ctx, parent.UID)
	if err != nil {
		return started{}, err
	}
	ag, err := s.d.Agents.Get(ctx, sub, a.SubagentSlug)
	if errors.Is(err, agent.ErrNotFound) || (err == nil && !ag.IsSubagent) {
		return started{}, toolError(fmt.Sprintf("sub-agent %q does not exist or is not a sub-agent", a.SubagentSlug))
	}
	if err != nil {
		return started{}, err
	}
	threadID := a.ThreadID
	if threadID != "" {
		var ok bool
		if err := s.d.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM subagent_threads WHERE child_thread_id = $1 AND uid = $2
			AND parent_thread_id = $3 AND subagent_slug = $4)`, threadID, parent.UID, parent.ThreadID, a.SubagentSlug).Scan(&ok); err != nil {
			return started{}, err
		}
		if !ok {
			return started{}, errUnknownChild
		}
	} else {
		threadID = ChildThreadID(parent.ThreadID, a.SubagentSlug, parent.ID+"\x00"+c.ToolCallID)
	}
	th, err := s.d.Threads.Ensure(ctx, parent.UID, threadID, a.SubagentSlug, title(a.Description), "subagent")
	if err != nil {
		return started{}, err
	}
	actx, err := ag.Context()
	if err != nil {
		return started{}, toolError(err.Error())
	}
	resolved := actx.Resolve()
	resolved.Subagents = nil // no grandchildren
	if resolved.Model == "" {
		resolved.Model = parent.Payload.ModelSpec // the original: a sub-agent without a model inherits the parent's
	}
	childID := "run_" + randomHex(16)
	var out started
	err = s.d.Runs.Outbox().Tx(ctx, s.d.Pool, func(tx pgx.Tx, emit outbox.Emit) error {
		r, err := s.d.Runs.CreateChildTx(ctx, tx, emit, run.NewChild{ID: childID, ThreadID: th.ID, ConversationID: th.ConversationID,
			AgentSlug: a.SubagentSlug, UID: parent.UID, ParentRunID: parent.ID, Source: parent.Source, Channel: parent.Channel,
			Input: a.Description, Payload: run.Payload{ModelSpec: resolved.Model, ToolApprovalMode: parent.Payload.ToolApprovalMode, Context: resolved}})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO subagent_threads (child_thread_id, uid, parent_thread_id, subagent_slug, created_by_run_id)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (child_thread_id) DO NOTHING`, th.ID, parent.UID, parent.ThreadID, a.SubagentSlug, parent.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO subagent_starts (parent_run_id, tool_call_id, child_run_id) VALUES ($1, $2, $3)`,
			parent.ID, c.ToolCallID, r.ID); err != nil {
			return err
		}
		if wait {
			if _, err := tx.Exec(ctx, `INSERT INTO subagent_waits (parent_run_id, tool_call_id, child_run_id) VALUES ($1, $2, $3)`,
				parent.ID, c.ToolCallID, r.ID); err != nil {
				return err
			}
		}
		out.child = r
		return nil
	})
	switch {
	case errors.Is(err, run.ErrThreadBusy):
		active, aerr := s.d.Runs.ActiveForThreadTx(ctx, s.d.Pool, parent.UID, a.SubagentSlug, th.ID)
		if aerr != nil || active == nil {
			return started{}, toolError("the sub-agent thread is busy")
		}
		return started{busy: active}, nil
	case postgres.IsUniqueViolation(err, "subagent_starts_pkey"):
		return s.start(ctx, c, parent, a, wait) // a concurrent delivery of this call started it
	}
	return out, err
}

// startedBy returns the child a tool call started, if any.
func (s *Service) startedBy(ctx context.Context, parentID, toolCallID string) (string, bool, error) {
	var id string
	err := s.d.Pool.QueryRow(ctx, `SELECT child_run_id FROM subagent_starts WHERE parent_run_id = $1 AND tool_call_id = $2`,
		parentID, toolCallID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return id, err == nil, err
}

// addWait records that tool call toolCallID of parentID waits for child.
func (s *Service) addWait(ctx context.Context, parentID, toolCallID, childID string) error {
	return s.addWaitUntil(ctx, parentID, toolCallID, childID, 0)
}

// addWaitUntil records a wait; timeout > 0 gives it a deadline (a
// redelivered call keeps the first one).
func (s *Service) addWaitUntil(ctx context.Context, parentID, toolCallID, childID string, timeout int) error {
	var deadline any
	if timeout > 0 {
		deadline = timeout
	}
	_, err := s.d.Pool.Exec(ctx, `INSERT INTO subagent_waits (parent_run_id, tool_call_id, child_run_id, deadline)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4::int))
		ON CONFLICT (parent_run_id, tool_call_id) DO NOTHING`, parentID, toolCallID, childID, deadline)
	return err
}

// subject is the access subject of uid (the run's user, as tools re-check it).
func (s *Service) subject(ctx context.Context, uid string) (access.Subject, error) {
	sub := access.Subject{UID: uid}
	err := s.d.Pool.QueryRow(ctx, `SELECT role, department_id FROM users WHERE uid = $1 AND NOT is_deleted`, uid).Scan(&sub.Role, &sub.DepartmentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return sub, toolError("the user of this run no longer exists")
	}
	return sub, err
}

// ChildThreadID is `<parent>_sub_<slug>_<8 hex>`, the original's child thread
// id; the 8 hex are derived from seed (so a redelivered call names the same
// thread), and the slug is shortened to keep the id within 64 characters.
func ChildThreadID(parentThreadID, slug, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	suffix := hex.EncodeToString(sum[:4])
	room := 64 - len(parentThreadID) - len("_sub_") - 1 - len(suffix)
	if room < 1 {
		return "sub_" + hex.EncodeToString(sum[:12]) // a parent id too long for the pattern
	}
	if len(slug) > room {
		slug = slug[:room]
	}
	return parentThreadID + "_sub_" + slug + "_" + suffix
}

func title(description string) string {
	d := strings.TrimSpace(description)
	if r := []rune(d); len(r) > 80 {
		d = string(r[:80]) + "…"
	}
	return d
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// toolErr is a failure the model sees (not retried).
type toolErr struct{ msg string }

func (e toolErr) Error() string { return e.msg }

func toolError(msg string) error { return toolErr{msg} }

// asResult turns a model-facing failure into a tool error result; other
// errors are returned (retried).
func asResult(err error) (tool.Result, error) {
	var te toolErr
	switch {
	case errors.As(err, &te):
		return tool.Errorf(te.msg), nil
	case errors.Is(err, errNoGrandchildren), errors.Is(err, errUnknownChild):
		return tool.Errorf(err.Error()), nil
	case errors.Is(err, run.ErrNotFound):
		return tool.Errorf("this run can no longer start sub-agents"), nil
	}
	return tool.Result{}, err
}
