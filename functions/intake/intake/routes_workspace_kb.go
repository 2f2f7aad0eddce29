package intake

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/userfiles"
)

// The workspace's read-only knowledge view: the knowledge bases shared
// with the caller as directories, their folders and documents below, by
// path /<kb_id>[/<folder_id>…]/<file_id>. Every call goes through the
// knowledge library's read check, so only KBs the caller may read appear.

var errNoKnowledge = failure.New(failure.KindUnavailable, "knowledge_unavailable", "knowledge bases are not served here")

// kbPath splits /<kb_id>/…/<last> into the KB and the last id ("" at a KB's root).
func kbPath(p string) (kbID, last string) {
	parts := strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
	switch len(parts) {
	case 0:
		return "", ""
	case 1:
		return parts[0], ""
	}
	return parts[0], parts[len(parts)-1]
}

func (s *Server) workspaceKnowledgeTree(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.kb == nil {
		return errNoKnowledge
	}
	kbID, parent := kbPath(r.URL.Query().Get("path"))
	entries := []userfiles.Entry{}
	if kbID == "" {
		list, err := s.d.KBs.List(r.Context(), subject(p))
		if err != nil {
			return err
		}
		for _, k := range list {
			entries = append(entries, userfiles.Entry{Path: "/" + k.KBID + "/", Name: k.Name, IsDir: true})
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
		return nil
	}
	in := kb.ListInput{Limit: 500}
	if parent != "" {
		in.ParentID = &parent
	}
	files, _, err := s.kb.ListFiles(r.Context(), subject(p), kbID, in)
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(r.URL.Query().Get("path"), "/")
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	for _, f := range files {
		e := userfiles.Entry{Path: prefix + "/" + f.FileID, Name: f.Filename, IsDir: f.IsFolder, ModifiedAt: f.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z")}
		if f.IsFolder {
			e.Path += "/"
		} else if f.FileSize != nil {
			e.Size = *f.FileSize
		}
		entries = append(entries, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
	return nil
}

func (s *Server) workspaceKnowledgeFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.kb == nil {
		return errNoKnowledge
	}
	kbID, fileID := kbPath(r.URL.Query().Get("path"))
	if fileID == "" {
		return userfiles.ErrPathRequired
	}
	d, err := s.kb.Document(r.Context(), subject(p), kbID, fileID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": d.Markdown, "preview_type": "markdown", "supported": true, "message": nil,
		"name": d.File.Filename})
	return nil
}

func (s *Server) workspaceKnowledgeDownload(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.kb == nil {
		return errNoKnowledge
	}
	kbID, fileID := kbPath(r.URL.Query().Get("path"))
	if fileID == "" {
		return userfiles.ErrPathRequired
	}
	f, rc, info, err := s.kb.Original(r.Context(), subject(p), kbID, fileID)
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
