package kbtool

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kbtool/kbspec"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Outputs saves a file as name in the run's thread outputs (the sandbox's
// /home/gem/user-data/outputs, a free name: name_1.ext, … when taken by
// other content) and returns its sandbox path (sandboxtool.SaveOutput).
// Saving the same bytes again returns the same path: a redelivered call
// adds nothing.
type Outputs func(ctx context.Context, c tool.Call, name string, data []byte) (string, error)

// MaxDownloadBytes bounds one download_kb_file.
const MaxDownloadBytes = 100 << 20

type downloadFile struct{ d Deps }

func (downloadFile) Spec() tool.Spec { return kbspec.DownloadFile() }

func (t downloadFile) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	return run(ctx, t.d, c, func(sc scope, a struct {
		FileID string `json:"file_id"`
		SaveAs string `json:"save_as"`
	}) (any, error) {
		if t.d.Outputs == nil || t.d.ReadObject == nil {
			return nil, failure.Unprocessable("sandbox_unavailable", "download_kb_file needs the sandbox, which is not configured here")
		}
		if strings.TrimSpace(a.FileID) == "" {
			return nil, failure.Unprocessable("file_id_required", "file_id is required")
		}
		f, err := t.d.KBs.LoadFile(ctx, a.FileID)
		if errors.Is(err, kb.ErrNotFound) || (err == nil && f.IsFolder) {
			return nil, failure.NotFound("file_not_found", "file %q not found in the knowledge bases of this conversation", a.FileID)
		}
		if err != nil {
			return nil, err
		}
		// Access at the point of effect: the file's KB must be readable by
		// the user and enabled for the run's agent.
		k, err := sc.kb(ctx, t.d, f.KBID)
		if fe, ok := failure.As(err); ok && fe.Code == "kb_not_available" {
			return nil, failure.NotFound("file_not_found", "file %q not found in the knowledge bases of this conversation", a.FileID)
		}
		if err != nil {
			return nil, err
		}
		if f.ObjectKey == nil || *f.ObjectKey == "" {
			return nil, failure.Unprocessable("no_original", "file %q has no stored original (a read-only source or a folder)", a.FileID)
		}
		name := path.Base(strings.ReplaceAll(a.SaveAs, "\\", "/")) // directories stripped: no traversal
		if a.SaveAs == "" || name == "." || name == "/" || name == ".." {
			name = f.Filename
			if f.OriginalFilename != "" {
				name = f.OriginalFilename
			}
			name = path.Base(strings.ReplaceAll(name, "\\", "/"))
		}
		if name == "" || name == "." || name == ".." || name == "/" {
			name = f.FileID
		}
		data, err := t.d.ReadObject(ctx, *f.ObjectKey, MaxDownloadBytes)
		if err != nil {
			return nil, err
		}
		p, err := t.d.Outputs(ctx, c, name, data)
		if err != nil {
			return nil, err
		}
		return map[string]any{"path": p, "file_id": f.FileID, "kb_id": k.KBID, "filename": name, "size_bytes": len(data),
			"message": fmt.Sprintf("Saved the original file to %s; open it from code (e.g. python) or parse it with ocr_parse_file.", p)}, nil
	})
}
