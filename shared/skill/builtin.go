package skill

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"path"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/access"
)

//go:embed builtin
var builtinFS embed.FS

// BuiltinSpec is a skill shipped with the product.
type BuiltinSpec struct {
	Slug        string   `json:"slug"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     string   `json:"version"`
	Tools       []string `json:"tool_dependencies"`
	MCPs        []string `json:"mcp_dependencies"`
	Skills      []string `json:"skill_dependencies"`
	ContentHash string   `json:"content_hash"`
	Files       []File   `json:"-"`
}

// builtinVersion is recorded with the built-in skills; a sync overwrites a
// built-in skill whose content hash or version changed.
const builtinVersion = "2026.12.01"

// Builtins returns the built-in skills: knowledge-base (binds the knowledge
// tools), html-preview, deep-research (depends on the web tools and
// html-preview). Their dependencies are their SKILL.md frontmatter's.
func Builtins() []BuiltinSpec {
	var out []BuiltinSpec
	dirs, _ := fs.ReadDir(builtinFS, "builtin")
	for _, d := range dirs {
		var files []File
		root := path.Join("builtin", d.Name())
		_ = fs.WalkDir(builtinFS, root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := builtinFS.ReadFile(p)
			files = append(files, File{Path: strings.TrimPrefix(p, root+"/"), Data: b})
			return err
		})
		md, _ := skillMD(files)
		m, err := ParseSkillMD(md)
		if err != nil {
			panic("built-in skill " + d.Name() + ": " + err.Error()) // a build defect, caught by the package tests
		}
		out = append(out, BuiltinSpec{Slug: m.Slug, Name: m.Name, Description: m.Description, Version: builtinVersion,
			Tools: m.ToolDependencies, MCPs: m.MCPDependencies, Skills: m.SkillDependencies, ContentHash: ContentHash(files), Files: files})
	}
	return out
}

// BuiltinViews is GET /api/system/skills/builtin: the built-in skills as
// indexed (after a sync), or as shipped.
func (s *Service) BuiltinViews(ctx context.Context, sub access.Subject) ([]View, error) {
	all, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	out := []View{}
	for _, sk := range all {
		if sk.SourceType == SourceBuiltin {
			out = append(out, ViewOf(sub, sk))
		}
	}
	return out, nil
}

// SyncBuiltins is POST /api/system/skills/builtin/sync (and start-up): each
// built-in skill is indexed and its files written; one whose content hash
// changed is overwritten, keeping its enabled flag. A slug taken by a
// non-built-in skill is left alone.
func (s *Service) SyncBuiltins(ctx context.Context, actor string) ([]Skill, error) {
	global, _ := json.Marshal(access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "global"}})
	var out []Skill
	for _, b := range Builtins() {
		cur, err := s.get(ctx, s.pool, b.Slug)
		switch {
		case err == nil && cur.SourceType != SourceBuiltin:
			s.log.Warn("built-in skill slug taken by another skill; not synced", "slug", b.Slug)
			continue
		case err == nil && cur.ContentHash == b.ContentHash && cur.Version == b.Version:
			out = append(out, cur)
			continue
		case err == nil:
			if err := s.deletePrefix(ctx, skillPrefix(b.Slug)); err != nil {
				return nil, err
			}
			t, _ := json.Marshal(normalize(b.Tools))
			m, _ := json.Marshal(normalize(b.MCPs))
			k, _ := json.Marshal(normalize(b.Skills))
			if _, err := s.pool.Exec(ctx, `UPDATE skills SET name = $2, description = $3, tool_dependencies = $4, mcp_dependencies = $5,
				skill_dependencies = $6, version = $7, content_hash = $8, updated_by = $9, updated_at = now() WHERE slug = $1`,
				b.Slug, b.Name, b.Description, t, m, k, b.Version, b.ContentHash, actor); err != nil {
				return nil, err
			}
		default:
			if err := s.insert(ctx, Skill{Slug: b.Slug, Name: b.Name, Description: b.Description, SourceType: SourceBuiltin,
				ToolDependencies: b.Tools, MCPDependencies: b.MCPs, SkillDependencies: b.Skills, Version: b.Version,
				ContentHash: b.ContentHash, ShareConfig: global, Enabled: true, CreatedBy: actor}); err != nil {
				if cur, gerr := s.get(ctx, s.pool, b.Slug); gerr == nil && cur.SourceType == SourceBuiltin {
					out = append(out, cur) // a concurrent sync won
					continue
				}
				return nil, err
			}
		}
		if err := s.putFiles(ctx, skillPrefix(b.Slug), b.Files); err != nil {
			return nil, err
		}
		cur, err = s.get(ctx, s.pool, b.Slug)
		if err != nil {
			return nil, err
		}
		out = append(out, cur)
	}
	return out, nil
}
