package userfiles

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// Chat attachments, as the original: a file is uploaded to a temporary
// object (not yet in any thread), optionally parsed to Markdown, then
// confirmed into a thread: the original goes to uploads/<name>, the
// Markdown to uploads/attachments/<stem>.md, and an entry to the thread's
// attachment list. A run request binds entries with
// meta.attachment_file_ids and the agent is told their sandbox paths.

// tmpPrefix starts every temporary attachment object; the next segment is
// the owner's uid, so an object name proves whose it is.
const tmpPrefix = "chat-attachments/tmp/"

// AttachmentsDir holds parsed Markdown of attachments.
const AttachmentsDir = UploadsDir + "/attachments"

// TmpAttachment is POST /api/chat/attachments/tmp's answer.
type TmpAttachment struct {
	FileName   string `json:"file_name"`
	FileType   string `json:"file_type"`
	FileSize   int64  `json:"file_size"`
	ObjectName string `json:"object_name"`
	UploadedAt string `json:"uploaded_at"`
}

// ParsedAttachment is POST …/tmp/parse's answer.
type ParsedAttachment struct {
	FileName         string `json:"file_name"`
	ObjectName       string `json:"object_name"`
	ParsedObjectName string `json:"parsed_object_name"`
	ParsedFileName   string `json:"parsed_file_name"`
	ParsedSize       int64  `json:"parsed_size"`
	ParseMethod      string `json:"parse_method"`
	Markdown         string `json:"markdown_preview"`
}

// ConfirmItem is one attachment to confirm.
type ConfirmItem struct {
	ObjectName       string `json:"object_name"`
	ParsedObjectName string `json:"parsed_object_name"`
	FileType         string `json:"file_type"`
}

var errNoBlob = failure.New(failure.KindUnavailable, "attachments_unavailable", "no object store is configured for attachments")

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func fileType(name string) string { return strings.TrimPrefix(strings.ToLower(path.Ext(name)), ".") }

// UploadTmp stores an uploaded file as a temporary attachment of uid,
// after the upload checks (size, archive safety).
func (s *Service) UploadTmp(ctx context.Context, uid, name string, data []byte) (TmpAttachment, error) {
	if s.cfg.Blob == nil {
		return TmpAttachment{}, errNoBlob
	}
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if err := validName(name); err != nil {
		return TmpAttachment{}, err
	}
	if err := CheckUpload(name, data, s.cfg.MaxUploadBytes); err != nil {
		return TmpAttachment{}, err
	}
	key := tmpPrefix + uid + "/" + randomID() + "/" + name
	if err := blob.ValidateKey(key); err != nil {
		return TmpAttachment{}, failure.Unprocessable("invalid_name", "%q is not a valid file name", name)
	}
	if _, err := s.cfg.Blob.Put(ctx, key, bytes.NewReader(data), int64(len(data)), ""); err != nil {
		return TmpAttachment{}, fmt.Errorf("store attachment: %w", err)
	}
	return TmpAttachment{FileName: name, FileType: fileType(name), FileSize: int64(len(data)), ObjectName: key,
		UploadedAt: s.cfg.Now().UTC().Format(time.RFC3339)}, nil
}

// ownTmp checks that object names one of uid's temporary attachments.
func ownTmp(uid, object string) error {
	rest, ok := strings.CutPrefix(object, tmpPrefix+uid+"/")
	if !ok || strings.Count(rest, "/") < 1 || blob.ValidateKey(object) != nil {
		return failure.NotFound("attachment_not_found", "no such temporary attachment")
	}
	return nil
}

func (s *Service) readTmp(ctx context.Context, uid, object string) ([]byte, error) {
	if s.cfg.Blob == nil {
		return nil, errNoBlob
	}
	if err := ownTmp(uid, object); err != nil {
		return nil, err
	}
	rc, _, err := s.cfg.Blob.Get(ctx, object)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, failure.NotFound("attachment_not_found", "no such temporary attachment")
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, s.cfg.MaxUploadBytes+1))
}

// ParseTmp parses a temporary attachment to Markdown (doc-parse's parser)
// and stores it next to the original.
func (s *Service) ParseTmp(ctx context.Context, uid, object, method string) (ParsedAttachment, error) {
	data, err := s.readTmp(ctx, uid, object)
	if err != nil {
		return ParsedAttachment{}, err
	}
	if s.cfg.Parser == nil {
		return ParsedAttachment{}, failure.New(failure.KindUnavailable, "parser_unavailable", "no document parser is configured")
	}
	name := path.Base(object)
	res, err := s.cfg.Parser.Parse(ctx, name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return ParsedAttachment{}, err
	}
	mdName := strings.TrimSuffix(name, path.Ext(name)) + ".md"
	key := path.Dir(object) + "/parsed/" + mdName
	md := []byte(res.Markdown)
	if _, err := s.cfg.Blob.Put(ctx, key, bytes.NewReader(md), int64(len(md)), "text/markdown; charset=utf-8"); err != nil {
		return ParsedAttachment{}, fmt.Errorf("store parsed attachment: %w", err)
	}
	if method == "" {
		method = "default"
	}
	prev := res.Markdown
	if len(prev) > 2000 {
		prev = strings.ToValidUTF8(prev[:2000], "")
	}
	return ParsedAttachment{FileName: name, ObjectName: object, ParsedObjectName: key, ParsedFileName: mdName,
		ParsedSize: int64(len(md)), ParseMethod: method, Markdown: prev}, nil
}

func artifactURL(threadID, virtual string) string {
	return "/api/chat/thread/" + threadID + "/artifacts/" + strings.TrimPrefix(virtual, "/")
}

// ConfirmAttachments copies temporary attachments into the thread's
// uploads and records them; the temporary objects are removed.
func (s *Service) ConfirmAttachments(ctx context.Context, uid, threadID string, items []ConfirmItem) ([]thread.Attachment, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, failure.Unprocessable("missing_attachments", "attachments must name at least one object")
	}
	if len(items) > maxUploadFiles {
		return nil, failure.Unprocessable("too_many_files", "at most %d attachments at once", maxUploadFiles)
	}
	var added []thread.Attachment
	for _, it := range items {
		a, err := s.confirmOne(ctx, uid, threadID, sc, it)
		if err != nil {
			return nil, err
		}
		added = append(added, a)
	}
	if _, err := s.cfg.Threads.AddAttachments(ctx, uid, threadID, added); err != nil {
		return nil, err
	}
	for _, it := range items {
		_ = s.cfg.Blob.Delete(ctx, it.ObjectName)
		if it.ParsedObjectName != "" {
			_ = s.cfg.Blob.Delete(ctx, it.ParsedObjectName)
		}
	}
	return added, nil
}

func (s *Service) confirmOne(ctx context.Context, uid, threadID string, sc sandbox.Scope, it ConfirmItem) (thread.Attachment, error) {
	data, err := s.readTmp(ctx, uid, it.ObjectName)
	if err != nil {
		return thread.Attachment{}, err
	}
	name := path.Base(it.ObjectName)
	orig, err := s.writeUnique(ctx, sc, UploadsDir, name, data)
	if err != nil {
		return thread.Attachment{}, err
	}
	a := thread.Attachment{FileID: "file_" + randomID(), FileName: name, FileType: it.FileType, FileSize: int64(len(data)),
		Status: "uploaded", UploadedAt: s.cfg.Now().UTC().Format(time.RFC3339), Path: orig, ArtifactURL: artifactURL(threadID, orig),
		OriginalPath: orig, OriginalArtifactURL: artifactURL(threadID, orig)}
	if a.FileType == "" {
		a.FileType = fileType(name)
	}
	if it.ParsedObjectName != "" {
		if path.Dir(path.Dir(it.ParsedObjectName)) != path.Dir(it.ObjectName) {
			return thread.Attachment{}, failure.Unprocessable("invalid_parsed_object", "parsed_object_name does not belong to object_name")
		}
		md, err := s.readTmp(ctx, uid, it.ParsedObjectName)
		if err != nil {
			return thread.Attachment{}, err
		}
		p, err := s.writeUnique(ctx, sc, AttachmentsDir, path.Base(it.ParsedObjectName), md)
		if err != nil {
			return thread.Attachment{}, err
		}
		a.Path, a.ArtifactURL, a.Status = p, artifactURL(threadID, p), "parsed"
	} else if md, ok, err := s.autoParse(ctx, name, data); err != nil {
		return thread.Attachment{}, err
	} else if ok {
		mdName := strings.TrimSuffix(name, path.Ext(name)) + ".md"
		p, err := s.writeUnique(ctx, sc, AttachmentsDir, mdName, md)
		if err != nil {
			return thread.Attachment{}, err
		}
		a.Path, a.ArtifactURL, a.Status = p, artifactURL(threadID, p), "parsed"
	}
	return a, nil
}

// autoParse is the Markdown of an attachment confirmed without a parse of
// its own, as the original leaves every attachment it can parse readable as
// uploads/attachments/<stem>.md. Plain text and Markdown are readable as
// they are; images need OCR, which stays the explicit …/tmp/parse choice
// (as the original's optional image parse). A file the parser refuses
// (unsupported, empty, encrypted…) stays an upload: ok false, no error.
func (s *Service) autoParse(ctx context.Context, name string, data []byte) ([]byte, bool, error) {
	switch ext := fileType(name); {
	case s.cfg.Parser == nil, ext == "txt", ext == "md", ext == "markdown", docparse.IsImage(ext):
		return nil, false, nil
	}
	res, err := s.cfg.Parser.Parse(ctx, name, bytes.NewReader(data), int64(len(data)))
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	if err != nil || strings.TrimSpace(res.Markdown) == "" {
		return nil, false, nil
	}
	return []byte(res.Markdown), true, nil
}

// Attachments lists a thread's attachments.
func (s *Service) Attachments(ctx context.Context, uid, threadID string) ([]thread.Attachment, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	return s.cfg.Threads.Attachments(ctx, uid, threadID)
}

// DeleteAttachment removes an attachment and its files from the thread.
func (s *Service) DeleteAttachment(ctx context.Context, uid, threadID, fileID string) (thread.Attachment, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return thread.Attachment{}, err
	}
	a, err := s.cfg.Threads.RemoveAttachment(ctx, uid, threadID, fileID)
	if err != nil {
		return thread.Attachment{}, err
	}
	for _, p := range []string{a.Path, a.OriginalPath} {
		if within(p, UploadsDir) && p != UploadsDir {
			if err := s.cfg.Sandbox.DeleteFile(ctx, sc, p, false); err != nil && !isNotFound(err) {
				return a, fileErr(err, p)
			}
		}
	}
	return a, nil
}

// Binder binds attachments to a run request (thread.Store.BindAttachments).
type Binder interface {
	BindAttachments(ctx context.Context, uid, threadID, requestID string, fileIDs []string) ([]thread.Attachment, error)
}

// AttachmentNote binds fileIDs to requestID and returns the text added to
// the user's message so the agent knows where they are in its sandbox
// (empty when there are none).
func AttachmentNote(ctx context.Context, b Binder, uid, threadID, requestID string, fileIDs []string) (string, error) {
	if len(fileIDs) == 0 {
		return "", nil
	}
	bound, err := b.BindAttachments(ctx, uid, threadID, requestID, fileIDs)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	sb.WriteString("\n\n<attachments>\nThe user attached these files; read them with read_file:\n")
	for _, a := range bound {
		fmt.Fprintf(&sb, "- %s (%s", a.Path, a.FileName)
		if a.Path != a.OriginalPath {
			fmt.Fprintf(&sb, ", parsed to Markdown; original at %s", a.OriginalPath)
		}
		sb.WriteString(")\n")
	}
	sb.WriteString("</attachments>")
	return sb.String(), nil
}
