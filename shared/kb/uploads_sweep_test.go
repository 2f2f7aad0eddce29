package kb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kb/kbtest"
)

// Uploads never registered in a KB are removed once older than the grace;
// registered ones, and recent ones, stay.
func TestSweepUploadsRemovesOnlyOldUnregisteredUploads(t *testing.T) {
	w := kbtest.New(t, "sweep-uploads", "uploads")
	put := func(name string) string {
		key := kb.UploadKey(w.KB.KBID, name, time.Now())
		if _, err := w.Objs.Put(w.Ctx, key, strings.NewReader("# "+name+"\n"), -1, "text/markdown"); err != nil {
			t.Fatal(err)
		}
		return key
	}
	kept, stray := put("kept.md"), put("stray.md")
	other := "kb/" + w.KB.KBID + "/markdown/x.md" // not an upload: never touched
	if _, err := w.Objs.Put(w.Ctx, other, strings.NewReader("x"), -1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Lib.Register(w.Ctx, kbtest.Admin, w.KB.KBID, kb.RegisterInput{Items: []string{kept}}); err != nil {
		t.Fatal(err)
	}
	// Within the grace: nothing goes.
	if n, err := w.KBs.SweepUploads(w.Ctx, w.Objs, time.Hour, time.Now()); err != nil || n != 0 {
		t.Fatalf("sweep within the grace: %d, %v", n, err)
	}
	// Past it: the stray upload goes, the registered one and other objects stay.
	n, err := w.KBs.SweepUploads(w.Ctx, w.Objs, time.Hour, time.Now().Add(2*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("sweep past the grace removed %d, %v", n, err)
	}
	if _, err := w.Objs.Stat(w.Ctx, stray); err == nil || !isNotFound(err) {
		t.Fatalf("stray upload: %v", err)
	}
	for _, k := range []string{kept, other} {
		if _, err := w.Objs.Stat(w.Ctx, k); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	// A registration after the sweep is refused cleanly.
	_, err = w.Lib.Register(w.Ctx, kbtest.Admin, w.KB.KBID, kb.RegisterInput{Items: []string{stray}})
	if err == nil || !strings.Contains(err.Error(), "upload_not_found") {
		t.Fatalf("register of a swept upload: %v", err)
	}
}

func isNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), blob.ErrNotFound.Error())
}
