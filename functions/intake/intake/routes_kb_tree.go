package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

// The folder tree of a KB: move a file or folder, rename and create folders.
// Each answers with the changed file or folder.

// moveDocument moves a file or folder under {new_parent_id} (null: the root).
func (s *Server) moveDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		NewParentID *string `json:"new_parent_id"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	f, err := s.kb.MoveFile(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"), in.NewParentID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

// renameFolder renames a folder ({folder_name}).
func (s *Server) renameFolder(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		FolderName string `json:"folder_name"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	f, err := s.kb.RenameFolder(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("folder_id"), in.FolderName)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

// createFolder makes a folder ({folder_name} or {name}) under {parent_id} (null: the root).
func (s *Server) createFolder(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		FolderName string  `json:"folder_name"`
		Name       string  `json:"name"`
		ParentID   *string `json:"parent_id"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	name := in.FolderName
	if name == "" {
		name = in.Name
	}
	f, err := s.kb.CreateFolder(r.Context(), subject(p), r.PathValue("kb_id"), name, in.ParentID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}
