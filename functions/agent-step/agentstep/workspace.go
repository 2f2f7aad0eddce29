package agentstep

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// WorkspaceFiles reads the user's workspace on the sandbox provisioner
// (*sandbox.Client).
type WorkspaceFiles interface {
	ReadFile(ctx context.Context, s sandbox.Scope, path string, maxBytes int64) (data []byte, size int64, truncated bool, err error)
}

// WorkspacePromptFiles are appended to the system prompt in this order, as
// the original: long-lived working rules, the user's stable preferences,
// facts worth keeping across conversations.
var WorkspacePromptFiles = []string{"AGENTS.md", "USER.md", "MEMORY.md"}

// WorkspacePromptLimit is the most of each file the prompt takes.
const WorkspacePromptLimit = 64 << 10

// workspacePrompt is the system prompt section made of the user's
// workspace files agents/AGENTS.md, USER.md and MEMORY.md: each non-empty
// one under its own heading, cut at 64 KiB (at a character boundary) with
// a mark saying so. A file that is missing, empty or unreadable is left
// out: it never stops the run.
func (s *step) workspacePrompt(ctx context.Context) string {
	ws := s.h.cfg.Workspace
	if ws == nil {
		return ""
	}
	var b strings.Builder
	scope := sandbox.Scope{UID: s.r.UID, FileThread: s.r.ThreadID}
	for _, name := range WorkspacePromptFiles {
		path := sandbox.WorkspaceDir + "/agents/" + name
		data, size, truncated, err := ws.ReadFile(ctx, scope, path, WorkspacePromptLimit+1)
		if err != nil {
			if !sandbox.IsCode(err, "not_found") {
				s.h.log.Warn("workspace prompt file", "run", s.r.ID, "file", name, "error", err)
			}
			continue
		}
		text, cut := clip(data, WorkspacePromptLimit)
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&b, "\n\n## %s (your workspace: %s)\n\n%s", name, path, text)
		if cut || truncated {
			fmt.Fprintf(&b, "\n\n[%s truncated: only its first %d KiB of %d bytes are shown]", name, WorkspacePromptLimit>>10, max(size, int64(len(data))))
		}
	}
	return b.String()
}

// clip cuts data to at most limit bytes without splitting a UTF-8 character.
func clip(data []byte, limit int) (string, bool) {
	if len(data) <= limit {
		return string(data), false
	}
	n := limit
	for n > 0 && !utf8.RuneStart(data[n]) {
		n--
	}
	return string(data[:n]), true
}
