// Package skill is the Skills domain: a skill is a directory with a SKILL.md
// (frontmatter name, description, optional slug and dependencies) and files
// beside it. Shared and built-in skills are indexed in Postgres (table
// skills, owned here) with their files in the object store under
// skills/<slug>/…, shared like knowledge bases (share_config v2); personal
// skills live in their user's workspace (agents/skills/<slug>, reached
// through the sandbox provisioner's file API) and are not indexed. Uploads
// and remote sources become install drafts (table skill_drafts) that are
// confirmed or discarded; archives from users are checked for path escape,
// symlinks, entry count, depth, size and compression ratio.
//
// At run time (runtime.go) a run's skills are fixed at its first step (table
// run_skills), listed in the system prompt, activated when the agent reads
// their SKILL.md, and their tool and MCP dependencies are shown to the model
// only once activated.
//
// Imported by: functions/intake/intake (routes), shared/bootstrap/mcplayer,
// shared/bootstrap/sandboxes, infra/local, tests. May import: shared/access, shared/blob, shared/failure,
// shared/postgres, shared/run, shared/sandbox, shared/tool, pgx, sigs.k8s.io/yaml.
package skill

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Source types.
const (
	SourceBuiltin  = "builtin"
	SourceUpload   = "upload"
	SourceRemote   = "remote"
	SourcePersonal = "personal"
)

// Paths inside the sandbox.
const (
	SharedRoot   = "/home/gem/skills"                                // shared and built-in skills, read-only
	PersonalRoot = "/home/gem/user-data/workspace/agents/skills"     // the user's own skills
	personalRel  = "/home/gem/user-data/workspace/agents/skills/%s/" // fmt of one personal skill's dir
)

var slugPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidSlug reports whether s is a skill slug: lower-case letters, digits and
// single hyphens, at most 128 characters (the original's rule).
func ValidSlug(s string) bool { return len(s) <= 128 && slugPattern.MatchString(s) }

// Skill is a shared or built-in skill (a row of skills), or a personal one.
type Skill struct {
	Slug              string          `json:"slug"`
	Name              string          `json:"name"`
	Description       string          `json:"description"`
	SourceType        string          `json:"source_type"`
	ToolDependencies  []string        `json:"tool_dependencies"`
	MCPDependencies   []string        `json:"mcp_dependencies"`
	SkillDependencies []string        `json:"skill_dependencies"`
	DirPath           string          `json:"dir_path"`
	Version           string          `json:"version"`
	ContentHash       string          `json:"content_hash"`
	ShareConfig       json.RawMessage `json:"share_config"`
	Enabled           bool            `json:"enabled"`
	CreatedBy         string          `json:"created_by"`
	UpdatedBy         string          `json:"updated_by"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
}

// Meta is what a SKILL.md's frontmatter declares.
type Meta struct {
	Slug              string   `json:"slug"`
	Name              string   `json:"name"`
	Description       string   `json:"description"`
	ToolDependencies  []string `json:"tool_dependencies"`
	MCPDependencies   []string `json:"mcp_dependencies"`
	SkillDependencies []string `json:"skill_dependencies"`
}

// ParseSkillMD reads a SKILL.md: frontmatter between "---" lines with a
// name and a description; the slug is the frontmatter's slug, or the name
// when there is none (which must then follow the slug rule).
func ParseSkillMD(content []byte) (Meta, error) {
	bad := func(format string, args ...any) (Meta, error) {
		return Meta{}, failure.Unprocessable("invalid_skill_md", format, args...)
	}
	text := strings.ReplaceAll(string(content), "\r\n", "\n")
	lines := strings.SplitAfter(text, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return bad("SKILL.md has no frontmatter (--- … ---)")
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return bad("SKILL.md has no frontmatter (--- … ---)")
	}
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(strings.Join(lines[1:end], "")), &raw); err != nil {
		return bad("SKILL.md frontmatter is not valid YAML: %v", err)
	}
	if raw == nil {
		return bad("SKILL.md frontmatter must be a mapping")
	}
	str := func(k string) string {
		if v, ok := raw[k]; ok && v != nil {
			if s, ok := v.(string); ok {
				return strings.TrimSpace(s)
			}
			b, _ := json.Marshal(v)
			return strings.TrimSpace(string(b))
		}
		return ""
	}
	m := Meta{Name: str("name"), Slug: str("slug"), Description: str("description")}
	if m.Name == "" {
		return bad("SKILL.md frontmatter has no name")
	}
	if len(m.Name) > 128 {
		return bad("SKILL.md frontmatter.name is longer than 128 characters")
	}
	field := "slug"
	if m.Slug == "" {
		m.Slug, field = m.Name, "name"
	}
	if !ValidSlug(m.Slug) {
		return bad("SKILL.md frontmatter.%s %q must be lower-case letters, digits and single hyphens (at most 128)", field, m.Slug)
	}
	if m.Description == "" {
		return bad("SKILL.md frontmatter has no description")
	}
	m.ToolDependencies = stringList(raw["tool_dependencies"])
	m.MCPDependencies = stringList(raw["mcp_dependencies"])
	m.SkillDependencies = stringList(raw["skill_dependencies"])
	return m, nil
}

// RewriteSlug returns a SKILL.md whose frontmatter names slug (a draft
// installed under another slug than it declares).
func RewriteSlug(content []byte, slug string) []byte {
	text := string(content)
	lines := strings.SplitAfter(text, "\n")
	for i := 1; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t == "---" {
			// no slug line: add one after the opening line
			return []byte(lines[0] + "slug: " + slug + "\n" + strings.Join(lines[1:], ""))
		}
		if strings.HasPrefix(t, "slug:") {
			lines[i] = "slug: " + slug + "\n"
			return []byte(strings.Join(lines, ""))
		}
	}
	return content
}

func stringList(v any) []string {
	items, _ := v.([]any)
	var out []string
	for _, it := range items {
		if s, ok := it.(string); ok {
			out = append(out, s)
		}
	}
	return normalize(out)
}

// normalize trims, drops empty and repeated entries, keeps order; never nil.
func normalize(in []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// File is one file of a skill, its path relative to the skill's directory.
type File struct {
	Path string
	Data []byte
}

// ContentHash is the sha256 over a skill's files (sorted by path).
func ContentHash(files []File) string {
	fs := append([]File(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	h := sha256.New()
	for _, f := range fs {
		h.Write([]byte(f.Path))
		h.Write([]byte{0})
		fh := sha256.Sum256(f.Data)
		h.Write(fh[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// skillMD returns the SKILL.md of files.
func skillMD(files []File) ([]byte, bool) {
	for _, f := range files {
		if f.Path == "SKILL.md" {
			return f.Data, true
		}
	}
	return nil, false
}

// textExtensions are the files the editor reads and writes (the original's list).
var textExtensions = map[string]bool{".md": true, ".txt": true, ".py": true, ".js": true, ".ts": true, ".json": true,
	".yaml": true, ".yml": true, ".toml": true, ".sh": true, ".html": true, ".css": true, ".csv": true, ".xml": true,
	".ini": true, ".cfg": true, ".sql": true, ".go": true, ".java": true, ".rb": true, ".rs": true, ".tsx": true, ".jsx": true,
	".env": true, ".conf": true, ".mjs": true, ".cjs": true}

func isText(p string) bool {
	if strings.HasSuffix(p, "SKILL.md") {
		return true
	}
	i := strings.LastIndex(p, ".")
	return i >= 0 && textExtensions[strings.ToLower(p[i:])] && !bytes.ContainsRune([]byte(p), 0)
}
