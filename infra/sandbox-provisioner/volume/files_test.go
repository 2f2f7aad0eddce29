package volume_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
)

func setup(t *testing.T) (*volume.Files, volume.Scope, volume.Dirs) {
	t.Helper()
	l := volume.Layout{Root: t.TempDir(), Owner: volume.Owner{UID: -1, GID: -1}}
	s := volume.Scope{UID: "alice", FileThread: "t1"}
	if _, err := l.Prepare(s); err != nil {
		t.Fatal(err)
	}
	s, _ = s.Normalize()
	return &volume.Files{Layout: l, MaxFile: 1024}, s, l.DirsOf(s)
}

func TestLayoutAsTheOriginal(t *testing.T) {
	f, s, d := setup(t)
	root := f.Layout.Root
	for path, want := range map[string]string{
		d.Workspace: "threads/shared/alice/workspace", d.Uploads: "threads/t1/user-data/uploads",
		d.Outputs: "threads/t1/user-data/outputs", d.Skills: "threads/t1/skills",
	} {
		if rel, _ := filepath.Rel(root, path); rel != want {
			t.Errorf("dir %s, want %s", rel, want)
		}
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		}
	}
	if s.SandboxID() == (volume.Scope{UID: "bob", FileThread: "t1", SkillsThread: "t1"}).SandboxID() {
		t.Fatal("two users share a sandbox id")
	}
	for _, bad := range []volume.Scope{{UID: "..", FileThread: "t"}, {UID: "a/b", FileThread: "t"}, {UID: "a", FileThread: "shared"}, {UID: "", FileThread: "t"}} {
		if _, err := bad.Normalize(); !errors.Is(err, volume.ErrBadScope) {
			t.Errorf("scope %+v: %v", bad, err)
		}
	}
}

func TestWriteReadListAndRules(t *testing.T) {
	f, s, d := setup(t)
	if _, err := f.Write(s, "/home/gem/user-data/outputs/a/b.txt", strings.NewReader("hello\nworld\n"), false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(d.Outputs, "a", "b.txt")); string(got) != "hello\nworld\n" {
		t.Fatalf("host file %q", got)
	}
	data, size, err := f.Read(s, "outputs/a/b.txt", 0)
	if err != nil || string(data) != "hello\nworld\n" || size != 12 {
		t.Fatalf("read %q %d %v", data, size, err)
	}
	if _, err := f.Write(s, "outputs/a/b.txt", strings.NewReader("x"), true); !errors.Is(err, volume.ErrExists) {
		t.Fatalf("exclusive over an existing file: %v", err)
	}
	if _, err := f.Write(s, "outputs/big", strings.NewReader(strings.Repeat("x", 1025)), false); !errors.Is(err, volume.ErrTooLarge) {
		t.Fatalf("oversized write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Outputs, "big")); err == nil {
		t.Fatal("an oversized write left a file")
	}
	for _, p := range []string{"/home/gem/skills/x", "/etc/passwd", "/home/gem/user-data/x", "outputs/../../x", "/home/gem/user-data/outputs/../uploads/x", "/tmp/x"} {
		_, err := f.Write(s, p, strings.NewReader("x"), false)
		if !errors.Is(err, volume.ErrPathNotAllowed) && !errors.Is(err, volume.ErrReadOnly) && !errors.Is(err, volume.ErrIsDir) {
			t.Errorf("write %s: %v, want refused", p, err)
		}
	}
	entries, _, err := f.List(s, "/home/gem/user-data", 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.Path)
	}
	want := "/home/gem/user-data/workspace /home/gem/user-data/uploads /home/gem/user-data/outputs /home/gem/user-data/outputs/a /home/gem/user-data/outputs/a/b.txt"
	if strings.Join(paths, " ") != want {
		t.Fatalf("list:\n%s\nwant\n%s", strings.Join(paths, " "), want)
	}
	globbed, _, err := f.Glob(s, "", "**/*.txt", 10)
	if err != nil || len(globbed) != 1 || globbed[0] != "/home/gem/user-data/outputs/a/b.txt" {
		t.Fatalf("glob %v %v", globbed, err)
	}
	matches, _, err := f.Grep(s, "", "wor.d", "*.txt", 10)
	if err != nil || len(matches) != 1 || matches[0].Line != 2 {
		t.Fatalf("grep %+v %v", matches, err)
	}
	if err := f.Delete(s, "outputs/a", false); err == nil {
		t.Fatal("non-recursive delete of a non-empty dir succeeded")
	}
	if err := f.Delete(s, "outputs/a", true); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(s, "outputs", true); !errors.Is(err, volume.ErrPathNotAllowed) {
		t.Fatalf("deleting a root: %v", err)
	}
}

// Symlinks a sandbox planted never lead the provisioner outside the
// scope's directories, for reads, writes, listings or deletes.
func TestSymlinkEscapesRefused(t *testing.T) {
	f, s, d := setup(t)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(d.Outputs, "abs")))
	must(os.Symlink("../../../../../../../../"+strings.TrimPrefix(outside, "/"), filepath.Join(d.Outputs, "rel")))
	must(os.Symlink(filepath.Dir(outside), filepath.Join(d.Outputs, "dir")))
	must(os.Symlink("/proc/self/root"+outside, filepath.Join(d.Outputs, "proc")))
	for _, p := range []string{"outputs/abs", "outputs/rel", "outputs/dir/secret.txt", "outputs/proc"} {
		if data, _, err := f.Read(s, p, 0); err == nil || strings.Contains(string(data), "SECRET") {
			t.Errorf("read %s through a symlink: %q %v", p, data, err)
		}
	}
	if _, err := f.Write(s, "outputs/dir/new.txt", strings.NewReader("x"), false); err == nil {
		t.Error("write through a directory symlink succeeded")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "new.txt")); err == nil {
		t.Error("a file appeared outside the volume")
	}
	if _, err := f.Write(s, "outputs/abs", strings.NewReader("replaced"), false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "SECRET" {
		t.Fatalf("writing over a symlink changed its target: %q", got)
	}
	if _, _, err := f.List(s, "outputs/dir", 1, 10); err == nil {
		t.Error("listing through a directory symlink succeeded")
	}
	if err := f.Delete(s, "outputs/dir", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatal("deleting a symlink removed its target")
	}
}
