// Package backend is the one interface every sandbox backend of the
// provisioner implements (bwrap, docker, kubernetes, memory): create or
// reuse a sandbox for a Spec, run a command in it, destroy it, and list the
// sandboxes it created so a restarted provisioner finds or cleans them.
//
// A backend never chooses where files live: the provisioner lays out its
// volume and hands the backend host directories as Mounts; the backend only
// makes them appear at the sandbox paths below. A backend never sees a
// platform secret: Spec.Env is the per-user agent env merged over the global
// sandbox env, nothing more.
//
// Imported by: the provisioner, its backends and their contract tests
// (backend/backendtest). May import: the standard library only.
package backend

import (
	"context"
	"errors"
	"time"
)

// Paths inside every sandbox (as the original: /home/gem is the user's home).
const (
	Home          = "/home/gem"
	UserDataDir   = "/home/gem/user-data"
	WorkspaceDir  = "/home/gem/user-data/workspace" // rw: threads/shared/<uid>/workspace
	UploadsDir    = "/home/gem/user-data/uploads"   // rw: threads/<file_thread>/user-data/uploads
	OutputsDir    = "/home/gem/user-data/outputs"   // rw: threads/<file_thread>/user-data/outputs
	SkillsDir     = "/home/gem/skills"              // ro: threads/<skills_thread>/skills
	SandboxUID    = 1000                            // the non-root uid commands run as
	SandboxGID    = 1000
	DefaultOutput = 262144 // output cap in bytes when ExecRequest.MaxOutput is 0
)

// ErrNotFound: Exec or Destroy named a sandbox the backend does not have
// (never created, destroyed, or reaped). Destroy of an unknown id is not an
// error; Exec answers ErrNotFound so the caller can Ensure and retry.
var ErrNotFound = errors.New("sandbox not found")

// Mount binds a host directory (on the provisioner's volume) into the
// sandbox.
type Mount struct {
	HostPath, SandboxPath string
	ReadOnly              bool
}

// Limits bound what one sandbox may use; zero means the backend's default.
// CPUSeconds bounds CPU time per command; the others bound the sandbox.
type Limits struct {
	MemoryBytes, Pids, CPUSeconds, FileSizeBytes int64
}

// Or is l with each unset limit (zero or below) taken from d.
func (l Limits) Or(d Limits) Limits {
	pick := func(v, d int64) int64 {
		if v > 0 {
			return v
		}
		return d
	}
	return Limits{
		MemoryBytes:   pick(l.MemoryBytes, d.MemoryBytes),
		Pids:          pick(l.Pids, d.Pids),
		CPUSeconds:    pick(l.CPUSeconds, d.CPUSeconds),
		FileSizeBytes: pick(l.FileSizeBytes, d.FileSizeBytes),
	}
}

// Spec describes one sandbox. ID is derived by the provisioner from
// (FileThread, SkillsThread, UID) and is stable, so Ensure with the same
// Spec reuses the running sandbox.
type Spec struct {
	ID, UID, FileThread, SkillsThread string
	Env                               map[string]string // per-user agent env merged over global sandbox env; never platform secrets
	Mounts                            []Mount           // host dirs on the provisioner's volume -> /home/gem/user-data/{workspace,uploads,outputs} rw, /home/gem/skills ro
	Limits                            Limits
}

// ExecRequest is one command, run with /bin/sh -c. Workdir defaults to
// WorkspaceDir, Timeout to the backend's exec timeout, MaxOutput to
// DefaultOutput; Env is added over the sandbox's Spec.Env.
type ExecRequest struct {
	Command   string
	Workdir   string
	Timeout   time.Duration
	MaxOutput int
	Env       map[string]string
}

// ExecResult: Output is stdout and stderr interleaved, at most MaxOutput
// bytes (Truncated when more was written). A command killed by its timeout
// has TimedOut set and ExitCode -1 (or the signal's code); err is kept for
// failures of the sandbox itself, never for a command's non-zero exit.
type ExecResult struct {
	Output    []byte
	ExitCode  int
	Truncated bool
	TimedOut  bool
}

// Backend runs sandboxes. Implementations are safe for concurrent use.
type Backend interface {
	Name() string
	Ensure(ctx context.Context, s Spec) error // create or reuse; idempotent
	Exec(ctx context.Context, id string, r ExecRequest) (ExecResult, error)
	Destroy(ctx context.Context, id string) error
	List(ctx context.Context) ([]string, error) // sandboxes this backend created (restart recovery)
}
