package blob_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob/blobtest"
)

// Temp files left by a process killed mid-Put are removed once older than
// the grace period, with the directories they leave empty; fresh temp files
// (a Put in progress) and objects stay.
func TestLocalRemoveTempDeletesOnlyStaleTempFiles(t *testing.T) {
	l := newLocal(t)
	blobtest.Put(t, l, "kb/1/report.pdf", "report", "application/pdf")
	dir := l.Dir()
	stale := []string{
		filepath.Join(dir, "kb~", "1~", "~tmp-0a0a"),         // next to an object
		filepath.Join(dir, "kb~", "2~", "img~", "~tmp-0b0b"), // alone in its directories
		filepath.Join(dir, "~tmp-0c0c"),                      // at the root
	}
	fresh := filepath.Join(dir, "kb~", "1~", "~tmp-0d0d")
	old := time.Now().Add(-time.Hour)
	for _, p := range append(slices.Clone(stale), fresh) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if p != fresh {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := l.RemoveTemp(t.Context(), 10*time.Minute)
	if err != nil || n != len(stale) {
		t.Fatalf("RemoveTemp removed %d (%v), want %d", n, err, len(stale))
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stale temp file %s still there (%v)", p, err)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temp file (a Put in progress) was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kb~", "2~")); !os.IsNotExist(err) {
		t.Errorf("directories left empty were kept: %v", err)
	}
	if got, _ := blobtest.Get(t, l, "kb/1/report.pdf"); got != "report" {
		t.Errorf("object next to a stale temp file: %q", got)
	}
	if n, err := l.RemoveTemp(t.Context(), 10*time.Minute); err != nil || n != 0 {
		t.Fatalf("second RemoveTemp removed %d (%v)", n, err)
	}
}
