package agentstep

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// WorkspaceFiles reads the user's workspace on the sandbox provisioner
// (*sandbox.Client).
type WorkspaceFiles interface {
	List(ctx context.Context, s sandbox.Scope, path string, depth int) ([]sandbox.Entry, bool, error)
	ReadFile(ctx context.Context, s sandbox.Scope, path string, maxBytes int64) (data []byte, size int64, truncated bool, err error)
}

// WorkspacePromptFiles are appended to the system prompt in this order, as
// the original: long-lived working rules, the user's stable preferences,
// facts worth keeping across conversations.
var WorkspacePromptFiles = []string{"AGENTS.md", "USER.md", "MEMORY.md"}

// WorkspacePromptLimit is the most of each file the prompt takes.
const WorkspacePromptLimit = 64 << 10

// WorkspacePrompt builds the system prompt section of the user's workspace
// files. Each step lists the workspace's agents/ folder (one provisioner
// call) and reads only the prompt files whose size or modification time
// changed since this process last read them: the agent may edit MEMORY.md
// during a run, and the next step sees the new text. Safe for concurrent use.
type WorkspacePrompt struct {
	ws  WorkspaceFiles
	log *slog.Logger
	mu  sync.Mutex
	got map[string]promptFile // uid + path → the file as last read
}

type promptFile struct {
	mod       time.Time
	size      int64
	data      []byte
	truncated bool
}

// promptCacheSize bounds the cache (it starts over when full).
const promptCacheSize = 4096

// NewWorkspacePrompt reads through ws.
func NewWorkspacePrompt(ws WorkspaceFiles, log *slog.Logger) *WorkspacePrompt {
	if log == nil {
		log = slog.Default()
	}
	return &WorkspacePrompt{ws: ws, log: log, got: map[string]promptFile{}}
}

// Section is the system prompt section made of uid's workspace files
// agents/AGENTS.md, USER.md and MEMORY.md: each non-empty one under its own
// heading, cut at 64 KiB (at a character boundary) with a mark saying so. A
// file that is missing, empty or unreadable is left out: it never stops the
// run.
func (p *WorkspacePrompt) Section(ctx context.Context, uid, threadID string) string {
	scope := sandbox.Scope{UID: uid, FileThread: threadID}
	dir := sandbox.WorkspaceDir + "/agents"
	entries, _, err := p.ws.List(ctx, scope, dir, 1)
	if err != nil {
		if !sandbox.IsCode(err, "not_found") {
			p.log.Warn("workspace prompt files", "uid", uid, "error", err)
		}
		return ""
	}
	listed := map[string]sandbox.Entry{}
	for _, e := range entries {
		if !e.IsDir {
			listed[path.Base(e.Path)] = e
		}
	}
	var b strings.Builder
	for _, name := range WorkspacePromptFiles {
		e, ok := listed[name]
		if !ok || e.Size == 0 {
			continue
		}
		file := dir + "/" + name
		f, err := p.read(ctx, scope, file, e)
		if err != nil {
			if !sandbox.IsCode(err, "not_found") {
				p.log.Warn("workspace prompt file", "uid", uid, "file", name, "error", err)
			}
			continue
		}
		text, cut := clip(f.data, WorkspacePromptLimit)
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&b, "\n\n## %s (your workspace: %s)\n\n%s", name, file, text)
		if cut || f.truncated {
			fmt.Fprintf(&b, "\n\n[%s truncated: only its first %d KiB of %d bytes are shown]", name, WorkspacePromptLimit>>10, max(f.size, int64(len(f.data))))
		}
	}
	return b.String()
}

// read returns file as listed in e: from the cache when its size and
// modification time are those of the cached copy, else read now.
func (p *WorkspacePrompt) read(ctx context.Context, scope sandbox.Scope, file string, e sandbox.Entry) (promptFile, error) {
	key := scope.UID + "\x00" + file
	p.mu.Lock()
	f, ok := p.got[key]
	p.mu.Unlock()
	if ok && f.size == e.Size && f.mod.Equal(e.ModTime) {
		return f, nil
	}
	data, size, truncated, err := p.ws.ReadFile(ctx, scope, file, WorkspacePromptLimit+1)
	if err != nil {
		return promptFile{}, err
	}
	f = promptFile{mod: e.ModTime, size: max(size, e.Size), data: data, truncated: truncated}
	p.mu.Lock()
	if len(p.got) >= promptCacheSize {
		p.got = map[string]promptFile{}
	}
	p.got[key] = f
	p.mu.Unlock()
	return f, nil
}

// workspacePrompt is the run's user's workspace section (WorkspacePrompt).
func (s *step) workspacePrompt(ctx context.Context) string {
	if s.h.workspace == nil {
		return ""
	}
	return s.h.workspace.Section(ctx, s.r.UID, s.r.ThreadID)
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
