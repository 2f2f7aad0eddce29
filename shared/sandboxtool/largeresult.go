package sandboxtool

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// BlobPut stores an object (the object store, when no provisioner is
// configured).
type BlobPut func(ctx context.Context, key string, data []byte) error

// LargeResults keeps tool results too large for the model's context: in
// the thread's outputs/large_tool_results/<tool call id>.txt through the
// provisioner when one is configured (the model reads it back with
// read_file, the viewer lists it), otherwise in the object store under
// large_tool_results/<uid>/<thread>/<tool call id>.txt. Writing again for
// the same call overwrites it: idempotent by tool call id.
type LargeResults struct {
	Files Client  // nil: no provisioner
	Blob  BlobPut // used when Files is nil
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// LargeResultName is the file name of call id's offloaded result.
func LargeResultName(toolCallID string) string {
	id := unsafeID.ReplaceAllString(toolCallID, "_")
	if id == "" || strings.Trim(id, ".") == "" {
		id = "result"
	}
	return id + ".txt"
}

// Offload stores output and returns where: a sandbox path, or an object
// key prefixed "object store: ".
func (l LargeResults) Offload(ctx context.Context, c tool.Call, output string) (string, error) {
	data := []byte(output)
	if len(data) > MaxWriteBytes {
		data = data[:MaxWriteBytes]
	}
	name := LargeResultName(c.ToolCallID)
	if l.Files != nil {
		p := LargeResultsDir + "/" + name
		if _, err := l.Files.WriteFile(ctx, scopeOf(c), p, data, false); err != nil {
			return "", fmt.Errorf("offload the result of %s: %w", c.ToolCallID, err)
		}
		return p, nil
	}
	if l.Blob == nil {
		return "", fmt.Errorf("offload the result of %s: no provisioner and no object store", c.ToolCallID)
	}
	key := "large_tool_results/" + unsafeID.ReplaceAllString(c.UID, "_") + "/" + unsafeID.ReplaceAllString(c.ThreadID, "_") + "/" + name
	if err := l.Blob(ctx, key, data); err != nil {
		return "", fmt.Errorf("offload the result of %s: %w", c.ToolCallID, err)
	}
	return "object store: " + key, nil
}

// LargeResultPreview is what the model gets instead of an offloaded
// result (the original's message): where the whole result is and its first
// lines, the preview at most previewChars characters.
func LargeResultPreview(toolCallID, where, output string, tokens, previewChars int) string {
	lines := strings.SplitN(output, "\n", 11)
	if len(lines) > 10 {
		lines = lines[:10]
	}
	var sample bytes.Buffer
	for _, l := range lines {
		if r := []rune(l); len(r) > 1000 {
			l = string(r[:1000]) + "…"
		}
		sample.WriteString(l)
		sample.WriteByte('\n')
	}
	preview := sample.String()
	if r := []rune(preview); len(r) > previewChars {
		preview = string(r[:previewChars]) + "…\n"
	}
	if strings.HasPrefix(where, "/") {
		return fmt.Sprintf("Tool result too large (about %d tokens): the result of tool call %s was saved at %s.\n"+
			"Read it with read_file, a part at a time (offset and limit, e.g. offset=0 limit=100), or search it with grep.\n\n"+
			"The first lines of the result:\n%s", tokens, toolCallID, where, preview)
	}
	return fmt.Sprintf("Tool result too large (about %d tokens): the result of tool call %s was saved (%s); it is not readable from this conversation's tools.\n\n"+
		"The first lines of the result:\n%s", tokens, toolCallID, where, preview)
}

// SaveOutput saves data as name (a bare file name) in the call's thread
// outputs/ and returns its sandbox path. A name taken by other content
// gets a suffix (report_1.pdf, …); a name holding the same bytes is
// reused, so a redelivered call adds nothing (kbtool.Outputs).
func SaveOutput(c Client) func(ctx context.Context, call tool.Call, name string, data []byte) (string, error) {
	return func(ctx context.Context, call tool.Call, name string, data []byte) (string, error) {
		ext := path.Ext(name)
		stem := strings.TrimSuffix(name, ext)
		for i := 0; i < 100; i++ {
			cand := name
			if i > 0 {
				cand = fmt.Sprintf("%s_%d%s", stem, i, ext)
			}
			p := sandbox.OutputsDir + "/" + cand
			_, err := c.WriteFile(ctx, scopeOf(call), p, data, true)
			if err == nil {
				return p, nil
			}
			if !sandbox.IsCode(err, "exists") {
				return "", err
			}
			if cur, _, _, rerr := c.ReadFile(ctx, scopeOf(call), p, int64(len(data))+1); rerr == nil && bytes.Equal(cur, data) {
				return p, nil
			}
		}
		return "", failure.Conflict("name_taken", "too many files named like %s in outputs/", name)
	}
}
