package task_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kb/kbtest"
	"github.com/yuxi-serverless/yuxi/shared/task"
)

func code(t *testing.T, err error, want string) {
	t.Helper()
	fe, ok := failure.As(err)
	if !ok || fe.Code != want {
		t.Fatalf("error = %v, want code %s", err, want)
	}
}

// register uploads names into w's KB and registers them for ingestion (a
// batch); the world's outbox has no relay, so nothing parses them.
func register(t *testing.T, w *kbtest.World, names ...string) []kb.File {
	t.Helper()
	var items []string
	for _, n := range names {
		key := kb.UploadKey(w.KB.KBID, n, time.Now())
		if _, err := w.Objs.Put(w.Ctx, key, strings.NewReader("# "+n+"\n"), -1, "text/markdown"); err != nil {
			t.Fatal(err)
		}
		items = append(items, key)
	}
	files, err := w.Lib.Register(w.Ctx, kbtest.Admin, w.KB.KBID, kb.RegisterInput{Items: items, Parse: true})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestIngestionBatchAsATask(t *testing.T) {
	w := kbtest.New(t, "task-test", "tasks")
	tasks := task.New(w.Pool).With(w.KBs)
	owner := kbtest.Admin
	dept := int64(1)
	outsider := access.Subject{UID: "outsider", Role: "admin", DepartmentID: &dept}

	files := register(t, w, "a.md", "b.md")
	if files[0].IngestBatch == nil || files[1].IngestBatch == nil || *files[0].IngestBatch != *files[1].IngestBatch {
		t.Fatalf("one request is one batch: %+v", files)
	}
	id := *files[0].IngestBatch
	got, err := tasks.Get(w.Ctx, owner, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != task.TypeIngest || got.Status != task.Pending || got.Progress != 0 || got.KBID != w.KB.KBID {
		t.Fatalf("fresh batch = %+v", got)
	}
	// Another department's admin neither reads nor lists it.
	if _, err := tasks.Get(w.Ctx, outsider, id); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("outsider get: %v", err)
	}
	if l, err := tasks.ListTasks(w.Ctx, outsider, "", 100); err != nil || len(l.Tasks) != 0 || l.Summary.Total != 0 {
		t.Fatalf("outsider list = %+v, %v", l, err)
	}
	code(t, tasks.Cancel(w.Ctx, outsider, id), "task_not_found")

	// One file parsed (its stage claimed before the cancel: it finishes),
	// the other still waiting: cancel stops the waiting one only.
	claimed, err := w.KBs.ClaimParse(w.Ctx, files[0].FileID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tasks.Get(w.Ctx, owner, id); got.Status != task.Running {
		t.Fatalf("a claimed stage: status %s", got.Status)
	}
	code(t, tasks.Delete(w.Ctx, owner, id), "task_not_finished")
	if err := tasks.Cancel(w.Ctx, owner, id); err != nil {
		t.Fatal(err)
	}
	code(t, tasks.Cancel(w.Ctx, owner, id), "task_not_cancellable") // once
	if got, _ := tasks.Get(w.Ctx, owner, id); got.Status != task.Running || !got.CancelRequested {
		t.Fatalf("cancelling while a stage runs: %+v", got)
	}
	// The waiting file starts no stage, and the sweep does not re-drive it.
	if _, err := w.KBs.ClaimParse(w.Ctx, files[1].FileID, time.Minute); !errors.Is(err, kb.ErrNotReady) {
		t.Fatalf("claim of a cancelled file: %v", err)
	}
	w.Exec(t, `UPDATE knowledge_files SET updated_at = now() - interval '1 hour' WHERE file_id = $1`, files[1].FileID)
	rec, err := w.KBs.RecoverStuckFiles(w.Ctx, w.Outbox, kb.SweepConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rec {
		if r.FileID == files[1].FileID {
			t.Fatalf("the sweep re-drove a cancelled file: %+v", r)
		}
	}
	if f := w.Load(t, files[1].FileID); f.Status != kb.StatusUploaded {
		t.Fatalf("cancelled file status %s, want uploaded", f.Status)
	}
	// The running stage finishes; the batch is then cancelled, finished.
	if err := w.Lib.FinishParse(w.Ctx, claimed, "kb/x.md", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.KBs.ClaimIndex(w.Ctx, files[0].FileID, time.Minute); !errors.Is(err, kb.ErrNotReady) {
		t.Fatalf("index claim after cancel: %v", err)
	}
	got, _ = tasks.Get(w.Ctx, owner, id)
	if got.Status != task.Cancelled || got.CompletedAt == nil {
		t.Fatalf("after the running stage: %+v", got)
	}
	code(t, tasks.Cancel(w.Ctx, owner, id), "task_not_cancellable")

	// A restage starts a new batch that runs again.
	out, err := w.Lib.Restage(w.Ctx, owner, w.KB.KBID, []string{files[1].FileID}, kb.StatusUploaded, nil)
	if err != nil || out[0]["task_id"] == nil || out[0]["task_id"] == id {
		t.Fatalf("restage = %v, %v", out, err)
	}
	if _, err := w.KBs.ClaimParse(w.Ctx, files[1].FileID, time.Minute); err != nil {
		t.Fatalf("a restaged file is claimable again: %v", err)
	}

	// Delete removes the finished task's record only.
	l, _ := tasks.ListTasks(w.Ctx, owner, task.Cancelled, 100)
	if l.Summary.FilteredTotal != 1 || l.Tasks[0].ID != id || l.Tasks[0].Result != nil {
		t.Fatalf("cancelled list = %+v", l)
	}
	if err := tasks.Delete(w.Ctx, owner, id); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Get(w.Ctx, owner, id); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("deleted task: %v", err)
	}
	if n := w.Count(t, `SELECT count(*) FROM knowledge_files WHERE kb_id = $1`, w.KB.KBID); n != 2 {
		t.Fatalf("deleting the task removed files: %d left", n)
	}
	_, err = tasks.ListTasks(w.Ctx, owner, "bogus", 100)
	code(t, err, "invalid_status")
	_, err = tasks.ListTasks(w.Ctx, owner, "", 101)
	code(t, err, "invalid_limit")
}
