// Package sandboxes opens the agent's file-system and sandbox tools on a
// bootstrap.Core: the shared/sandbox client of the provisioner named by
// SANDBOX_PROVISIONER_URL, with each user's agent env (/api/user/agent-env)
// merged in when their sandbox is created.
//
// Imported by: the tool-invoke, intake and agent-step mains.
// May import: shared/blob, shared/bootstrap, shared/sandbox, shared/sandboxtool, shared/skill, shared/thread, shared/tool, shared/usersettings.
package sandboxes

import (
	"bytes"
	"context"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/shared/usersettings"
)

// Tools returns the tools that run on the provisioner, or none when no
// provisioner is configured. With skills, each call first writes the run's
// shared skills into the sandbox's read-only /home/gem/skills. parse is
// ocr_parse_file's document parser (the caller links the parsers: this
// package must not, since agent-step imports it).
func Tools(core *bootstrap.Core, skills *skill.Service, parse sandboxtool.Parse) ([]tool.Tool, error) {
	cfg := core.Config
	if cfg.SandboxURL == "" {
		return nil, nil
	}
	sb, err := sandbox.New(cfg.SandboxURL, cfg.SandboxToken, nil)
	if err != nil {
		return nil, err
	}
	env := usersettings.New(core.Pool, nil).EnvForUID // reads agent_envs only
	tc := sandboxtool.Config{ExecTimeout: cfg.SandboxExecTimeout, Env: env, Artifacts: thread.NewStore(core.Pool), OCREngine: cfg.OCREngine, Parse: parse}
	if skills != nil {
		tc.Prepare = skills.Materializer(sb).Prepare
	}
	return sandboxtool.New(sb, tc), nil
}

// Client is the provisioner's client for the file routes (intake), or nil
// when no provisioner is configured. bootstrap.Load has already refused a
// malformed SANDBOX_PROVISIONER_URL or a short token, so New cannot fail
// here; should it, the failure is logged and the routes answer 503.
func Client(core *bootstrap.Core) *sandbox.Client {
	cfg := core.Config
	if cfg.SandboxURL == "" {
		return nil
	}
	sb, err := sandbox.New(cfg.SandboxURL, cfg.SandboxToken, nil)
	if err != nil {
		core.Log.Error("sandbox provisioner client", "error", err)
		return nil
	}
	return sb
}

// LargeResults is where tool-invoke offloads tool results too large for the
// model's context: the thread's outputs/large_tool_results/ on the
// provisioner, or the object store b when no provisioner is configured.
func LargeResults(core *bootstrap.Core, b blob.Store) sandboxtool.LargeResults {
	put := func(ctx context.Context, key string, data []byte) error {
		_, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), "text/plain; charset=utf-8")
		return err
	}
	if sb := Client(core); sb != nil {
		return sandboxtool.LargeResults{Files: sb, Blob: put}
	}
	return sandboxtool.LargeResults{Blob: put}
}

// Outputs saves into a run's sandbox outputs (download_kb_file), or nil
// when no provisioner is configured.
func Outputs(core *bootstrap.Core) func(ctx context.Context, c tool.Call, name string, data []byte) (string, error) {
	sb := Client(core)
	if sb == nil {
		return nil
	}
	return sandboxtool.SaveOutput(sb)
}

// WorkspaceReader reads files of a user's workspace (agent-step's prompt
// files).
type WorkspaceReader interface {
	List(ctx context.Context, s sandbox.Scope, path string, depth int) ([]sandbox.Entry, bool, error)
	ReadFile(ctx context.Context, s sandbox.Scope, path string, maxBytes int64) (data []byte, size int64, truncated bool, err error)
}

// Workspace is Client as a WorkspaceReader: nil (a nil interface, not a
// nil pointer in one) when no provisioner is configured.
func Workspace(core *bootstrap.Core) WorkspaceReader {
	if c := Client(core); c != nil {
		return c
	}
	return nil
}
