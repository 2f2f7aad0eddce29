package sandboxtool

import (
	"context"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// OCR limits and places.
const (
	MaxOCRBytes = 100 << 20 // a document given to ocr_parse_file
	OCRDir      = sandbox.OutputsDir + "/ocr"
)

// Parse turns a document (PDF, Office, image, …) into Markdown with the
// configured OCR engine: doc-parse's parser (shared/docparse). Its coded
// failures (unsupported format, ocr_failed, …) are shown to the model.
type Parse func(ctx context.Context, filename string, data []byte) (string, error)

// ---- ocr_parse_file

type ocrParseFile struct {
	c      Client
	parse  Parse
	engine string
}

func (ocrParseFile) Spec() tool.Spec {
	return tool.Spec{Name: "ocr_parse_file", DisplayName: "Parse document", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "Convert a PDF, Office document (docx, xlsx, pptx) or image under /home/gem/user-data/{workspace,uploads,outputs} to Markdown " +
			"with the configured OCR engine. The Markdown is written to /home/gem/user-data/outputs/ocr/<name>.md; the answer gives that path, " +
			"its length and a short preview: read the file with read_file for the rest. Nothing is added to any knowledge base.",
		Parameters: schema(`{"type":"object","properties":{"file_path":{"type":"string","description":"sandbox path of the document"},` +
			`"ocr_engine":{"type":"string","description":"OCR engine id; default: the system's configured engine"}},"required":["file_path"],"additionalProperties":false}`)}
}

// userDataPath is p as a clean sandbox path under one of the three
// user-data roots (the provisioner refuses symlink escapes on top).
func userDataPath(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", fmt.Errorf("file_path is required")
	}
	if !strings.HasPrefix(p, "/") {
		p = sandbox.UserDataDir + "/" + p
	}
	clean := path.Clean(p)
	for _, root := range []string{sandbox.WorkspaceDir, sandbox.UploadsDir, sandbox.OutputsDir} {
		if strings.HasPrefix(clean, root+"/") {
			return clean, nil
		}
	}
	return "", fmt.Errorf("%s is not under %s/{workspace,uploads,outputs}", p, sandbox.UserDataDir)
}

func (t ocrParseFile) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		FilePath  string `json:"file_path"`
		OCREngine string `json:"ocr_engine"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	src, err := userDataPath(a.FilePath)
	if err != nil {
		return tool.Errorf(err.Error()), nil
	}
	if t.parse == nil {
		return tool.Errorf("no document parser is configured here"), nil
	}
	if a.OCREngine != "" && a.OCREngine != t.engine {
		configured := t.engine
		if configured == "" {
			configured = "none (text layers and office formats only)"
		}
		return tool.Errorf(fmt.Sprintf("OCR engine %q is not available; configured: %s", a.OCREngine, configured)), nil
	}
	data, size, truncated, err := t.c.ReadFile(ctx, scopeOf(c), src, MaxOCRBytes)
	if err != nil {
		return result(err)
	}
	if truncated || size > MaxOCRBytes {
		return tool.Errorf(fmt.Sprintf("%s is %d bytes; ocr_parse_file takes documents up to %d bytes", src, size, MaxOCRBytes)), nil
	}
	md, err := t.parse(ctx, path.Base(src), data)
	if fe, ok := failure.As(err); ok {
		return tool.Errorf(fmt.Sprintf("cannot parse %s: %s: %s", src, fe.Code, fe.Message)), nil
	}
	if err != nil {
		return tool.Errorf(fmt.Sprintf("cannot parse %s: %v", src, err)), nil
	}
	name := strings.TrimSuffix(path.Base(src), path.Ext(src)) + ".md"
	if src == OCRDir+"/"+name {
		name = strings.TrimSuffix(name, ".md") + ".ocr.md"
	}
	dst := OCRDir + "/" + name
	out := []byte(md)
	if len(out) > MaxWriteBytes {
		return tool.Errorf(fmt.Sprintf("the Markdown of %s is over %d bytes", src, MaxWriteBytes)), nil
	}
	// Same input, same output: a redelivered call overwrites with the same text.
	if _, err := t.c.WriteFile(ctx, scopeOf(c), dst, out, false); err != nil {
		return result(err)
	}
	preview := md
	if r := []rune(preview); len(r) > 500 {
		preview = string(r[:500]) + "…"
	}
	return tool.Result{Output: fmt.Sprintf("Parsed %s to %s (%d characters).\nPreview:\n%s", src, dst, utf8.RuneCountInString(md), preview)}, nil
}
