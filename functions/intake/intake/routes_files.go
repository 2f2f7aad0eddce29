package intake

import (
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/userfiles"
)

// The file routes (shared/userfiles): the viewer (/api/viewer/filesystem/*),
// a thread's artifacts and attachments (/api/chat/…), the workspace
// (/api/workspace/*) and mentions. Files are read and written through the
// sandbox provisioner's file API; without one they answer 503
// sandbox_unavailable.

// fileRoutes are served whatever the configuration (503 without a provisioner).
func (s *Server) fileRoutes() []Route {
	return []Route{
		// Viewer (filesystem_router): ?thread_id= names the caller's thread.
		{"GET", "/api/viewer/filesystem/tree", User, ThreadInQuery, s.viewerTree},
		{"GET", "/api/viewer/filesystem/file", User, ThreadInQuery, s.viewerFile},
		{"DELETE", "/api/viewer/filesystem/file", User, ThreadInQuery, s.viewerDelete},
		{"POST", "/api/viewer/filesystem/directory", User, ThreadInQuery, s.viewerMkdir},
		{"POST", "/api/viewer/filesystem/upload", User, ThreadInQuery, s.viewerUpload},
		{"GET", "/api/viewer/filesystem/search", User, ThreadInQuery, s.viewerSearch},
		{"GET", "/api/viewer/filesystem/download", User, ThreadInQuery, s.viewerDownload},
		// Thread files and attachments (chat_router).
		{"GET", "/api/chat/thread/{thread_id}/artifacts/{path...}", User, OwnThread, s.getArtifact},
		{"POST", "/api/chat/thread/{thread_id}/artifacts/save", User, OwnThread, s.saveArtifact},
		{"POST", "/api/chat/attachments/tmp", User, NoCheck, s.uploadTmpAttachment}, // the object is the caller's new upload
		{"POST", "/api/chat/attachments/tmp/parse", User, OwnTmpAttachment, s.parseTmpAttachment},
		{"POST", "/api/chat/thread/{thread_id}/attachments/confirm", User, OwnThread, s.confirmAttachments},
		{"GET", "/api/chat/thread/{thread_id}/attachments", User, OwnThread, s.listAttachments},
		{"DELETE", "/api/chat/thread/{thread_id}/attachments/{file_id}", User, OwnThread, s.deleteAttachment},
		// Workspace (workspace_router): always the caller's own.
		{"GET", "/api/workspace/tree", User, NoCheck, s.workspaceTree},     // lists the caller's own workspace
		{"GET", "/api/workspace/search", User, NoCheck, s.workspaceSearch}, // searches the caller's own workspace
		{"GET", "/api/workspace/file", User, OwnWorkspace, s.workspaceFile},
		{"GET", "/api/workspace/knowledge/tree", User, NoCheck, s.workspaceKnowledgeTree}, // the KBs the caller reads; a KB's files pass its read check
		{"GET", "/api/workspace/knowledge/file", User, OwnWorkspace, s.workspaceKnowledgeFile},
		{"GET", "/api/workspace/knowledge/download", User, OwnWorkspace, s.workspaceKnowledgeDownload},
		{"PUT", "/api/workspace/file", User, OwnWorkspace, s.workspaceWrite},
		{"DELETE", "/api/workspace/file", User, OwnWorkspace, s.workspaceDelete},
		{"POST", "/api/workspace/directory", User, OwnWorkspace, s.workspaceMkdir},
		{"POST", "/api/workspace/upload", User, OwnWorkspace, s.workspaceUpload},
		{"GET", "/api/workspace/download", User, OwnWorkspace, s.workspaceDownload},
		// Mentions (mention_router): ?thread_id= is optional.
		{"GET", "/api/mention/search", User, ThreadInQuery, s.mentionSearch},
	}
}

func (s *Server) viewerTree(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	es, err := s.files.Tree(r.Context(), p.UID, q.Get("thread_id"), q.Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": es})
	return nil
}

func (s *Server) viewerFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	if q.Get("path") == "" {
		return userfiles.ErrPathRequired
	}
	pv, err := s.files.File(r.Context(), p.UID, q.Get("thread_id"), q.Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pv)
	return nil
}

func (s *Server) viewerDelete(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	if q.Get("path") == "" {
		return userfiles.ErrPathRequired
	}
	path, err := s.files.Delete(r.Context(), p.UID, q.Get("thread_id"), q.Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "path": path})
	return nil
}

// dirBody is the directory routes' body (as workspace_router's CreateWorkspaceDirectoryRequest).
type dirBody struct {
	ThreadID   string `json:"thread_id"`
	ParentPath string `json:"parent_path"`
	Name       string `json:"name"`
}

func (s *Server) viewerMkdir(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in dirBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.ThreadID == "" {
		in.ThreadID = r.URL.Query().Get("thread_id")
	}
	e, err := s.files.Mkdir(r.Context(), p.UID, in.ThreadID, in.ParentPath, in.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "entry": e, "path": e.Path})
	return nil
}

// uploadForm reads a multipart form: text fields (at most 64 KiB each) and
// the files of the "files" (or "file") fields, each bounded by the upload
// limit; the body as a whole by 50 files' worth.
func (s *Server) uploadForm(w http.ResponseWriter, r *http.Request) (map[string]string, []userfiles.Upload, error) {
	limit := s.files.MaxUploadBytes()
	r.Body = http.MaxBytesReader(w, r.Body, 4*limit+(1<<20))
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, nil, failure.Invalid("invalid_multipart", "expected a multipart/form-data body with a file field: %v", err)
	}
	fields := map[string]string{}
	var files []userfiles.Upload
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return fields, files, nil
		}
		if err != nil {
			return nil, nil, uploadReadError(err)
		}
		name := part.FormName()
		if part.FileName() == "" {
			b, err := io.ReadAll(io.LimitReader(part, 64<<10))
			part.Close()
			if err != nil {
				return nil, nil, uploadReadError(err)
			}
			if err := checkText("invalid_form", "form field "+name, string(b)); err != nil {
				return nil, nil, err
			}
			fields[name] = string(b)
			continue
		}
		if name != "files" && name != "file" {
			part.Close()
			continue
		}
		if err := checkFileName(part.FileName()); err != nil {
			return nil, nil, err
		}
		data, err := io.ReadAll(io.LimitReader(part, limit+1))
		part.Close()
		if err != nil {
			return nil, nil, uploadReadError(err)
		}
		if int64(len(data)) > limit {
			return nil, nil, failure.New(failure.KindTooLarge, "file_too_large", "%s is larger than %d bytes", part.FileName(), limit)
		}
		if len(files) >= 50 {
			return nil, nil, failure.Unprocessable("too_many_files", "at most 50 files per upload")
		}
		files = append(files, userfiles.Upload{Name: part.FileName(), Data: data})
	}
}

func (s *Server) viewerUpload(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	threadID := r.URL.Query().Get("thread_id")
	if threadID != "" { // checked before the body is read; a form's thread_id by Upload
		if err := s.files.CheckThread(r.Context(), p.UID, threadID); err != nil {
			return err
		}
	}
	fields, files, err := s.uploadForm(w, r)
	if err != nil {
		return err
	}
	if threadID == "" {
		threadID = fields["thread_id"]
	}
	parent := fields["parent_path"]
	if parent == "" {
		parent = fields["path"]
	}
	es, err := s.files.Upload(r.Context(), p.UID, threadID, parent, files)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "files": es})
	return nil
}

func (s *Server) viewerSearch(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	limit, err := intQuery(r, "limit", 50)
	if err != nil {
		return err
	}
	es, err := s.files.Search(r.Context(), p.UID, q.Get("thread_id"), firstOf(q, "query", "q", "keyword"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": es, "results": es})
	return nil
}

func firstOf(q url.Values, names ...string) string {
	for _, n := range names {
		if v := q.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func (s *Server) viewerDownload(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	if q.Get("path") == "" {
		return userfiles.ErrPathRequired
	}
	sv, err := s.files.Download(r.Context(), p.UID, q.Get("thread_id"), q.Get("path"))
	if err != nil {
		return err
	}
	writeFile(w, sv, true)
	return nil
}

// writeFile sends a file with headers that keep the browser from running
// it: nosniff, a sandboxing CSP, and an attachment disposition unless the
// content type is one that is safe to render (raster image, PDF, text).
func writeFile(w http.ResponseWriter, sv userfiles.Served, download bool) {
	h := w.Header()
	h.Set("Content-Type", sv.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(sv.Data)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'")
	h.Set("Cache-Control", "private, no-store")
	disp := "attachment"
	if sv.Inline && !download {
		disp = "inline"
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disp, map[string]string{"filename": sv.Name}))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(sv.Data)
}

func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sv, err := s.files.Artifact(r.Context(), p.UID, r.PathValue("thread_id"), r.PathValue("path"))
	if err != nil {
		return err
	}
	dl := r.URL.Query().Get("download")
	writeFile(w, sv, dl == "1" || strings.EqualFold(dl, "true"))
	return nil
}

func (s *Server) saveArtifact(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Path string `json:"path"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	saved, err := s.files.SaveArtifact(r.Context(), p.UID, r.PathValue("thread_id"), in.Path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "name": saved.Name, "path": saved.Path,
		"source_path": saved.SourcePath, "workspace_path": saved.WorkspacePath, "size": saved.Size})
	return nil
}

func (s *Server) uploadTmpAttachment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	_, files, err := s.uploadForm(w, r)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return failure.Invalid("missing_file", "the form must have exactly one file field")
	}
	a, err := s.files.UploadTmp(r.Context(), p.UID, files[0].Name, files[0].Data)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) parseTmpAttachment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		ObjectName  string `json:"object_name"`
		ParseMethod string `json:"parse_method"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.files.ParseTmp(r.Context(), p.UID, in.ObjectName, in.ParseMethod)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) confirmAttachments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Attachments []userfiles.ConfirmItem `json:"attachments"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	added, err := s.files.ConfirmAttachments(r.Context(), p.UID, r.PathValue("thread_id"), in.Attachments)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"attachments": added})
	return nil
}

func (s *Server) listAttachments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.files.Attachments(r.Context(), p.UID, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"attachments": list})
	return nil
}

func (s *Server) deleteAttachment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	a, err := s.files.DeleteAttachment(r.Context(), p.UID, r.PathValue("thread_id"), r.PathValue("file_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "file_id": a.FileID})
	return nil
}

func boolQuery(r *http.Request, name string) bool {
	v := strings.ToLower(r.URL.Query().Get(name))
	return v == "1" || v == "true" || v == "yes"
}

func (s *Server) workspaceTree(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	es, err := s.files.WorkspaceTree(r.Context(), p.UID, r.URL.Query().Get("path"), boolQuery(r, "recursive"), boolQuery(r, "files_only"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": es})
	return nil
}

func (s *Server) workspaceSearch(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := intQuery(r, "limit", 50)
	if err != nil {
		return err
	}
	es, err := s.files.WorkspaceSearch(r.Context(), p.UID, firstOf(r.URL.Query(), "query", "q", "keyword"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": es, "results": es})
	return nil
}

func (s *Server) workspaceFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if r.URL.Query().Get("path") == "" {
		return userfiles.ErrPathRequired
	}
	pv, err := s.files.WorkspaceFile(r.Context(), p.UID, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pv)
	return nil
}

func (s *Server) workspaceWrite(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.Path == "" {
		return userfiles.ErrPathRequired
	}
	e, err := s.files.WriteWorkspaceFile(r.Context(), p.UID, in.Path, in.Content)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "path": e.Path, "size": e.Size})
	return nil
}

func (s *Server) workspaceDelete(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if r.URL.Query().Get("path") == "" {
		return userfiles.ErrPathRequired
	}
	path, err := s.files.DeleteWorkspacePath(r.Context(), p.UID, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "path": path})
	return nil
}

func (s *Server) workspaceMkdir(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in dirBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	e, err := s.files.WorkspaceMkdir(r.Context(), p.UID, in.ParentPath, in.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "entry": e, "path": e.Path})
	return nil
}

func (s *Server) workspaceUpload(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	fields, files, err := s.uploadForm(w, r)
	if err != nil {
		return err
	}
	es, err := s.files.WorkspaceUpload(r.Context(), p.UID, fields["parent_path"], files)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "files": es})
	return nil
}

func (s *Server) workspaceDownload(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if r.URL.Query().Get("path") == "" {
		return userfiles.ErrPathRequired
	}
	sv, err := s.files.WorkspaceDownload(r.Context(), p.UID, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeFile(w, sv, true)
	return nil
}

func (s *Server) mentionSearch(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := intQuery(r, "limit", 20)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	items, err := s.files.Mentions(r.Context(), p.UID, q.Get("thread_id"), firstOf(q, "query", "q", "keyword"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "files": items})
	return nil
}
