package sandboxtool

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// ArtifactRecorder keeps the files a call presented on the run's thread
// (shared/thread's Store), idempotent by tool call id.
type ArtifactRecorder interface {
	RecordArtifacts(ctx context.Context, uid, threadID, runID, toolCallID string, paths []string) error
}

// Internal directories of outputs/ that are never presented: the tool-call
// stage's own files (the original refuses them too).
var internalOutputs = []string{LargeResultsDir, sandbox.OutputsDir + "/conversation_history"}

// MaxPresented bounds one present_artifacts call.
const MaxPresented = 50

// ---- present_artifacts

type presentArtifacts struct {
	c   Client
	rec ArtifactRecorder
}

func (presentArtifacts) Spec() tool.Spec {
	return tool.Spec{Name: "present_artifacts", DisplayName: "Present artifacts", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "Show result files to the user: they appear as artifact cards the user can preview, download or save to their workspace. " +
			"Only files under /home/gem/user-data/outputs/ can be presented (write or move them there first); present final results, " +
			"not intermediate or internal files. Present related files in one call.",
		Parameters: schema(`{"type":"object","properties":{"filepaths":{"type":"array","minItems":1,"maxItems":50,"items":{"type":"string"},` +
			`"description":"sandbox paths of files under /home/gem/user-data/outputs/"}},"required":["filepaths"],"additionalProperties":false}`)}
}

// outputsPath is p as a clean sandbox path when it names a file below
// outputs/ that may be presented.
func outputsPath(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", fmt.Errorf("an empty path")
	}
	if !strings.HasPrefix(p, "/") {
		p = sandbox.UserDataDir + "/" + p
	}
	clean := path.Clean(p)
	if !strings.HasPrefix(clean, sandbox.OutputsDir+"/") {
		return "", fmt.Errorf("%s is not under %s/: only outputs can be presented", p, sandbox.OutputsDir)
	}
	for _, dir := range internalOutputs {
		if clean == dir || strings.HasPrefix(clean, dir+"/") {
			return "", fmt.Errorf("%s is an internal file of the tool-call stage and cannot be presented", p)
		}
	}
	return clean, nil
}

func (t presentArtifacts) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		FilePaths []string `json:"filepaths"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if len(a.FilePaths) == 0 || len(a.FilePaths) > MaxPresented {
		return tool.Errorf(fmt.Sprintf("filepaths needs 1 to %d paths", MaxPresented)), nil
	}
	var paths []string
	seen := map[string]bool{}
	for _, p := range a.FilePaths {
		clean, err := outputsPath(p)
		if err != nil {
			return tool.Errorf(err.Error()), nil
		}
		e, err := t.c.Stat(ctx, scopeOf(c), clean)
		if err != nil {
			return result(err)
		}
		if e.IsDir {
			return tool.Errorf(clean + " is a directory: present the files in it"), nil
		}
		if !seen[clean] {
			seen[clean] = true
			paths = append(paths, clean)
		}
	}
	if t.rec != nil {
		err := t.rec.RecordArtifacts(ctx, c.UID, c.ThreadID, c.RunID, c.ToolCallID, paths)
		if fe, ok := failure.As(err); ok && fe.Kind == failure.KindNotFound {
			return tool.Errorf("this conversation no longer exists"), nil
		}
		if err != nil {
			return tool.Result{}, err
		}
	}
	return tool.Result{Output: "Presented to the user: " + strings.Join(paths, ", ")}, nil
}
