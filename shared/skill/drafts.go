package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// DraftItem is one skill of an install draft.
type DraftItem struct {
	DraftItemID       string   `json:"draft_item_id,omitempty"`
	Slug              string   `json:"slug"`          // the slug a shared install takes (free when the draft was made)
	OriginalName      string   `json:"original_name"` // the slug SKILL.md declares (a personal install keeps it)
	Name              string   `json:"name,omitempty"`
	Description       string   `json:"description,omitempty"`
	ToolDependencies  []string `json:"tool_dependencies"`
	MCPDependencies   []string `json:"mcp_dependencies"`
	SkillDependencies []string `json:"skill_dependencies"`
	ContentHash       string   `json:"content_hash,omitempty"`
	Warnings          []string `json:"warnings"`
	Success           bool     `json:"success"`
	Error             string   `json:"error,omitempty"`
}

// Draft is an install draft.
type Draft struct {
	DraftID             string          `json:"draft_id"`
	CreatedBy           string          `json:"created_by"`
	SourceType          string          `json:"source_type"`
	Source              string          `json:"source"`
	CreatedAt           time.Time       `json:"created_at"`
	ExpiresAt           time.Time       `json:"expires_at"`
	Items               []DraftItem     `json:"items"`
	DefaultShareConfig  json.RawMessage `json:"default_share_config"`
	AllowedAccessLevels []string        `json:"allowed_access_levels"`
}

func draftPrefix(id, item string) string { return "skill-drafts/" + id + "/" + item + "/" }

// PrepareUpload is POST /api/skills/import/prepare: a SKILL.md or a zip with
// exactly one skill becomes an install draft.
func (s *Service) PrepareUpload(ctx context.Context, sub access.Subject, filename string, data []byte) (Draft, error) {
	name := strings.ToLower(filename)
	var files []File
	switch {
	case strings.HasSuffix(name, ".zip"):
		fs, err := Unzip(data, s.cfg.Limits)
		if err != nil {
			return Draft{}, err
		}
		dirs := skillDirs(fs)
		if len(dirs) != 1 {
			return Draft{}, failure.Unprocessable("skill_archive_layout", "the zip must hold exactly one skill (one SKILL.md); found %d", len(dirs))
		}
		for _, f := range dirs {
			files = f
		}
	case strings.HasSuffix(name, "skill.md"):
		if int64(len(data)) > s.cfg.Limits.MaxFile {
			return Draft{}, failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "SKILL.md is %d bytes (limit %d)", len(data), s.cfg.Limits.MaxFile)
		}
		files = []File{{Path: "SKILL.md", Data: data}}
	default:
		return Draft{}, failure.New(failure.KindUnsupportedMedia, "unsupported_skill_upload", "upload a .zip or a SKILL.md")
	}
	d := s.newDraft(sub, SourceUpload, filename)
	item, err := s.stage(ctx, d.DraftID, files)
	if err != nil {
		return Draft{}, err
	}
	d.Items = []DraftItem{item}
	return d, s.saveDraft(ctx, d)
}

func (s *Service) newDraft(sub access.Subject, source, from string) Draft {
	share, _ := s.normalizeShare(sub, nil)
	now := s.now().UTC().Truncate(time.Millisecond)
	return Draft{DraftID: newID(), CreatedBy: sub.UID, SourceType: source, Source: from, CreatedAt: now, ExpiresAt: now.Add(s.cfg.DraftTTL),
		DefaultShareConfig: share, AllowedAccessLevels: AllowedAccessLevels(sub)}
}

// parseFiles reads the SKILL.md at the root of one skill's files and checks
// their count against the archive limits.
func (s *Service) parseFiles(files []File) (Meta, error) {
	md, ok := skillMD(files)
	if !ok {
		return Meta{}, failure.Unprocessable("invalid_skill_md", "the skill has no SKILL.md at its root")
	}
	m, err := ParseSkillMD(md)
	if err != nil {
		return Meta{}, err
	}
	if len(files) > s.cfg.Limits.MaxEntries {
		return Meta{}, failure.Unprocessable(CodeArchiveEntries, "the skill has %d files (limit %d)", len(files), s.cfg.Limits.MaxEntries)
	}
	return m, nil
}

// stage parses one skill's files and stores them under the draft.
func (s *Service) stage(ctx context.Context, draftID string, files []File) (DraftItem, error) {
	m, err := s.parseFiles(files)
	if err != nil {
		return DraftItem{}, err
	}
	item := DraftItem{DraftItemID: newID()[:16], OriginalName: m.Slug, Name: m.Name, Description: m.Description,
		ToolDependencies: m.ToolDependencies, MCPDependencies: m.MCPDependencies, SkillDependencies: m.SkillDependencies,
		ContentHash: ContentHash(files), Warnings: []string{}, Success: true}
	if item.Slug, err = s.freeSlug(ctx, m.Slug); err != nil {
		return DraftItem{}, err
	}
	if item.Slug != m.Slug {
		item.Warnings = append(item.Warnings, fmt.Sprintf("slug %s is taken; a shared install will be %s", m.Slug, item.Slug))
	}
	if err := s.putFiles(ctx, draftPrefix(draftID, item.DraftItemID), files); err != nil {
		return DraftItem{}, err
	}
	return item, nil
}

// freeSlug is base, or base-v2, base-v3… when taken (the original's rule).
func (s *Service) freeSlug(ctx context.Context, base string) (string, error) {
	for i := 1; i < 1000; i++ {
		cand := base
		if i > 1 {
			cand = fmt.Sprintf("%s-v%d", base, i)
		}
		var taken bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skills WHERE slug = $1)`, cand).Scan(&taken); err != nil {
			return "", err
		}
		if !taken {
			return cand, nil
		}
	}
	return "", failure.Conflict("skill_slug_taken", "no free slug for %s", base)
}

func (s *Service) saveDraft(ctx context.Context, d Draft) error {
	items, _ := json.Marshal(d.Items)
	_, err := s.pool.Exec(ctx, `INSERT INTO skill_drafts (id, created_by, source_type, source, items, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, d.DraftID, d.CreatedBy, d.SourceType, d.Source, items, d.CreatedAt, d.ExpiresAt)
	return err
}

// draft loads a draft sub created (anything else, or expired: not found).
func (s *Service) draft(ctx context.Context, db postgres.DB, sub access.Subject, id string) (Draft, error) {
	notFound := failure.NotFound("skill_draft_not_found", "install draft %q not found (or expired)", id)
	if len(id) != 32 {
		return Draft{}, notFound
	}
	q := `SELECT id, created_by, source_type, source, items, created_at, expires_at FROM skill_drafts WHERE id = $1 AND expires_at > now()`
	var d Draft
	var items []byte
	err := db.QueryRow(ctx, q, id).Scan(&d.DraftID, &d.CreatedBy, &d.SourceType, &d.Source, &items, &d.CreatedAt, &d.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Draft{}, notFound
	}
	if err != nil {
		return Draft{}, err
	}
	if d.CreatedBy != sub.UID { // a draft is its creator's alone, whatever the role
		return Draft{}, notFound
	}
	_ = json.Unmarshal(items, &d.Items)
	return d, nil
}

func selectItems(d Draft, slugs []string) ([]DraftItem, error) {
	if len(slugs) == 0 {
		return d.Items, nil
	}
	var out []DraftItem
	for _, it := range d.Items {
		if slices.Contains(slugs, it.Slug) || slices.Contains(slugs, it.OriginalName) {
			out = append(out, it)
		}
	}
	if len(out) == 0 {
		return nil, failure.Unprocessable("invalid_slugs", "none of %v is in the draft", slugs)
	}
	return out, nil
}

// ConfirmShared is POST /api/skills/install-drafts/{draft_id}/confirm (an
// admin's own draft): each selected item becomes an indexed skill shared by
// share_config. The draft is consumed when at least one item installed.
func (s *Service) ConfirmShared(ctx context.Context, sub access.Subject, draftID string, slugs []string, share json.RawMessage) ([]Result, error) {
	if !isAdmin(sub) {
		return nil, failure.Forbidden("admin_required", "only administrators install shared skills")
	}
	d, err := s.draft(ctx, s.pool, sub, draftID)
	if err != nil {
		return nil, err
	}
	items, err := selectItems(d, slugs)
	if err != nil {
		return nil, err
	}
	cfg, err := s.normalizeShare(sub, share)
	if err != nil {
		return nil, err
	}
	out := []Result{}
	for _, it := range items {
		r := Result{Slug: it.Slug, Success: true}
		if !it.Success {
			r.Success, r.Error = false, it.Error
		} else if v, err := s.installShared(ctx, sub, d, it, cfg); err != nil {
			r.Success, r.Error = false, errText(err)
		} else {
			r.Skill = &v
		}
		out = append(out, r)
	}
	return out, s.consume(ctx, d, out)
}

func (s *Service) installShared(ctx context.Context, sub access.Subject, d Draft, it DraftItem, share json.RawMessage) (View, error) {
	if !ValidSlug(it.Slug) {
		return View{}, failure.Unprocessable("invalid_skill_slug", "invalid slug %q", it.Slug)
	}
	files, err := s.files(ctx, draftPrefix(d.DraftID, it.DraftItemID))
	if err != nil {
		return View{}, err
	}
	if len(files) == 0 {
		return View{}, failure.NotFound("skill_draft_not_found", "the draft's files are gone")
	}
	if it.Slug != it.OriginalName {
		for i := range files {
			if files[i].Path == "SKILL.md" {
				files[i].Data = RewriteSlug(files[i].Data, it.Slug)
			}
		}
	}
	g, _, err := s.graph(ctx)
	if err != nil {
		return View{}, err
	}
	if err := checkCycle(g, it.Slug, it.SkillDependencies); err != nil {
		return View{}, err
	}
	// The row first: a concurrent install of the same slug fails here,
	// before any file is written.
	if err := s.insert(ctx, Skill{Slug: it.Slug, Name: it.Name, Description: it.Description, SourceType: d.SourceType,
		ToolDependencies: it.ToolDependencies, MCPDependencies: it.MCPDependencies, SkillDependencies: it.SkillDependencies,
		ContentHash: ContentHash(files), ShareConfig: share, Enabled: true, CreatedBy: sub.UID}); err != nil {
		return View{}, err
	}
	if err := s.putFiles(ctx, skillPrefix(it.Slug), files); err != nil {
		_, _ = s.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM skills WHERE slug = $1`, it.Slug)
		_ = s.deletePrefix(context.WithoutCancel(ctx), skillPrefix(it.Slug))
		return View{}, err
	}
	sk, err := s.get(ctx, s.pool, it.Slug)
	return ViewOf(sub, sk), err
}

func (s *Service) insert(ctx context.Context, sk Skill) error {
	t, _ := json.Marshal(normalize(sk.ToolDependencies))
	m, _ := json.Marshal(normalize(sk.MCPDependencies))
	k, _ := json.Marshal(normalize(sk.SkillDependencies))
	var share any
	if len(sk.ShareConfig) > 0 {
		share = []byte(sk.ShareConfig)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO skills (slug, name, description, source_type, tool_dependencies, mcp_dependencies,
		skill_dependencies, version, content_hash, share_config, enabled, created_by, updated_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
		sk.Slug, sk.Name, sk.Description, sk.SourceType, t, m, k, sk.Version, sk.ContentHash, share, sk.Enabled, sk.CreatedBy)
	if postgres.IsUniqueViolation(err, "skills_pkey") {
		return failure.Conflict("skill_slug_taken", "skill slug %q is taken; prepare the install again", sk.Slug)
	}
	return err
}

// consume deletes a draft once one of its items installed.
func (s *Service) consume(ctx context.Context, d Draft, results []Result) error {
	for _, r := range results {
		if r.Success {
			return s.dropDraft(ctx, d.DraftID)
		}
	}
	return nil
}

func (s *Service) dropDraft(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM skill_drafts WHERE id = $1`, id); err != nil {
		return err
	}
	return s.deletePrefix(ctx, "skill-drafts/"+id+"/")
}

// Discard is DELETE /api/skills/install-drafts/{draft_id}.
func (s *Service) Discard(ctx context.Context, sub access.Subject, draftID string) error {
	d, err := s.draft(ctx, s.pool, sub, draftID)
	if err != nil {
		return err
	}
	return s.dropDraft(ctx, d.DraftID)
}

// personalScope is the file scope of a user's workspace (the workspace
// does not depend on the thread; the provisioner needs one to name).
func personalScope(uid string) sandbox.Scope {
	return sandbox.Scope{UID: uid, FileThread: "personal-skills"}
}

func (s *Service) needWorkspace() error {
	if s.workspace == nil {
		return failure.New(failure.KindUnavailable, "workspace_unavailable", "personal skills need the sandbox provisioner (SANDBOX_PROVISIONER_URL)")
	}
	return nil
}

// ConfirmPersonal is POST /api/skills/personal/install-drafts/{draft_id}/confirm:
// each selected item is written to the caller's workspace under the slug
// its SKILL.md declares; an existing personal skill of that slug is a
// failure, not overwritten.
func (s *Service) ConfirmPersonal(ctx context.Context, sub access.Subject, draftID string, slugs []string) ([]Result, error) {
	if err := s.needWorkspace(); err != nil {
		return nil, err
	}
	d, err := s.draft(ctx, s.pool, sub, draftID)
	if err != nil {
		return nil, err
	}
	items, err := selectItems(d, slugs)
	if err != nil {
		return nil, err
	}
	out := []Result{}
	for _, it := range items {
		r := Result{Slug: it.OriginalName, RequestedSlug: it.Slug, Success: true}
		if !it.Success {
			r.Success, r.Error = false, it.Error
		} else if v, err := s.installPersonal(ctx, sub, d, it); err != nil {
			r.Success, r.Error = false, errText(err)
		} else {
			r.Skill = &v
		}
		out = append(out, r)
	}
	return out, s.consume(ctx, d, out)
}

func (s *Service) installPersonal(ctx context.Context, sub access.Subject, d Draft, it DraftItem) (View, error) {
	files, err := s.files(ctx, draftPrefix(d.DraftID, it.DraftItemID))
	if err != nil {
		return View{}, err
	}
	dir := fmt.Sprintf(personalRel, it.OriginalName)
	sc := personalScope(sub.UID)
	sort.Slice(files, func(i, j int) bool {
		return files[i].Path == "SKILL.md" || (files[j].Path != "SKILL.md" && files[i].Path < files[j].Path)
	})
	for i, f := range files {
		// SKILL.md first and exclusive: it claims the slug.
		if _, err := s.workspace.WriteFile(ctx, sc, dir+f.Path, f.Data, i == 0); err != nil {
			if sandbox.IsCode(err, "exists") {
				return View{}, failure.Conflict("personal_skill_exists", "you already have a personal skill %q", it.OriginalName)
			}
			return View{}, err
		}
	}
	return ViewOf(sub, Skill{Slug: it.OriginalName, Name: it.Name, Description: it.Description, SourceType: SourcePersonal,
		ToolDependencies: []string{}, MCPDependencies: []string{}, SkillDependencies: []string{}, DirPath: dir, ContentHash: it.ContentHash,
		Enabled: true, CreatedBy: sub.UID}), nil
}

// Personal lists uid's personal skills (an unreadable SKILL.md is left
// out). Personal skills declare no dependencies here, as the original.
func (s *Service) Personal(ctx context.Context, uid string) ([]Skill, error) {
	if s.workspace == nil {
		return nil, nil
	}
	sc := personalScope(uid)
	entries, _, err := s.workspace.List(ctx, sc, PersonalRoot, 1)
	if sandbox.IsCode(err, "not_found") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Skill
	for _, e := range entries {
		slug := path.Base(e.Path)
		if !e.IsDir || !ValidSlug(slug) {
			continue
		}
		md, _, _, err := s.workspace.ReadFile(ctx, sc, PersonalRoot+"/"+slug+"/SKILL.md", 1<<20)
		if err != nil {
			continue
		}
		m, err := ParseSkillMD(md)
		if err != nil {
			continue
		}
		out = append(out, Skill{Slug: slug, Name: m.Name, Description: m.Description, SourceType: SourcePersonal,
			ToolDependencies: []string{}, MCPDependencies: []string{}, SkillDependencies: []string{},
			DirPath: fmt.Sprintf(personalRel, slug), Enabled: true, CreatedBy: uid})
	}
	return out, nil
}

// PersonalFile is GET /api/skills/personal/{slug}/file?path=.
func (s *Service) PersonalFile(ctx context.Context, sub access.Subject, slug, rel string) (FileContent, error) {
	if err := s.needWorkspace(); err != nil {
		return FileContent{}, err
	}
	notFound := failure.NotFound("personal_skill_not_found", "you have no personal skill %q", slug)
	if !ValidSlug(slug) {
		return FileContent{}, notFound
	}
	// The skill first: a caller without it learns nothing from the path's checks.
	sc := personalScope(sub.UID)
	if _, _, _, err := s.workspace.ReadFile(ctx, sc, fmt.Sprintf(personalRel, slug)+"SKILL.md", 1); err != nil {
		if sandbox.IsCode(err, "not_found") {
			return FileContent{}, notFound
		}
		return FileContent{}, err
	}
	rel, err := cleanRel(rel)
	if err != nil {
		return FileContent{}, err
	}
	b, _, truncated, err := s.workspace.ReadFile(ctx, sc, fmt.Sprintf(personalRel, slug)+rel, s.cfg.Limits.MaxFile)
	if sandbox.IsCode(err, "not_found") {
		return FileContent{}, failure.NotFound("skill_file_not_found", "file %s not found", rel)
	}
	if err != nil {
		return FileContent{}, err
	}
	if truncated {
		return FileContent{}, failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "%s is larger than %d bytes", rel, s.cfg.Limits.MaxFile)
	}
	return textOf(rel, b)
}

// DeletePersonal is DELETE /api/skills/personal/{slug}.
func (s *Service) DeletePersonal(ctx context.Context, sub access.Subject, slug string) error {
	if err := s.needWorkspace(); err != nil {
		return err
	}
	notFound := failure.NotFound("personal_skill_not_found", "you have no personal skill %q", slug)
	if !ValidSlug(slug) {
		return notFound
	}
	sc := personalScope(sub.UID)
	if _, _, _, err := s.workspace.ReadFile(ctx, sc, fmt.Sprintf(personalRel, slug)+"SKILL.md", 1); err != nil {
		if sandbox.IsCode(err, "not_found") {
			return notFound
		}
		return err
	}
	return s.workspace.DeleteFile(ctx, sc, strings.TrimSuffix(fmt.Sprintf(personalRel, slug), "/"), true)
}
