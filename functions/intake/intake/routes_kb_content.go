package intake

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// A document's content: its Markdown and chunks, Markdown edits, the
// original, extracted images, and parsing a file without storing it.

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.documentContent(w, r, p, true)
}

func (s *Server) getDocumentContent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.documentContent(w, r, p, false)
}

func (s *Server) documentContent(w http.ResponseWriter, r *http.Request, p auth.Principal, withMeta bool) error {
	d, err := s.kb.Document(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"))
	if err != nil {
		return err
	}
	// content_revision: the version a PUT of the content must name.
	out := map[string]any{"chunks": d.Chunks, "content": d.Markdown, "lines": splitLines(d.Markdown), "content_revision": d.File.Revision()}
	if withMeta {
		out["meta"] = d.File
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func splitLines(md string) []string {
	if md == "" {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(md, "\r\n", "\n"), "\n"), "\n")
}

// putDocumentContent saves edited Markdown of a parsed file (not yet
// indexed), if the file is still at the revision the editor read; the file
// stays parsed, ready to index.
func (s *Server) putDocumentContent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Content  string `json:"content"`
		Revision string `json:"revision"`
	}
	if err := decodeJSON(w, r, kb.MaxMarkdownBytes+(1<<20), &in); err != nil {
		return err
	}
	f, err := s.kb.EditMarkdown(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"), in.Content, in.Revision)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "message": "解析内容已保存", "meta": f, "content_revision": f.Revision()})
	return nil
}

func (s *Server) downloadDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	f, rc, info, err := s.kb.Original(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"))
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", info.ContentType)
	uploadedContentHeaders(w, info.ContentType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.OriginalFilename}))
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	_, _ = io.Copy(w, rc)
	return nil
}

// kbImage serves an image extracted from a KB document (the links of
// kb.ImageURL) to anyone who may read the KB (images are never public).
func (s *Server) kbImage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	rc, info, err := s.kb.Image(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("object_path"))
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", info.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.Header().Set("Cache-Control", "private, max-age=3600")
	uploadedContentHeaders(w, info.ContentType)
	if activeContent(info.ContentType) {
		w.Header().Set("Content-Disposition", "attachment")
	}
	_, _ = io.Copy(w, rc)
	return nil
}

// markdownFile parses an uploaded file to Markdown and returns it, storing
// nothing (the original's /files/markdown). Images are not kept.
func (s *Server) markdownFile(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	if s.d.Parser == nil {
		return failure.NotFound("route_not_found", "document parsing is not available here")
	}
	part, err := filePart(w, r)
	if err != nil {
		return err
	}
	name := path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
	data, err := io.ReadAll(io.LimitReader(part, MaxUploadBytes+1))
	if err != nil {
		return uploadReadError(err)
	}
	if int64(len(data)) > MaxUploadBytes {
		return kb.ErrTooLarge
	}
	if len(data) == 0 {
		return failure.Unprocessable("empty_file", "%s is empty", name)
	}
	if _, err := docparse.Detect(name, data[:min(len(data), 4096)]); err != nil {
		return failure.New(failure.KindUnsupportedMedia, "wrong_file_type", "%v", err).
			With(map[string]any{"supported": docparse.SupportedExtensions()})
	}
	res, err := s.d.Parser.Parse(r.Context(), name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"markdown_content": res.Markdown, "message": "success"})
	return nil
}

// uploadedContentHeaders guard every response that serves bytes a user
// uploaded: no MIME sniffing, and a sandboxing CSP so that an HTML or SVG
// file opened from the API's origin runs no script with its cookies or
// storage (issue 9, finding 6).
func uploadedContentHeaders(w http.ResponseWriter, contentType string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox")
}

// activeContent reports content types a browser renders as a document
// (scripts included): they are served as attachments.
func activeContent(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return true // unknown: never inline
	}
	switch mt {
	case "text/html", "application/xhtml+xml", "image/svg+xml", "text/xml", "application/xml", "text/javascript", "application/javascript":
		return true
	}
	return false
}
