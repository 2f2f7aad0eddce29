// Package backend is the interface every sandbox backend (bwrap, docker,
// kubernetes, memory) implements for the sandbox provisioner.
//
// Imported by: infra/sandbox-provisioner and its backends. May import: the standard library.
package backend

import (
	"context"
	"time"
)

type Mount struct {
	HostPath, SandboxPath string
	ReadOnly              bool
}
type Limits struct{ MemoryBytes, Pids, CPUSeconds, FileSizeBytes int64 }
type Spec struct {
	ID, UID, FileThread, SkillsThread string
	Env                               map[string]string
	Mounts                            []Mount // host dirs on the provisioner's volume -> /home/gem/user-data/{workspace,uploads,outputs} rw, /home/gem/skills ro
	Limits                            Limits
}
type ExecRequest struct {
	Command   string
	Workdir   string
	Timeout   time.Duration
	MaxOutput int
	Env       map[string]string
}
type ExecResult struct {
	Output              []byte
	ExitCode            int
	Truncated, TimedOut bool
}
type Backend interface {
	Name() string
	Ensure(ctx context.Context, s Spec) error
	Exec(ctx context.Context, id string, r ExecRequest) (ExecResult, error)
	Destroy(ctx context.Context, id string) error
	List(ctx context.Context) ([]string, error)
}
