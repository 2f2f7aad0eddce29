package blob_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/blob/blobtest"
)

func newLocal(t *testing.T) *blob.Local {
	t.Helper()
	l, err := blob.NewLocal(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	return l
}

func TestLocalContract(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return newLocal(t) })
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestLocalLayoutAndETag(t *testing.T) {
	l := newLocal(t)
	info := blobtest.Put(t, l, "kb/1/report 1.pdf", "%PDF-1.7", "application/pdf")
	blobtest.Put(t, l, "kb/1", "the key kb/1", "text/plain")
	blobtest.Put(t, l, "odd%/a~b", "escaped", "text/plain")

	if info.ETag != md5hex("%PDF-1.7") {
		t.Errorf("ETag = %q, want hex MD5 %q", info.ETag, md5hex("%PDF-1.7"))
	}
	for rel, want := range map[string]string{
		"kb~/1~/report 1.pdf": "%PDF-1.7",
		"kb~/1":               "the key kb/1",
		"odd%25~/a%7Eb":       "escaped",
	} {
		got, err := os.ReadFile(filepath.Join(l.Dir(), filepath.FromSlash(rel)))
		if err != nil || string(got) != want {
			t.Errorf("file %s = %q, %v; want %q", rel, got, err, want)
		}
	}
}

func TestLocalFilesCopiedInByHand(t *testing.T) {
	l := newLocal(t)
	if err := os.MkdirAll(filepath.Join(l.Dir(), "seed~"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Dir(), "seed~", "notes.txt"), []byte("by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := l.Stat(t.Context(), "seed/notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	if st.ContentType != blob.DefaultContentType || st.ETag != md5hex("by hand") || st.Size != 7 {
		t.Errorf("Stat of a file without attributes = %+v", st)
	}
	list, err := l.List(t.Context(), "")
	if err != nil || len(list) != 1 || list[0].ETag != md5hex("by hand") {
		t.Errorf("List = %+v, %v", list, err)
	}
}

func TestLocalIgnoresTempAndForeignFiles(t *testing.T) {
	l := newLocal(t)
	blobtest.Put(t, l, "d/real", "real", "")
	for _, p := range []string{"d~/~tmp-0123abcd", "~tmp-deadbeef", "foreign/inside.txt", "d~/x~y"} {
		full := filepath.Join(l.Dir(), filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list, err := l.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(list); !slices.Equal(got, []string{"d/real"}) {
		t.Errorf("List = %v, want only d/real", got)
	}
}

func TestLocalSymlinksCannotEscape(t *testing.T) {
	l := newLocal(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(l.Dir(), "link~")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(l.Dir(), "evil")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, k := range []string{"link/secret", "evil"} {
		if rc, _, err := l.Get(ctx, k); err == nil {
			rc.Close()
			t.Errorf("Get(%q) followed a symlink out of the store", k)
		}
	}
	if list, err := l.List(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("List followed symlinks: %v, %v", keysOf(list), err)
	}
	if _, err := l.Put(ctx, "link/secret", strings.NewReader("overwrite"), 9, ""); err == nil {
		t.Error("Put(link/secret) wrote through a symlinked directory")
	}
	// Put over a symlinked object replaces the link itself, not its target.
	blobtest.Put(t, l, "evil", "overwrite", "")
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("file outside the store changed: %q", b)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files appeared outside the store: %v", entries)
	}
	if got, _ := blobtest.Get(t, l, "evil"); got != "overwrite" {
		t.Errorf("evil = %q", got)
	}
}

func TestLocalInvalidKeysTouchNothing(t *testing.T) {
	parent := t.TempDir()
	l, err := blob.NewLocal(filepath.Join(parent, "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range blobtest.InvalidKeys {
		_, _ = l.Put(t.Context(), k, strings.NewReader("x"), 1, "")
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 || entries[0].Name() != "store" {
		t.Errorf("parent of the store holds %v", entries)
	}
	inside, _ := os.ReadDir(l.Dir())
	if len(inside) != 0 {
		t.Errorf("store holds %v after only invalid Puts", inside)
	}
}

func TestLocalDeletePrunesEmptyDirectories(t *testing.T) {
	l := newLocal(t)
	blobtest.Put(t, l, "a/b/c/d.txt", "x", "")
	blobtest.Put(t, l, "a/keep.txt", "y", "")
	if err := l.Delete(t.Context(), "a/b/c/d.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), "a~", "b~")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty directory a~/b~ left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), "a~", "keep.txt")); err != nil {
		t.Errorf("sibling removed: %v", err)
	}
}

func TestLocalSegmentTooLongOnceEscaped(t *testing.T) {
	l := newLocal(t)
	key := "x/" + strings.Repeat("~", 200) // a valid key, 600 bytes as a file name
	if err := blob.ValidateKey(key); err != nil {
		t.Fatalf("ValidateKey: %v", err)
	}
	if _, err := l.Put(t.Context(), key, strings.NewReader("x"), 1, ""); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("Put: err = %v, want ErrInvalidKey", err)
	}
}

func TestNewLocalRejectsAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.NewLocal(f); err == nil {
		t.Error("NewLocal on a regular file succeeded")
	}
	if _, err := blob.NewLocal(""); err == nil {
		t.Error("NewLocal(\"\") succeeded")
	}
}
