package intake

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/skill"
)

// skillRoutes: the original's skill_router (26 routes), served by
// shared/skill. Shared skills are installed by admins; any user installs
// personal skills into their own workspace; {slug} routes check the
// skill's share_config (read or manage), draft routes the draft's creator,
// personal routes the caller's own workspace.
func (s *Server) skillRoutes() []Route {
	return []Route{
		{"GET", "/api/skills", User, NoCheck, s.skillCards},
		{"GET", "/api/skills/accessible", User, NoCheck, s.skillCards},
		{"POST", "/api/skills/import/prepare", User, NoCheck, s.prepareSkillUpload},
		{"POST", "/api/skills/remote/list", User, NoCheck, s.listRemoteSkills},
		{"POST", "/api/skills/remote/search", User, NoCheck, s.searchRemoteSkills},
		{"POST", "/api/skills/remote/prepare", User, NoCheck, s.prepareRemoteSkills},
		{"POST", "/api/skills/install-drafts/{draft_id}/confirm", Admin, OwnSkillDraft, s.confirmSkillDraft},
		{"POST", "/api/skills/personal/install-drafts/{draft_id}/confirm", User, OwnSkillDraft, s.confirmPersonalSkillDraft},
		{"GET", "/api/skills/personal/{slug}/file", User, OwnPersonalSkill, s.personalSkillFile},
		{"DELETE", "/api/skills/personal/{slug}", User, OwnPersonalSkill, s.deletePersonalSkill},
		{"DELETE", "/api/skills/install-drafts/{draft_id}", User, OwnSkillDraft, s.discardSkillDraft},
		{"GET", "/api/system/skills", User, NoCheck, s.manageableSkills},
		{"GET", "/api/system/skills/dependency-options", User, NoCheck, s.skillDependencyOptions},
		{"GET", "/api/system/skills/builtin", Admin, NoCheck, s.builtinSkills},
		{"POST", "/api/system/skills/builtin/sync", Admin, NoCheck, s.syncBuiltinSkills},
		{"PUT", "/api/system/skills/{slug}/share-config", User, ManageSkill, s.setSkillShareConfig},
		{"PUT", "/api/system/skills/{slug}/enabled", User, ManageSkill, s.setSkillEnabled},
		{"GET", "/api/system/skills/{slug}/tree", User, ReadSkill, s.skillTree},
		{"GET", "/api/system/skills/{slug}/file", User, ReadSkill, s.readSkillFile},
		{"POST", "/api/system/skills/{slug}/file", User, ManageSkill, s.createSkillFile},
		{"PUT", "/api/system/skills/{slug}/file", User, ManageSkill, s.updateSkillFile},
		{"PUT", "/api/system/skills/{slug}/dependencies", User, ManageSkill, s.setSkillDependencies},
		{"DELETE", "/api/system/skills/{slug}/file", User, ManageSkill, s.deleteSkillFile},
		{"GET", "/api/system/skills/{slug}/export", User, ReadSkill, s.exportSkill},
		{"DELETE", "/api/system/skills/{slug}", User, ManageSkill, s.deleteSkill},
		{"POST", "/api/system/skills/delete-batch", User, NoCheck, s.deleteSkillsBatch},
	}
}

func okResults(w http.ResponseWriter, rs []skill.Result) {
	n := 0
	for _, r := range rs {
		if r.Success {
			n++
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": rs,
		"summary": map[string]int{"total": len(rs), "success": n, "failed": len(rs) - n}})
}

func (s *Server) skillCards(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	vs, err := s.d.Skills.Cards(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": vs, "allowed_access_levels": skill.AllowedAccessLevels(subject(p))})
	return nil
}

func (s *Server) manageableSkills(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	vs, err := s.d.Skills.Manageable(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": vs, "allowed_access_levels": skill.AllowedAccessLevels(subject(p))})
	return nil
}

// maxSkillUpload bounds a SKILL.md or zip upload (the archive limits
// then bound what it unpacks to).
const maxSkillUpload = 20 << 20

func (s *Server) prepareSkillUpload(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	part, err := filePart(w, r)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(part, maxSkillUpload+1))
	if err != nil {
		return uploadReadError(err)
	}
	if len(data) > maxSkillUpload {
		return failure.New(failure.KindTooLarge, skill.CodeArchiveTooLarge, "the upload is larger than %d bytes", maxSkillUpload)
	}
	d, err := s.d.Skills.PrepareUpload(r.Context(), subject(p), part.FileName(), data)
	return respond(w, d, err)
}

type remoteSkillBody struct {
	Source string   `json:"source"`
	Skills []string `json:"skills"`
	Query  string   `json:"query"`
}

func (s *Server) listRemoteSkills(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in remoteSkillBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.d.Skills.RemoteList(r.Context(), in.Source)
	return respond(w, out, err)
}

func (s *Server) searchRemoteSkills(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in remoteSkillBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.d.Skills.RemoteSearch(r.Context(), in.Query)
	return respond(w, out, err)
}

func (s *Server) prepareRemoteSkills(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in remoteSkillBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	d, err := s.d.Skills.RemotePrepare(r.Context(), subject(p), in.Source, in.Skills)
	return respond(w, d, err)
}

type confirmDraftBody struct {
	Slugs       []string        `json:"slugs"`
	ShareConfig json.RawMessage `json:"share_config"`
}

// optionalJSON decodes a body that may be empty.
func (s *Server) optionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return decodeJSON(w, r, s.d.MaxBodyBytes, v)
}

func (s *Server) confirmSkillDraft(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in confirmDraftBody
	if err := s.optionalJSON(w, r, &in); err != nil {
		return err
	}
	rs, err := s.d.Skills.ConfirmShared(r.Context(), subject(p), r.PathValue("draft_id"), in.Slugs, in.ShareConfig)
	if err != nil {
		return err
	}
	okResults(w, rs)
	return nil
}

func (s *Server) confirmPersonalSkillDraft(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in confirmDraftBody
	if err := s.optionalJSON(w, r, &in); err != nil {
		return err
	}
	rs, err := s.d.Skills.ConfirmPersonal(r.Context(), subject(p), r.PathValue("draft_id"), in.Slugs)
	if err != nil {
		return err
	}
	okResults(w, rs)
	return nil
}

func (s *Server) discardSkillDraft(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.d.Skills.Discard(r.Context(), subject(p), r.PathValue("draft_id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) personalSkillFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	f, err := s.d.Skills.PersonalFile(r.Context(), subject(p), r.PathValue("slug"), r.URL.Query().Get("path"))
	return respond(w, f, err)
}

func (s *Server) deletePersonalSkill(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.d.Skills.DeletePersonal(r.Context(), subject(p), r.PathValue("slug")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) skillDependencyOptions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	o, err := s.d.Skills.Options(r.Context(), subject(p), r.URL.Query().Get("slug"))
	return respond(w, o, err)
}

func (s *Server) builtinSkills(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	vs, err := s.d.Skills.BuiltinViews(r.Context(), subject(p))
	return respond(w, vs, err)
}

func (s *Server) syncBuiltinSkills(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if _, err := s.d.Skills.SyncBuiltins(r.Context(), p.UID); err != nil {
		return err
	}
	return s.builtinSkills(w, r, p)
}

func (s *Server) setSkillShareConfig(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		ShareConfig json.RawMessage `json:"share_config"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	v, err := s.d.Skills.SetShareConfig(r.Context(), subject(p), r.PathValue("slug"), in.ShareConfig)
	return respond(w, v, err)
}

func (s *Server) setSkillEnabled(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Enabled *bool `json:"enabled"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.Enabled == nil {
		// Checked after the skill: a caller who may not manage it learns nothing.
		if err := s.d.Skills.CheckManage(r.Context(), subject(p), r.PathValue("slug")); err != nil {
			return err
		}
		return failure.Unprocessable("invalid_request", "enabled (true or false) is required")
	}
	v, err := s.d.Skills.SetEnabled(r.Context(), subject(p), r.PathValue("slug"), *in.Enabled)
	return respond(w, v, err)
}

func (s *Server) skillTree(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	t, err := s.d.Skills.Tree(r.Context(), subject(p), r.PathValue("slug"))
	return respond(w, t, err)
}

func (s *Server) readSkillFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	f, err := s.d.Skills.ReadFile(r.Context(), subject(p), r.PathValue("slug"), r.URL.Query().Get("path"))
	return respond(w, f, err)
}

type skillFileBody struct {
	Path    string  `json:"path"`
	IsDir   bool    `json:"is_dir"`
	Content *string `json:"content"`
}

func (s *Server) createSkillFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in skillFileBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	content := ""
	if in.Content != nil {
		content = *in.Content
	}
	if err := s.d.Skills.CreateNode(r.Context(), subject(p), r.PathValue("slug"), in.Path, in.IsDir, content); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) updateSkillFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in skillFileBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	content := ""
	if in.Content != nil {
		content = *in.Content
	}
	if err := s.d.Skills.UpdateFile(r.Context(), subject(p), r.PathValue("slug"), in.Path, content); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) setSkillDependencies(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in skill.Dependencies
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	v, err := s.d.Skills.SetDependencies(r.Context(), subject(p), r.PathValue("slug"), in)
	return respond(w, v, err)
}

func (s *Server) deleteSkillFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.d.Skills.DeleteNode(r.Context(), subject(p), r.PathValue("slug"), r.URL.Query().Get("path")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) exportSkill(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, name, err := s.d.Skills.Export(r.Context(), subject(p), r.PathValue("slug"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
	return nil
}

func (s *Server) deleteSkill(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.d.Skills.Delete(r.Context(), subject(p), r.PathValue("slug")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) deleteSkillsBatch(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Slugs []string `json:"slugs"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	rs, err := s.d.Skills.DeleteBatch(r.Context(), subject(p), in.Slugs)
	if err != nil {
		return err
	}
	okResults(w, rs)
	return nil
}
