package skill

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Workspace is the users' workspaces (the sandbox provisioner's file API,
// *sandbox.Client): personal skills live there.
type Workspace interface {
	ReadFile(ctx context.Context, s sandbox.Scope, path string, maxBytes int64) ([]byte, int64, bool, error)
	WriteFile(ctx context.Context, s sandbox.Scope, path string, data []byte, exclusive bool) (int64, error)
	DeleteFile(ctx context.Context, s sandbox.Scope, path string, recursive bool) error
	List(ctx context.Context, s sandbox.Scope, path string, depth int) ([]sandbox.Entry, bool, error)
}

// Tools are the registered tools (*tool.Registry).
type Tools interface {
	Has(name string) bool
	Options() []tool.ListingOption
}

// MCPServers lists the slugs of the enabled MCP servers.
type MCPServers func(ctx context.Context) ([]string, error)

// Config of the service. Zero fields take defaults.
type Config struct {
	Limits   Limits
	DraftTTL time.Duration // default 1 h
	Remote   Remote
}

// Service is the Skills use cases. Every method that takes an
// access.Subject checks it against the skill it touches.
type Service struct {
	pool      *pgxpool.Pool
	blob      blob.Store
	workspace Workspace // nil: personal skills are unavailable (503)
	tools     Tools
	mcps      MCPServers
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
}

// New returns the service. workspace, tools and mcps may be nil.
func New(pool *pgxpool.Pool, store blob.Store, workspace Workspace, tools Tools, mcps MCPServers, cfg Config, log *slog.Logger) *Service {
	if cfg.DraftTTL <= 0 {
		cfg.DraftTTL = time.Hour
	}
	cfg.Limits = cfg.Limits.withDefaults()
	cfg.Remote = cfg.Remote.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	return &Service{pool: pool, blob: store, workspace: workspace, tools: tools, mcps: mcps, cfg: cfg, log: log, now: time.Now}
}

func isAdmin(sub access.Subject) bool { return sub.Role == "admin" || sub.Role == "superadmin" }

// AllowedAccessLevels are the share scopes sub may give a skill: only
// admins share beyond themselves.
func AllowedAccessLevels(sub access.Subject) []string {
	if isAdmin(sub) {
		return []string{"global", "department", "user"}
	}
	return []string{"user"}
}

// Level is sub's access to sk: built-in skills are read by everyone and
// managed (enabled or disabled) by admins; others by share_config v2 with
// the creator and superadmins managing.
func Level(sub access.Subject, sk Skill) access.Level {
	if sk.SourceType == SourceBuiltin {
		if isAdmin(sub) {
			return access.Manage
		}
		return access.Read
	}
	c, err := access.Parse(sk.ShareConfig)
	if err != nil {
		c = &access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "user"}}
	}
	if c == nil {
		c = &access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "user"}}
	}
	return access.Resolve(sub, sk.CreatedBy, c, access.Manage)
}

// View is a skill as the routes show it to sub.
type View struct {
	Skill
	CanManage           bool   `json:"can_manage"`
	EffectivePermission string `json:"effective_permission"`
	IsBuiltin           bool   `json:"is_builtin"`
	Path                string `json:"skill_md_path,omitempty"`
}

// ViewOf is sk as sub sees it.
func ViewOf(sub access.Subject, sk Skill) View {
	l := Level(sub, sk)
	if sk.SourceType == SourcePersonal {
		l = access.Manage
	}
	v := View{Skill: sk, CanManage: l == access.Manage, EffectivePermission: l.String(), IsBuiltin: sk.SourceType == SourceBuiltin}
	v.Path = SharedRoot + "/" + sk.Slug + "/SKILL.md"
	if sk.SourceType == SourcePersonal {
		v.Path = fmt.Sprintf(personalRel, sk.Slug) + "SKILL.md"
	}
	return v
}

const skillColumns = `slug, name, description, source_type, tool_dependencies, mcp_dependencies, skill_dependencies,
	version, content_hash, share_config, enabled, created_by, updated_by, created_at, updated_at`

func scanSkill(row pgx.Row) (Skill, error) {
	var sk Skill
	var tools, mcps, skills []byte
	var share []byte
	if err := row.Scan(&sk.Slug, &sk.Name, &sk.Description, &sk.SourceType, &tools, &mcps, &skills, &sk.Version, &sk.ContentHash,
		&share, &sk.Enabled, &sk.CreatedBy, &sk.UpdatedBy, &sk.CreatedAt, &sk.UpdatedAt); err != nil {
		return Skill{}, err
	}
	_ = json.Unmarshal(tools, &sk.ToolDependencies)
	_ = json.Unmarshal(mcps, &sk.MCPDependencies)
	_ = json.Unmarshal(skills, &sk.SkillDependencies)
	sk.ToolDependencies, sk.MCPDependencies, sk.SkillDependencies = normalize(sk.ToolDependencies), normalize(sk.MCPDependencies), normalize(sk.SkillDependencies)
	if len(share) > 0 && string(share) != "null" {
		sk.ShareConfig = share
	}
	sk.DirPath = "skills/" + sk.Slug
	return sk, nil
}

// all lists every indexed skill, by slug.
func (s *Service) all(ctx context.Context) ([]Skill, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+skillColumns+` FROM skills ORDER BY slug`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Skill
	for rows.Next() {
		sk, err := scanSkill(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sk)
	}
	return out, rows.Err()
}

func (s *Service) get(ctx context.Context, db postgres.DB, slug string) (Skill, error) {
	if !ValidSlug(slug) {
		return Skill{}, failure.NotFound("skill_not_found", "skill %q not found", slug)
	}
	sk, err := scanSkill(db.QueryRow(ctx, `SELECT `+skillColumns+` FROM skills WHERE slug = $1`, slug))
	if errors.Is(err, pgx.ErrNoRows) {
		return Skill{}, failure.NotFound("skill_not_found", "skill %q not found", slug)
	}
	return sk, err
}

// readable returns a skill sub may read (or manage): anything else is not found.
func (s *Service) readable(ctx context.Context, sub access.Subject, slug string) (Skill, error) {
	sk, err := s.get(ctx, s.pool, slug)
	if err != nil {
		return Skill{}, err
	}
	l := Level(sub, sk)
	if l == access.None || (l == access.Read && !sk.Enabled) {
		return Skill{}, failure.NotFound("skill_not_found", "skill %q not found", slug)
	}
	return sk, nil
}

// manageable returns a skill sub may manage: 404 when it may not read it,
// 403 skill_manage_forbidden when it only reads it.
func (s *Service) manageable(ctx context.Context, sub access.Subject, slug string) (Skill, error) {
	sk, err := s.readable(ctx, sub, slug)
	if err != nil {
		return Skill{}, err
	}
	if Level(sub, sk) != access.Manage {
		return Skill{}, failure.Forbidden("skill_manage_forbidden", "you may read skill %q but not manage it", slug)
	}
	return sk, nil
}

// CheckManage reports whether sub may manage slug (404 / 403 as manageable).
func (s *Service) CheckManage(ctx context.Context, sub access.Subject, slug string) error {
	_, err := s.manageable(ctx, sub, slug)
	return err
}

func editable(sk Skill) error {
	if sk.SourceType == SourceBuiltin {
		return failure.Forbidden("skill_builtin_readonly", "built-in skill %q cannot be edited or deleted (only enabled or disabled)", sk.Slug)
	}
	return nil
}

// Shared lists the indexed skills sub may use: enabled and readable.
func (s *Service) Shared(ctx context.Context, sub access.Subject) ([]Skill, error) {
	all, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	var out []Skill
	for _, sk := range all {
		if sk.Enabled && Level(sub, sk) != access.None {
			out = append(out, sk)
		}
	}
	return out, nil
}

// Manageable is GET /api/system/skills: skills sub manages, and enabled
// ones it reads.
func (s *Service) Manageable(ctx context.Context, sub access.Subject) ([]View, error) {
	all, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	out := []View{}
	for _, sk := range all {
		l := Level(sub, sk)
		if l == access.Manage || (sk.Enabled && l == access.Read) {
			out = append(out, ViewOf(sub, sk))
		}
	}
	return out, nil
}

// Cards is GET /api/skills (and /accessible): the shared skills sub may use
// and its personal ones, a personal skill replacing a shared one of the
// same slug.
func (s *Service) Cards(ctx context.Context, sub access.Subject) ([]View, error) {
	shared, err := s.Shared(ctx, sub)
	if err != nil {
		return nil, err
	}
	personal, err := s.Personal(ctx, sub.UID)
	if err != nil {
		return nil, err
	}
	own := map[string]bool{}
	out := []View{}
	for _, p := range personal {
		own[p.Slug] = true
		out = append(out, ViewOf(sub, p))
	}
	for _, sk := range shared {
		if !own[sk.Slug] {
			out = append(out, ViewOf(sub, sk))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out, nil
}

// files reads a shared skill's files from the object store.
func (s *Service) files(ctx context.Context, prefix string) ([]File, error) {
	infos, err := s.blob.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, in := range infos {
		rc, _, err := s.blob.Get(ctx, in.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: strings.TrimPrefix(in.Key, prefix), Data: b})
	}
	return out, nil
}

// dirMarker stands for an empty directory in the object store.
const dirMarker = ".skill-dir"

func skillPrefix(slug string) string { return "skills/" + slug + "/" }

// Files returns a shared skill's files (directory markers left out).
func (s *Service) Files(ctx context.Context, slug string) ([]File, error) {
	fs, err := s.files(ctx, skillPrefix(slug))
	if err != nil {
		return nil, err
	}
	out := fs[:0]
	for _, f := range fs {
		if path.Base(f.Path) != dirMarker {
			out = append(out, f)
		}
	}
	return out, nil
}

func (s *Service) putFiles(ctx context.Context, prefix string, files []File) error {
	for _, f := range files {
		if err := blob.ValidateKey(prefix + f.Path); err != nil {
			return failure.Unprocessable(CodeArchiveUnsafe, "file %q cannot be stored: %v", f.Path, err)
		}
		if _, err := s.blob.Put(ctx, prefix+f.Path, bytes.NewReader(f.Data), int64(len(f.Data)), ""); err != nil {
			return fmt.Errorf("store skill file %s: %w", f.Path, err)
		}
	}
	return nil
}

func (s *Service) deletePrefix(ctx context.Context, prefix string) error {
	infos, err := s.blob.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, in := range infos {
		if err := s.blob.Delete(ctx, in.Key); err != nil {
			return err
		}
	}
	return nil
}

// TreeNode is one entry of a skill's directory tree.
type TreeNode struct {
	Name     string      `json:"name"`
	Path     string      `json:"path"`
	IsDir    bool        `json:"is_dir"`
	Children []*TreeNode `json:"children,omitempty"`
}

// Tree is GET /api/system/skills/{slug}/tree.
func (s *Service) Tree(ctx context.Context, sub access.Subject, slug string) ([]*TreeNode, error) {
	if _, err := s.readable(ctx, sub, slug); err != nil {
		return nil, err
	}
	fs, err := s.files(ctx, skillPrefix(slug))
	if err != nil {
		return nil, err
	}
	return buildTree(fs), nil
}

func buildTree(fs []File) []*TreeNode {
	root := &TreeNode{IsDir: true}
	dirs := map[string]*TreeNode{"": root}
	var dir func(p string) *TreeNode
	dir = func(p string) *TreeNode {
		if n, ok := dirs[p]; ok {
			return n
		}
		parent := dir(strings.TrimSuffix(path.Dir(p), "."))
		n := &TreeNode{Name: path.Base(p), Path: p, IsDir: true, Children: []*TreeNode{}}
		parent.Children = append(parent.Children, n)
		dirs[p] = n
		return n
	}
	for _, f := range fs {
		d := strings.TrimSuffix(path.Dir(f.Path), ".")
		parent := dir(d)
		if path.Base(f.Path) == dirMarker {
			continue
		}
		parent.Children = append(parent.Children, &TreeNode{Name: path.Base(f.Path), Path: f.Path})
	}
	var sortRec func(n *TreeNode)
	sortRec = func(n *TreeNode) {
		sort.Slice(n.Children, func(i, j int) bool {
			a, b := n.Children[i], n.Children[j]
			if a.IsDir != b.IsDir {
				return a.IsDir
			}
			return strings.ToLower(a.Name) < strings.ToLower(b.Name)
		})
		for _, c := range n.Children {
			sortRec(c)
		}
	}
	sortRec(root)
	if root.Children == nil {
		return []*TreeNode{}
	}
	return root.Children
}

// cleanRel checks a path relative to a skill's directory.
func cleanRel(p string) (string, error) {
	p = strings.TrimLeft(strings.ReplaceAll(strings.TrimSpace(p), `\`, "/"), "/")
	if p == "" {
		return "", failure.Invalid("invalid_path", "path is required")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return "", failure.Invalid("invalid_path", "path %q must be a plain relative path", p)
		}
	}
	if path.Base(p) == dirMarker || strings.ContainsRune(p, 0) {
		return "", failure.Invalid("invalid_path", "path %q is reserved", p)
	}
	return p, nil
}

// FileContent is a skill file read as text.
type FileContent struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func textOf(p string, b []byte) (FileContent, error) {
	if !isText(p) {
		return FileContent{}, failure.Unprocessable("skill_file_not_text", "only text files can be read here (%s)", p)
	}
	if !utf8Valid(b) {
		return FileContent{}, failure.Unprocessable("skill_file_not_text", "%s is not UTF-8", p)
	}
	return FileContent{Path: p, Content: string(b)}, nil
}

// ReadFile is GET /api/system/skills/{slug}/file?path=.
func (s *Service) ReadFile(ctx context.Context, sub access.Subject, slug, rel string) (FileContent, error) {
	if _, err := s.readable(ctx, sub, slug); err != nil {
		return FileContent{}, err
	}
	rel, err := cleanRel(rel)
	if err != nil {
		return FileContent{}, err
	}
	rc, _, err := s.blob.Get(ctx, skillPrefix(slug)+rel)
	if errors.Is(err, blob.ErrNotFound) {
		return FileContent{}, failure.NotFound("skill_file_not_found", "file %s not found", rel)
	}
	if err != nil {
		return FileContent{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, s.cfg.Limits.MaxFile+1))
	if err != nil {
		return FileContent{}, err
	}
	return textOf(rel, b)
}

// CreateNode is POST /api/system/skills/{slug}/file: a file or directory.
func (s *Service) CreateNode(ctx context.Context, sub access.Subject, slug, rel string, isDir bool, content string) error {
	sk, err := s.manageable(ctx, sub, slug)
	if err != nil {
		return err
	}
	if err := editable(sk); err != nil {
		return err
	}
	rel, err = cleanRel(rel)
	if err != nil {
		return err
	}
	if d := len(strings.Split(rel, "/")); d > s.cfg.Limits.MaxDepth {
		return failure.Unprocessable(CodeArchiveDepth, "path %s is %d levels deep (limit %d)", rel, d, s.cfg.Limits.MaxDepth)
	}
	key := skillPrefix(slug) + rel
	if _, err := s.blob.Stat(ctx, key); err == nil {
		return failure.Conflict("skill_file_exists", "%s already exists", rel)
	}
	if isDir {
		return s.putFiles(ctx, skillPrefix(slug), []File{{Path: rel + "/" + dirMarker}})
	}
	if !isText(rel) {
		return failure.Unprocessable("skill_file_not_text", "only text files can be created here (%s)", rel)
	}
	return s.writeFile(ctx, sub, sk, rel, []byte(content))
}

// UpdateFile is PUT /api/system/skills/{slug}/file. Writing SKILL.md
// re-reads its frontmatter (it must stay valid and keep the slug).
func (s *Service) UpdateFile(ctx context.Context, sub access.Subject, slug, rel, content string) error {
	sk, err := s.manageable(ctx, sub, slug)
	if err != nil {
		return err
	}
	if err := editable(sk); err != nil {
		return err
	}
	rel, err = cleanRel(rel)
	if err != nil {
		return err
	}
	if !isText(rel) {
		return failure.Unprocessable("skill_file_not_text", "only text files can be edited here (%s)", rel)
	}
	if _, err := s.blob.Stat(ctx, skillPrefix(slug)+rel); errors.Is(err, blob.ErrNotFound) {
		return failure.NotFound("skill_file_not_found", "file %s not found", rel)
	}
	return s.writeFile(ctx, sub, sk, rel, []byte(content))
}

func (s *Service) writeFile(ctx context.Context, sub access.Subject, sk Skill, rel string, data []byte) error {
	if int64(len(data)) > s.cfg.Limits.MaxFile {
		return failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "the file is %d bytes (limit %d)", len(data), s.cfg.Limits.MaxFile)
	}
	var meta *Meta
	if rel == "SKILL.md" {
		m, err := ParseSkillMD(data)
		if err != nil {
			return err
		}
		if m.Slug != sk.Slug {
			return failure.Unprocessable("skill_slug_mismatch", "SKILL.md declares slug %q; this skill is %q", m.Slug, sk.Slug)
		}
		meta = &m
	}
	if err := s.putFiles(ctx, skillPrefix(sk.Slug), []File{{Path: rel, Data: data}}); err != nil {
		return err
	}
	return s.touch(ctx, sub, sk.Slug, meta)
}

// touch recomputes a skill's content hash (and name and description when
// its SKILL.md changed).
func (s *Service) touch(ctx context.Context, sub access.Subject, slug string, meta *Meta) error {
	fs, err := s.Files(ctx, slug)
	if err != nil {
		return err
	}
	hash := ContentHash(fs)
	if meta != nil {
		_, err = s.pool.Exec(ctx, `UPDATE skills SET name = $2, description = $3, content_hash = $4, updated_by = $5, updated_at = now() WHERE slug = $1`,
			slug, meta.Name, meta.Description, hash, sub.UID)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE skills SET content_hash = $2, updated_by = $3, updated_at = now() WHERE slug = $1`, slug, hash, sub.UID)
	}
	return err
}

// DeleteNode is DELETE /api/system/skills/{slug}/file?path= (a file, or a
// directory with everything below it). SKILL.md cannot be deleted.
func (s *Service) DeleteNode(ctx context.Context, sub access.Subject, slug, rel string) error {
	sk, err := s.manageable(ctx, sub, slug)
	if err != nil {
		return err
	}
	if err := editable(sk); err != nil {
		return err
	}
	rel, err = cleanRel(rel)
	if err != nil {
		return err
	}
	if rel == "SKILL.md" {
		return failure.Unprocessable("skill_md_required", "SKILL.md cannot be deleted")
	}
	key := skillPrefix(slug) + rel
	if _, err := s.blob.Stat(ctx, key); err == nil {
		if err := s.blob.Delete(ctx, key); err != nil {
			return err
		}
		return s.touch(ctx, sub, slug, nil)
	}
	infos, err := s.blob.List(ctx, key+"/")
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		return failure.NotFound("skill_file_not_found", "file %s not found", rel)
	}
	if err := s.deletePrefix(ctx, key+"/"); err != nil {
		return err
	}
	return s.touch(ctx, sub, slug, nil)
}

// Export is GET /api/system/skills/{slug}/export: the skill as a zip whose
// root is its directory.
func (s *Service) Export(ctx context.Context, sub access.Subject, slug string) ([]byte, string, error) {
	if _, err := s.readable(ctx, sub, slug); err != nil {
		return nil, "", err
	}
	fs, err := s.Files(ctx, slug)
	if err != nil {
		return nil, "", err
	}
	b, err := Zip(slug, fs)
	return b, slug + ".zip", err
}

// Delete is DELETE /api/system/skills/{slug}. A skill others depend on
// cannot be deleted.
func (s *Service) Delete(ctx context.Context, sub access.Subject, slug string) error {
	sk, err := s.manageable(ctx, sub, slug)
	if err != nil {
		return err
	}
	if err := editable(sk); err != nil {
		return err
	}
	var users []string
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(slug ORDER BY slug), '{}') FROM skills WHERE skill_dependencies ? $1`, slug).Scan(&users); err != nil {
		return err
	}
	if len(users) > 0 {
		return failure.Conflict("skill_in_use", "skill %q is a dependency of %s", slug, strings.Join(users, ", "))
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM skills WHERE slug = $1`, slug); err != nil {
		return err
	}
	return s.deletePrefix(ctx, skillPrefix(slug))
}

// Result is one item of a batch answer.
type Result struct {
	Slug          string `json:"slug"`
	RequestedSlug string `json:"requested_slug,omitempty"`
	Success       bool   `json:"success"`
	Error         string `json:"error,omitempty"`
	Skill         *View  `json:"skill,omitempty"`
}

// DeleteBatch is POST /api/system/skills/delete-batch (at most 50 slugs).
func (s *Service) DeleteBatch(ctx context.Context, sub access.Subject, slugs []string) ([]Result, error) {
	slugs = normalize(slugs)
	if len(slugs) == 0 || len(slugs) > 50 {
		return nil, failure.Unprocessable("invalid_slugs", "slugs must list 1 to 50 skills")
	}
	out := []Result{}
	for _, slug := range slugs {
		r := Result{Slug: slug, Success: true}
		if err := s.Delete(ctx, sub, slug); err != nil {
			r.Success, r.Error = false, errText(err)
		}
		out = append(out, r)
	}
	return out, nil
}

func errText(err error) string {
	if fe, ok := failure.As(err); ok {
		return fe.Code + ": " + fe.Message
	}
	return "internal error"
}

// SetShareConfig is PUT /api/system/skills/{slug}/share-config.
func (s *Service) SetShareConfig(ctx context.Context, sub access.Subject, slug string, raw json.RawMessage) (View, error) {
	sk, err := s.manageable(ctx, sub, slug)
	if err != nil {
		return View{}, err
	}
	if err := editable(sk); err != nil {
		return View{}, err
	}
	cfg, err := s.normalizeShare(sub, raw)
	if err != nil {
		return View{}, err
	}
	if _, err := s.pool.Exec(ctx, `UPDATE skills SET share_config = $2, updated_by = $3, updated_at = now() WHERE slug = $1`, slug, cfg, sub.UID); err != nil {
		return View{}, err
	}
	sk, err = s.get(ctx, s.pool, slug)
	return ViewOf(sub, sk), err
}

// normalizeShare validates a share_config sub may give (default: only sub).
func (s *Service) normalizeShare(sub access.Subject, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		b, _ := json.Marshal(access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "user", UserUIDs: []string{sub.UID}}})
		return b, nil
	}
	c, err := access.Parse(raw)
	if err != nil {
		return nil, err
	}
	allowed := AllowedAccessLevels(sub)
	for _, sc := range []*access.Scope{&c.ReadScope, c.ManageScope} {
		if sc != nil && !slices.Contains(allowed, sc.AccessLevel) {
			return nil, failure.Forbidden("skill_share_forbidden", "you may not share a skill at access level %q", sc.AccessLevel)
		}
	}
	b, _ := json.Marshal(c)
	return b, nil
}

// SetEnabled is PUT /api/system/skills/{slug}/enabled.
func (s *Service) SetEnabled(ctx context.Context, sub access.Subject, slug string, enabled bool) (View, error) {
	if _, err := s.manageable(ctx, sub, slug); err != nil {
		return View{}, err
	}
	if _, err := s.pool.Exec(ctx, `UPDATE skills SET enabled = $2, updated_by = $3, updated_at = now() WHERE slug = $1`, slug, enabled, sub.UID); err != nil {
		return View{}, err
	}
	sk, err := s.get(ctx, s.pool, slug)
	return ViewOf(sub, sk), err
}

// DependencyOptions is GET /api/system/skills/dependency-options.
type DependencyOptions struct {
	Tools  []map[string]string `json:"tools"`
	MCPs   []string            `json:"mcps"`
	Skills []string            `json:"skills"`
}

// Options lists what a skill may depend on (slug: the skill being edited,
// left out; it must be manageable by sub).
func (s *Service) Options(ctx context.Context, sub access.Subject, slug string) (DependencyOptions, error) {
	if slug != "" {
		if _, err := s.manageable(ctx, sub, slug); err != nil {
			return DependencyOptions{}, err
		}
	}
	out := DependencyOptions{Tools: []map[string]string{}, MCPs: []string{}, Skills: []string{}}
	if s.tools != nil {
		for _, o := range s.tools.Options() {
			out.Tools = append(out.Tools, map[string]string{"slug": o.Value, "name": o.Label})
		}
	}
	if s.mcps != nil {
		m, err := s.mcps(ctx)
		if err != nil {
			return out, err
		}
		out.MCPs = append(out.MCPs, m...)
	}
	shared, err := s.Shared(ctx, sub)
	if err != nil {
		return out, err
	}
	for _, sk := range shared {
		if sk.Slug != slug {
			out.Skills = append(out.Skills, sk.Slug)
		}
	}
	return out, nil
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func utf8Valid(b []byte) bool { return utf8.Valid(b) }

// httpClient is what remote sources are fetched with (the SSRF-guarded
// *http.Client).
type httpClient interface {
	Do(*http.Request) (*http.Response, error)
}
