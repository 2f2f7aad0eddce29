package kb

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// ErrNoMarkdown: the file has no parsed Markdown (yet).
var ErrNoMarkdown = errors.New("no markdown")

// MaxMarkdownBytes bounds the Markdown read, and an edited document.
const MaxMarkdownBytes = 64 << 20

// Revision is the version of f's content that an edit must name
// (EditMarkdown): its updated_at, read with the content.
func (f File) Revision() string { return f.UpdatedAt.UTC().Format(time.RFC3339Nano) }

// ListFiles lists the files and folders of a KB sub may read.
func (l *Library) ListFiles(ctx context.Context, sub access.Subject, kbID string, in ListInput) ([]File, int, error) {
	if _, err := l.KB(ctx, sub, kbID); err != nil {
		return nil, 0, err
	}
	return l.store.ListFiles(ctx, kbID, in)
}

// FileExists reports whether a KB sub may read holds a file by display name
// or relative path (see Store.FileExists).
func (l *Library) FileExists(ctx context.Context, sub access.Subject, kbID, name string) (bool, error) {
	if _, err := l.KB(ctx, sub, kbID); err != nil {
		return false, err
	}
	return l.store.FileExists(ctx, kbID, name)
}

// File returns a file of a KB sub may read.
func (l *Library) File(ctx context.Context, sub access.Subject, kbID, fileID string) (File, error) {
	_, f, err := l.store.GetFile(ctx, sub, kbID, fileID)
	return f, err
}

// Document is a file with its content: chunks and parsed Markdown.
type Document struct {
	File     File
	Chunks   []ChunkView
	Markdown string // "" before the file is parsed
}

// Document returns a file of a KB sub may read, with its chunks and Markdown.
func (l *Library) Document(ctx context.Context, sub access.Subject, kbID, fileID string) (Document, error) {
	_, f, err := l.store.GetFile(ctx, sub, kbID, fileID)
	if err != nil {
		return Document{}, err
	}
	chunks, err := l.store.FileChunks(ctx, f.FileID)
	if err != nil {
		return Document{}, err
	}
	md, err := l.markdown(ctx, f)
	if err != nil && !errors.Is(err, ErrNoMarkdown) {
		return Document{}, err
	}
	return Document{File: f, Chunks: chunks, Markdown: md}, nil
}

// markdown reads f's parsed Markdown (ErrNoMarkdown when it has none).
func (l *Library) markdown(ctx context.Context, f File) (string, error) {
	if f.MarkdownKey == nil {
		return "", ErrNoMarkdown
	}
	rc, _, err := l.objects.Get(ctx, *f.MarkdownKey)
	if errors.Is(err, blob.ErrNotFound) {
		return "", ErrNoMarkdown
	}
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxMarkdownBytes))
	return string(b), err
}

// parsedMarkdown is a file of a KB sub may read with its Markdown; a file
// not parsed yet is refused (422 not_parsed).
func (l *Library) parsedMarkdown(ctx context.Context, sub access.Subject, kbID, fileID string) (File, string, error) {
	_, f, err := l.store.GetFile(ctx, sub, kbID, fileID)
	if err != nil {
		return File{}, "", err
	}
	md, err := l.markdown(ctx, f)
	if errors.Is(err, ErrNoMarkdown) {
		return File{}, "", failure.Unprocessable("not_parsed", "the file has not been parsed yet (status %s)", f.Status)
	}
	return f, md, err
}

// Open returns limit lines (1 to 1800) from offset of a parsed file of a KB
// sub may read.
func (l *Library) Open(ctx context.Context, sub access.Subject, kbID, fileID string, offset, limit int) (Window, error) {
	_, f, err := l.store.GetFile(ctx, sub, kbID, fileID)
	if err != nil {
		return Window{}, err
	}
	if limit < 1 || limit > 1800 {
		return Window{}, failure.Unprocessable("invalid_window", "limit must be between 1 and 1800")
	}
	md, err := l.markdown(ctx, f)
	if errors.Is(err, ErrNoMarkdown) {
		return Window{}, failure.Unprocessable("not_parsed", "the file has not been parsed yet (status %s)", f.Status)
	}
	if err != nil {
		return Window{}, err
	}
	return OpenWindow(f.KBID, f.FileID, md, 0, offset, limit)
}

// Find searches a parsed file of a KB sub may read (see the package function Find).
func (l *Library) Find(ctx context.Context, sub access.Subject, kbID, fileID string, o FindOptions) (FindResult, error) {
	f, md, err := l.parsedMarkdown(ctx, sub, kbID, fileID)
	if err != nil {
		return FindResult{}, err
	}
	return Find(f.KBID, f.FileID, md, o)
}

// Original opens the uploaded original of a file of a KB sub may read; the
// caller closes it. Files from a bucket have no original here (404).
func (l *Library) Original(ctx context.Context, sub access.Subject, kbID, fileID string) (File, io.ReadCloser, blob.Info, error) {
	_, f, err := l.store.GetFile(ctx, sub, kbID, fileID)
	if err != nil {
		return File{}, nil, blob.Info{}, err
	}
	if f.ObjectKey == nil || f.Source != "upload" {
		return File{}, nil, blob.Info{}, failure.NotFound("original_not_available", "the original of this file is not stored here")
	}
	rc, info, err := l.objects.Get(ctx, *f.ObjectKey)
	if err != nil {
		return File{}, nil, blob.Info{}, failure.NotFound("original_not_available", "the original of this file is gone")
	}
	return f, rc, info, nil
}

// Image opens an image extracted from a document of a KB sub may read (key
// as ImageURL links it); the caller closes it. Info's ContentType is the one
// recorded when the image was extracted.
func (l *Library) Image(ctx context.Context, sub access.Subject, kbID, key string) (io.ReadCloser, blob.Info, error) {
	if _, err := l.KB(ctx, sub, kbID); err != nil {
		return nil, blob.Info{}, err
	}
	if !IsObjectKey(kbID, key) {
		return nil, blob.Info{}, failure.Invalid("invalid_image_path", "not an image of this knowledge base")
	}
	var ct string
	if err := l.store.pool.QueryRow(ctx, `SELECT content_type FROM knowledge_images WHERE kb_id = $1 AND object_key = $2`,
		kbID, key).Scan(&ct); err != nil {
		return nil, blob.Info{}, failure.NotFound("image_not_found", "image not found")
	}
	rc, info, err := l.objects.Get(ctx, key)
	if err != nil {
		return nil, blob.Info{}, failure.NotFound("image_not_found", "image not found")
	}
	info.ContentType = ct
	return rc, info, nil
}

// EditMarkdown saves edited Markdown of a parsed file (not yet indexed:
// nothing derived from it exists) of a KB sub may manage, if the file is
// still at revision (File.Revision, as read with the content); the file
// stays parsed, ready to index. The new Markdown goes to a key of its own
// (EditedMarkdownKey), so the current one stays intact until the edit
// commits; the replaced one is deleted after.
func (l *Library) EditMarkdown(ctx context.Context, sub access.Subject, kbID, fileID, content, revision string) (File, error) {
	if strings.TrimSpace(content) == "" {
		return File{}, failure.Invalid("empty_content", "解析内容不能为空 (the content is empty)")
	}
	rev, err := time.Parse(time.RFC3339Nano, revision)
	if err != nil {
		return File{}, failure.Invalid("invalid_revision", "revision must be the content_revision read with the content")
	}
	if _, err := l.store.GetDocuments(ctx, sub, kbID); err != nil {
		return File{}, err
	}
	key := EditedMarkdownKey(kbID, fileID, time.Now())
	if _, err := l.objects.Put(ctx, key, strings.NewReader(content), int64(len(content)), "text/markdown; charset=utf-8"); err != nil {
		return File{}, err
	}
	var f File
	var old *string
	err = pgx.BeginFunc(ctx, l.store.pool, func(tx pgx.Tx) error {
		var err error
		f, old, err = l.store.ReplaceMarkdownTx(ctx, tx, kbID, fileID, key, rev)
		return err
	})
	ctx = context.WithoutCancel(ctx)
	if err != nil {
		_ = l.objects.Delete(ctx, key)
		return File{}, err
	}
	if old != nil && *old != key {
		if err := l.objects.Delete(ctx, *old); err != nil {
			l.log.Warn("delete the replaced Markdown", "key", *old, "error", err)
		}
	}
	return f, nil
}

// changeTree runs a change of kbID's folder tree in a transaction that first
// checks sub may manage the KB.
func (l *Library) changeTree(ctx context.Context, sub access.Subject, kbID string,
	change func(tx pgx.Tx) (File, error)) (File, error) {
	var f File
	err := pgx.BeginFunc(ctx, l.store.pool, func(tx pgx.Tx) error {
		if _, err := l.store.GetDocumentsTx(ctx, tx, sub, kbID); err != nil {
			return err
		}
		var err error
		f, err = change(tx)
		return err
	})
	return f, err
}

// MoveFile moves a file or folder of a KB sub may manage under newParentID
// (nil: the root; see Store.MoveFileTx).
func (l *Library) MoveFile(ctx context.Context, sub access.Subject, kbID, fileID string, newParentID *string) (File, error) {
	return l.changeTree(ctx, sub, kbID, func(tx pgx.Tx) (File, error) {
		return l.store.MoveFileTx(ctx, tx, kbID, fileID, newParentID)
	})
}

// RenameFolder renames a folder of a KB sub may manage.
func (l *Library) RenameFolder(ctx context.Context, sub access.Subject, kbID, folderID, name string) (File, error) {
	return l.changeTree(ctx, sub, kbID, func(tx pgx.Tx) (File, error) {
		return l.store.RenameFolderTx(ctx, tx, kbID, folderID, name)
	})
}

// CreateFolder makes a folder, created by sub, in a KB sub may manage.
func (l *Library) CreateFolder(ctx context.Context, sub access.Subject, kbID, name string, parentID *string) (File, error) {
	return l.changeTree(ctx, sub, kbID, func(tx pgx.Tx) (File, error) {
		return l.store.CreateFolderTx(ctx, tx, kbID, name, parentID, sub.UID)
	})
}

// QueryInput is a retrieval request: the query, with overrides of the KB's
// retrieval parameters in options (or meta, the original's older name).
type QueryInput struct {
	Query    string          `json:"query"`
	Meta     json.RawMessage `json:"meta"`
	Options  json.RawMessage `json:"options"`
	FileName string          `json:"file_name"` // only chunks of files of this name (also read from options)
}

// Query retrieves from a KB sub may read.
func (l *Library) Query(ctx context.Context, sub access.Subject, kbID string, in QueryInput) ([]Result, error) {
	k, err := l.KB(ctx, sub, kbID)
	if err != nil {
		return nil, err
	}
	opts := in.Options
	if len(opts) == 0 {
		opts = in.Meta
	}
	fileName := in.FileName
	var m map[string]json.RawMessage
	if json.Unmarshal(opts, &m) == nil {
		if v, ok := m["file_name"]; ok {
			_ = json.Unmarshal(v, &fileName)
			delete(m, "file_name")
			opts, _ = json.Marshal(m)
		}
	}
	ret, err := k.Retrieval().Overlay(opts)
	if err != nil {
		return nil, err
	}
	return l.ret.Query(ctx, k, in.Query, ret, fileName)
}
