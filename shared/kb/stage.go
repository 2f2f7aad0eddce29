package kb

import (
	"context"
	"log/slog"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Notifier publishes a KB's status notices (GET …/{kb_id}/events).
type Notifier interface {
	NotifyKB(ctx context.Context, kbID string, payload any) (string, error)
}

// Stage is what a stage's function shares: where status notices go and
// how failures end. Both parse and index stages use it.
type Stage struct {
	Store       *Store
	Notify      Notifier // nil: no notices
	MaxAttempts int      // passing faults are retried this often, then the file ends in error
	Log         *slog.Logger
}

// Status sends f's status notice (best effort: a missed notice is repaired
// by the next one, and GET …/basic always has the truth).
func (s Stage) Status(ctx context.Context, f File, status, msg string) {
	if s.Notify == nil {
		return
	}
	p := map[string]any{"kb_id": f.KBID, "file_id": f.FileID, "filename": f.Filename, "status": status}
	if msg != "" {
		p["error_message"] = msg
	}
	if _, err := s.Notify.NotifyKB(context.WithoutCancel(ctx), f.KBID, p); err != nil {
		s.Log.Debug("notify kb", "error", err)
	}
}

// Fail ends f's claimed stage after cause: a permanent failure (Permanent)
// or the last attempt puts the file in its error status with the message
// and a notice, and returns nil (nothing to retry); a passing fault releases
// the stage and returns cause, so that the event is delivered again.
func (s Stage) Fail(ctx context.Context, f File, cause error) error {
	ctx = context.WithoutCancel(ctx)
	if Permanent(cause) || f.StageAttempts >= s.MaxAttempts {
		msg := cause.Error()
		if fe, ok := failure.As(cause); ok {
			msg = fe.Message
		}
		if _, err := s.Store.FailStage(ctx, f, msg); err != nil {
			return err
		}
		status := StatusErrorParsing
		if f.Status == StatusIndexing {
			status = StatusErrorIndexing
		}
		s.Status(ctx, f, status, msg)
		s.Log.Info("file stage failed", "kb", f.KBID, "file", f.FileID, "stage", f.Status, "error", cause)
		return nil
	}
	if err := s.Store.ReleaseStage(ctx, f); err != nil {
		s.Log.Warn("release file stage", "file", f.FileID, "stage", f.Status, "error", err)
	}
	return cause
}
