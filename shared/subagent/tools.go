package subagent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Tools returns the five sub-agent tools. They are base tools (an explicit
// context.tools need not list them): FilterSpecs shows them only to main
// runs whose context lists sub-agents.
func (s *Service) Tools() []tool.Tool {
	return []tool.Tool{
		subTool{s, tool.Spec{Name: ToolTask, DisplayName: "Delegate to a sub-agent", Category: "subagent", Tags: []string{"subagent"}, Base: true,
			Description: "Give a self-contained task to a sub-agent and wait for its answer. The result carries the sub-agent's thread_id; pass it back to continue the same sub-task.",
			Parameters:  json.RawMessage(startSchema)}, s.task},
		subTool{s, tool.Spec{Name: ToolStart, DisplayName: "Start a sub-agent", Category: "subagent", Tags: []string{"subagent"}, Base: true,
			Description: "Start a sub-agent in the background and return its run_id and thread_id at once; use subagent_status / subagent_await / subagent_cancel with the run_id. Prefer it for long or parallel sub-tasks.",
			Parameters:  json.RawMessage(startSchema)}, s.startAsync},
		subTool{s, tool.Spec{Name: ToolStatus, DisplayName: "Sub-agent status", Category: "subagent", Tags: []string{"subagent"}, Base: true,
			Description: "Report a background sub-agent run's status, its latest progress and, once it ended, its result.",
			Parameters:  json.RawMessage(runIDSchema)}, s.status},
		subTool{s, tool.Spec{Name: ToolAwait, DisplayName: "Wait for a sub-agent", Category: "subagent", Tags: []string{"subagent"}, Base: true,
			Description: "Wait until a background sub-agent run ends and return its result. With timeout_seconds, give up waiting after that long: the result is then the run's current status and progress with wait_timed_out: true (the run goes on; await it again or cancel it).",
			Parameters:  json.RawMessage(awaitSchema)}, s.await},
		subTool{s, tool.Spec{Name: ToolCancel, DisplayName: "Cancel a sub-agent", Category: "subagent", Tags: []string{"subagent"}, Base: true,
			Description: "Cancel a background sub-agent run.",
			Parameters:  json.RawMessage(runIDSchema)}, s.cancel},
	}
}

const startSchema = `{"type":"object","properties":{
"description":{"type":"string","description":"The complete task for the sub-agent: it sees nothing of this conversation but this text."},
"subagent_slug":{"type":"string","description":"Which sub-agent (one of the slugs listed as available)."},
"thread_id":{"type":"string","description":"Optional: the thread_id of an earlier result of this sub-agent, to continue that sub-task."}},
"required":["description","subagent_slug"]}`

const awaitSchema = `{"type":"object","properties":{"run_id":{"type":"string","description":"The run_id subagent_start returned."},
"timeout_seconds":{"type":"integer","minimum":1,"maximum":3600,"description":"Optional: the longest to wait, in seconds (default: until the run ends)."}},"required":["run_id"]}`

// MaxAwaitTimeout bounds subagent_await's timeout_seconds.
const MaxAwaitTimeout = 3600

const runIDSchema = `{"type":"object","properties":{"run_id":{"type":"string","description":"The run_id subagent_start returned."}},"required":["run_id"]}`

type subTool struct {
	s    *Service
	spec tool.Spec
	fn   func(ctx context.Context, c tool.Call, parent run.Run) (tool.Result, error)
}

func (t subTool) Spec() tool.Spec { return t.spec }

func (t subTool) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	parent, err := t.s.parentOf(ctx, c)
	if err != nil {
		return asResult(err)
	}
	if parent.RunType == run.TypeSubagent {
		return asResult(errNoGrandchildren)
	}
	res, err := t.fn(ctx, c, parent)
	if err != nil {
		return asResult(err)
	}
	return res, nil
}

func decode(c tool.Call, v any) error {
	if err := json.Unmarshal([]byte(c.Arguments), v); err != nil {
		return toolError("invalid arguments: " + err.Error())
	}
	return nil
}

// task starts the child (once) and waits for it without holding the
// function: the call's result is recorded when the child finishes.
func (s *Service) task(ctx context.Context, c tool.Call, parent run.Run) (tool.Result, error) {
	var a startArgs
	if err := decode(c, &a); err != nil {
		return tool.Result{}, err
	}
	st, err := s.start(ctx, c, parent, a, true)
	if err != nil {
		return tool.Result{}, err
	}
	if st.busy != nil {
		return busy(*st.busy)
	}
	return s.waitFor(ctx, st.child)
}

// waitFor answers now when the child already ended (a redelivered call, or
// an await of a finished run), else defers: the wait row, committed before
// this read, makes RunFinished record the result.
func (s *Service) waitFor(ctx context.Context, child run.Run) (tool.Result, error) {
	cur, err := s.d.Runs.Get(ctx, child.ID)
	if err != nil {
		return tool.Result{}, err
	}
	if !run.IsTerminal(cur.Status) {
		return tool.Result{Deferred: true}, nil
	}
	out, isErr, err := s.Outcome(ctx, cur)
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: out, IsError: isErr}, nil
}

func (s *Service) startAsync(ctx context.Context, c tool.Call, parent run.Run) (tool.Result, error) {
	var a startArgs
	if err := decode(c, &a); err != nil {
		return tool.Result{}, err
	}
	st, err := s.start(ctx, c, parent, a, false)
	if err != nil {
		return tool.Result{}, err
	}
	if st.busy != nil {
		return busy(*st.busy)
	}
	out, err := tool.JSON(map[string]any{"status": "started", "run_id": st.child.ID, "thread_id": st.child.ThreadID,
		"subagent_slug": st.child.AgentSlug})
	return tool.Result{Output: out}, err
}

func busy(active run.Run) (tool.Result, error) {
	out, err := tool.JSON(map[string]any{"status": "busy", "run_id": active.ID, "thread_id": active.ThreadID,
		"message": "this sub-agent thread already has a running run; await or cancel it first"})
	return tool.Result{Output: out, IsError: true}, err
}

type runIDArgs struct {
	RunID string `json:"run_id"`
}

func (s *Service) childArg(ctx context.Context, c tool.Call, parent run.Run) (run.Run, error) {
	var a runIDArgs
	if err := decode(c, &a); err != nil {
		return run.Run{}, err
	}
	if a.RunID == "" {
		return run.Run{}, toolError("run_id is required")
	}
	return s.ownedChild(ctx, parent, a.RunID)
}

func (s *Service) status(ctx context.Context, c tool.Call, parent run.Run) (tool.Result, error) {
	child, err := s.childArg(ctx, c, parent)
	if err != nil {
		return tool.Result{}, err
	}
	if run.IsTerminal(child.Status) {
		out, _, err := s.Outcome(ctx, child)
		return tool.Result{Output: out}, err
	}
	progress, err := s.progress(ctx, child.ID)
	if err != nil {
		return tool.Result{}, err
	}
	out, err := tool.JSON(map[string]any{"status": child.Status, "run_id": child.ID, "thread_id": child.ThreadID,
		"subagent_slug": child.AgentSlug, "step_count": child.StepCount, "progress": progress})
	return tool.Result{Output: out}, err
}

// progress is the child's latest readable progress: its last three
// assistant messages (shortened), oldest first.
func (s *Service) progress(ctx context.Context, childID string) ([]string, error) {
	rows, err := s.d.Pool.Query(ctx, `SELECT content FROM (SELECT id, content FROM messages WHERE run_id = $1 AND role = 'assistant'
		AND content <> '' ORDER BY id DESC LIMIT 3) m ORDER BY id`, childID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		if r := []rune(c); len(r) > 300 {
			c = string(r[:300]) + "…"
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *Service) await(ctx context.Context, c tool.Call, parent run.Run) (tool.Result, error) {
	var a struct {
		TimeoutSeconds *int `json:"timeout_seconds"`
	}
	if err := decode(c, &a); err != nil {
		return tool.Result{}, err
	}
	timeout := 0
	if a.TimeoutSeconds != nil {
		if *a.TimeoutSeconds < 1 || *a.TimeoutSeconds > MaxAwaitTimeout {
			return tool.Result{}, toolError(fmt.Sprintf("timeout_seconds must be between 1 and %d", MaxAwaitTimeout))
		}
		timeout = *a.TimeoutSeconds
	}
	child, err := s.childArg(ctx, c, parent)
	if err != nil {
		return tool.Result{}, err
	}
	if err := s.addWaitUntil(ctx, parent.ID, c.ToolCallID, child.ID, timeout); err != nil {
		return tool.Result{}, err
	}
	return s.waitFor(ctx, child)
}

// ExpireWaits answers the subagent_await calls past their deadline whose
// child is still running: the result is the child's current snapshot with
// wait_timed_out (not an error; the child goes on). Called by the
// dispatcher's sweep, so a timeout fires within one sweep interval of its
// deadline. Idempotent: an answered call is a duplicate; a child that
// finished meanwhile is left to RunFinished.
func (s *Service) ExpireWaits(ctx context.Context) (int, error) {
	rows, err := s.d.Pool.Query(ctx, `SELECT w.parent_run_id, w.tool_call_id, w.child_run_id FROM subagent_waits w
		JOIN tool_calls t ON t.run_id = w.parent_run_id AND t.tool_call_id = w.tool_call_id
		WHERE w.deadline IS NOT NULL AND w.deadline <= now() AND t.status = 'pending'
		ORDER BY w.deadline LIMIT 100`)
	if err != nil {
		return 0, fmt.Errorf("expired sub-agent waits: %w", err)
	}
	type wait struct{ parent, call, child string }
	var waits []wait
	for rows.Next() {
		var w wait
		if err := rows.Scan(&w.parent, &w.call, &w.child); err != nil {
			rows.Close()
			return 0, err
		}
		waits = append(waits, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, w := range waits {
		child, err := s.d.Runs.Get(ctx, w.child)
		if err != nil {
			return n, err
		}
		if run.IsTerminal(child.Status) {
			continue // its run.finished answers the call
		}
		progress, err := s.progress(ctx, child.ID)
		if err != nil {
			return n, err
		}
		out, err := tool.JSON(map[string]any{"status": child.Status, "wait_timed_out": true, "run_id": child.ID, "thread_id": child.ThreadID,
			"subagent_slug": child.AgentSlug, "step_count": child.StepCount, "progress": progress,
			"message": "the sub-agent is still running; call subagent_await again to keep waiting, or subagent_cancel"})
		if err != nil {
			return n, err
		}
		if _, err := s.d.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: w.parent, ToolCallID: w.call, Status: run.ToolSuccess, Output: out}); err != nil {
			return n, fmt.Errorf("record sub-agent wait timeout for %s/%s: %w", w.parent, w.call, err)
		}
		n++
	}
	return n, nil
}

func (s *Service) cancel(ctx context.Context, c tool.Call, parent run.Run) (tool.Result, error) {
	child, err := s.childArg(ctx, c, parent)
	if err != nil {
		return tool.Result{}, err
	}
	r, outcome, err := s.d.Runs.RequestCancel(ctx, child.UID, child.ID)
	if err != nil {
		return tool.Result{}, err
	}
	if outcome == run.CancelRequested && s.d.Cancel != nil {
		if err := s.d.Cancel.SignalCancel(context.WithoutCancel(ctx), r.ID); err != nil {
			s.d.Log.Warn("signal cancel of sub-agent", "run", r.ID, "error", err)
		}
	}
	status := r.Status
	if outcome == run.CancelNoop && run.IsTerminal(r.Status) {
		status = "already_" + r.Status
	}
	out, err := tool.JSON(map[string]any{"status": status, "run_id": r.ID, "thread_id": r.ThreadID})
	return tool.Result{Output: out}, err
}

// Outcome is the tool result text of an ended child — its status, thread id
// and final answer (or error) — and whether it is an error.
func (s *Service) Outcome(ctx context.Context, child run.Run) (string, bool, error) {
	answer, err := s.d.Runs.Output(ctx, child)
	if err != nil {
		return "", false, fmt.Errorf("output of sub-agent run %s: %w", child.ID, err)
	}
	doc := map[string]any{"status": child.Status, "run_id": child.ID, "thread_id": child.ThreadID,
		"subagent_slug": child.AgentSlug, "result": answer}
	isErr := child.Status != run.StatusCompleted
	if isErr {
		msg := "the sub-agent run ended " + child.Status
		if child.ErrorMessage != nil && *child.ErrorMessage != "" {
			msg = *child.ErrorMessage
		}
		doc["error"] = msg
	}
	out, err := tool.JSON(doc)
	return out, isErr, err
}
