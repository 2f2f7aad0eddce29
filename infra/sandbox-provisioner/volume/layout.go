// Package volume is the provisioner's file store: the layout of its volume
// (as the original: threads/<file_thread>/user-data/{uploads,outputs},
// threads/shared/<uid>/workspace, threads/<skills_thread>/skills), the
// mapping between sandbox virtual paths (/home/gem/user-data/…,
// /home/gem/skills/…) and host paths, and the file operations the
// provisioner serves without starting a sandbox. Every operation goes
// through an os.Root per mount, so `..` and symlinks cannot leave it; only
// the three user-data roots are writable.
//
// Imported by: the provisioner and the backend contract tests
// (infra/sandbox-provisioner/backend/backendtest). May import:
// infra/sandbox-provisioner/backend and the standard library.
package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// Scope names whose files a sandbox or a file call sees. SkillsThread and
// FileThread default to each other's value when one is empty (an ordinary
// agent uses its thread id for both). A scope with neither thread is a
// user's workspace alone (the workspace routes, mentions before a thread
// exists): file calls see only /home/gem/user-data/workspace, and no
// sandbox is ever created for it.
type Scope struct {
	UID          string `json:"uid"`
	FileThread   string `json:"file_thread_id"`
	SkillsThread string `json:"skills_thread_id"`
}

// ErrBadScope: an id is empty, too long, or not [A-Za-z0-9._-] (so it can
// never name a path outside its own directory).
var ErrBadScope = errors.New("bad sandbox scope")

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Normalize fills defaults and validates.
func (s Scope) Normalize() (Scope, error) {
	if s.SkillsThread == "" {
		s.SkillsThread = s.FileThread
	}
	if s.FileThread == "" {
		s.FileThread = s.SkillsThread
	}
	ids := map[string]string{"uid": s.UID, "file_thread_id": s.FileThread, "skills_thread_id": s.SkillsThread}
	if s.WorkspaceOnly() {
		ids = map[string]string{"uid": s.UID}
	}
	for name, v := range ids {
		if !idPattern.MatchString(v) || v == "shared" {
			return s, fmt.Errorf("%w: %s %q", ErrBadScope, name, v)
		}
	}
	return s, nil
}

// WorkspaceOnly reports a scope without threads: the user's workspace alone.
func (s Scope) WorkspaceOnly() bool { return s.FileThread == "" && s.SkillsThread == "" }

// SandboxID is the stable id of the sandbox serving a scope: the same
// (file thread, skills thread, uid) always names the same sandbox, and
// different users never share one.
func (s Scope) SandboxID() string {
	h := sha256.Sum256([]byte(s.UID + "\x00" + s.FileThread + "\x00" + s.SkillsThread))
	return "sb-" + hex.EncodeToString(h[:12])
}

// Owner is the host uid/gid that must own the writable directories so a
// sandbox process (a non-root uid) can write them; -1 leaves ownership
// alone (a provisioner that is not root).
type Owner struct{ UID, GID int }

// Layout places scopes on a volume directory.
type Layout struct {
	Root  string // the volume; threads/ lives below it
	Owner Owner
}

// Dirs are the host directories of one scope.
type Dirs struct {
	Workspace, Uploads, Outputs, Skills string
}

// DirsOf returns where a (normalized) scope's files live.
func (l Layout) DirsOf(s Scope) Dirs {
	t := filepath.Join(l.Root, "threads")
	return Dirs{
		Workspace: filepath.Join(t, "shared", s.UID, "workspace"),
		Uploads:   filepath.Join(t, s.FileThread, "user-data", "uploads"),
		Outputs:   filepath.Join(t, s.FileThread, "user-data", "outputs"),
		Skills:    filepath.Join(t, s.SkillsThread, "skills"),
	}
}

// Prepare creates a scope's directories (idempotent) and returns the
// mounts a backend binds into the sandbox. Intermediate directories are
// 0711 so a non-root sandbox uid can traverse to its own mount sources
// but list nothing; the three user-data roots belong to Owner.
func (l Layout) Prepare(s Scope) ([]backend.Mount, error) {
	s, err := s.Normalize()
	if err != nil {
		return nil, err
	}
	d := l.DirsOf(s)
	if s.WorkspaceOnly() {
		if err := mkdirTraversable(l.Root, d.Workspace); err != nil {
			return nil, err
		}
		if err := os.Chmod(d.Workspace, 0o755); err != nil {
			return nil, err
		}
		if l.Owner.UID >= 0 {
			if err := os.Lchown(d.Workspace, l.Owner.UID, l.Owner.GID); err != nil {
				return nil, fmt.Errorf("chown %s: %w", d.Workspace, err)
			}
		}
		return []backend.Mount{{HostPath: d.Workspace, SandboxPath: backend.WorkspaceDir}}, nil
	}
	for _, dir := range []string{d.Workspace, d.Uploads, d.Outputs, d.Skills} {
		if err := mkdirTraversable(l.Root, dir); err != nil {
			return nil, err
		}
	}
	for _, dir := range []string{d.Workspace, d.Uploads, d.Outputs} {
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if l.Owner.UID >= 0 {
			if err := os.Lchown(dir, l.Owner.UID, l.Owner.GID); err != nil {
				return nil, fmt.Errorf("chown %s: %w", dir, err)
			}
		}
	}
	if err := os.Chmod(d.Skills, 0o755); err != nil {
		return nil, err
	}
	return []backend.Mount{
		{HostPath: d.Workspace, SandboxPath: backend.WorkspaceDir},
		{HostPath: d.Uploads, SandboxPath: backend.UploadsDir},
		{HostPath: d.Outputs, SandboxPath: backend.OutputsDir},
		{HostPath: d.Skills, SandboxPath: backend.SkillsDir, ReadOnly: true},
	}, nil
}

// mkdirTraversable creates dir and its missing parents below root with
// mode 0711 (MkdirAll's mode is filtered by the umask, so chmod after).
func mkdirTraversable(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return err
	}
	cur := root
	if err := os.MkdirAll(root, 0o711); err != nil {
		return err
	}
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == "." || part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		} else if err == nil {
			if err := os.Chmod(cur, 0o711); err != nil {
				return err
			}
		}
	}
	return nil
}
