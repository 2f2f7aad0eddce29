package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// The task centre (the original's system_task_router): ingestion batches,
// evaluation runs and dataset generations, read by shared/task from the
// tables their owners keep. Knowledge tasks are admin work, as the
// original: seen by an admin who may read its knowledge base, cancelled and
// deleted by whoever may manage it. The two reads are user routes because
// a user's own agent evaluation suite runs are tasks too (with their gate
// status); a plain user sees only those.

const (
	// ReadTask: {task_id}'s knowledge base is shared with the caller (an
	// admin), or {task_id} is one of the caller's suite runs.
	ReadTask Check = "task_read"
	// ManageTask: {task_id}'s knowledge base may be managed by the caller.
	ManageTask Check = "task_manage"
)

func (s *Server) taskRoutes() []Route {
	return []Route{
		{"GET", "/api/tasks", User, NoCheck, s.listTasks},
		{"GET", "/api/tasks/{task_id}", User, ReadTask, s.getTask},
		{"POST", "/api/tasks/{task_id}/cancel", Admin, ManageTask, s.cancelTask},
		{"DELETE", "/api/tasks/{task_id}", Admin, ManageTask, s.deleteTask},
	}
}

func (s *Server) taskCentre() error {
	if s.tasks == nil {
		return failure.New(failure.KindUnavailable, "tasks_unavailable", "the task centre is not configured")
	}
	return nil
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.taskCentre(); err != nil {
		return err
	}
	limit, err := intQuery(r, "limit", 100)
	if err != nil {
		return err
	}
	out, err := s.tasks.ListTasks(r.Context(), subject(p), r.URL.Query().Get("status"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.taskCentre(); err != nil {
		return err
	}
	t, err := s.tasks.Get(r.Context(), subject(p), r.PathValue("task_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"task": t})
	return nil
}

func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.taskCentre(); err != nil {
		return err
	}
	id := r.PathValue("task_id")
	if err := s.tasks.Cancel(r.Context(), subject(p), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_id": id, "status": "cancelled"})
	return nil
}

func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.taskCentre(); err != nil {
		return err
	}
	id := r.PathValue("task_id")
	if err := s.tasks.Delete(r.Context(), subject(p), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_id": id, "status": "deleted"})
	return nil
}
