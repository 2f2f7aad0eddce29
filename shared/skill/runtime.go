package skill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// RunSkill is one skill of a run.
type RunSkill struct {
	Slug        string   `json:"slug"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Source      string   `json:"source"` // builtin | upload | remote | personal
	Path        string   `json:"path"`   // its SKILL.md inside the sandbox
	Tools       []string `json:"tool_dependencies"`
	MCPs        []string `json:"mcp_dependencies"`
	ContentHash string   `json:"content_hash"`
	Preload     bool     `json:"preload,omitempty"`
}

// Snapshot is a run's skills, fixed at its first step.
type Snapshot struct {
	Version int        `json:"snapshot_version"`
	Skills  []RunSkill `json:"skills"`
}

// Fingerprint identifies the snapshot's shared skills' content.
func (sn Snapshot) Fingerprint() string {
	h := sha256.New()
	for _, s := range sn.Skills {
		if s.Source != SourcePersonal {
			fmt.Fprintf(h, "%s\x00%s\x00", s.Slug, s.ContentHash)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// subject reads a user's role and department (to resolve skill access at run time).
func (s *Service) subject(ctx context.Context, uid string) (access.Subject, error) {
	sub := access.Subject{UID: uid}
	err := s.pool.QueryRow(ctx, `SELECT role, department_id FROM users WHERE uid = $1`, uid).Scan(&sub.Role, &sub.DepartmentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return access.Subject{UID: uid, Role: "user"}, nil
	}
	return sub, err
}

// RunSnapshot returns a run's skills, recording them first when the run has
// none: the configured skills and their skill_dependencies closure, each
// enabled and readable by the run's user (a personal skill replaces a shared
// one of the same slug and brings no dependencies). No configured skills:
// an empty snapshot, nothing gated. Concurrent first calls agree (the first
// insert wins).
func (s *Service) RunSnapshot(ctx context.Context, runID, uid string, configured, preload []string) (Snapshot, error) {
	if sn, ok, err := s.readSnapshot(ctx, runID); err != nil || ok {
		return sn, err
	}
	sn := Snapshot{Version: 1, Skills: []RunSkill{}}
	if len(configured) > 0 {
		sub, err := s.subject(ctx, uid)
		if err != nil {
			return Snapshot{}, err
		}
		shared, err := s.Shared(ctx, sub)
		if err != nil {
			return Snapshot{}, err
		}
		personal, err := s.Personal(ctx, uid)
		if err != nil {
			s.log.Warn("personal skills unavailable at run start", "run", runID, "error", err)
			personal = nil
		}
		by := map[string]Skill{}
		for _, sk := range shared {
			by[sk.Slug] = sk
		}
		for _, sk := range personal {
			by[sk.Slug] = sk
		}
		seen := map[string]bool{}
		queue := append([]string(nil), configured...)
		for len(queue) > 0 {
			slug := queue[0]
			queue = queue[1:]
			sk, ok := by[slug]
			if seen[slug] || !ok {
				continue
			}
			seen[slug] = true
			rs := RunSkill{Slug: sk.Slug, Name: sk.Name, Description: sk.Description, Source: sk.SourceType,
				Tools: sk.ToolDependencies, MCPs: sk.MCPDependencies, ContentHash: sk.ContentHash, Preload: slices.Contains(preload, slug),
				Path: SharedRoot + "/" + sk.Slug + "/SKILL.md"}
			if sk.SourceType == SourcePersonal {
				rs.Path = PersonalRoot + "/" + sk.Slug + "/SKILL.md"
			}
			sn.Skills = append(sn.Skills, rs)
			queue = append(queue, sk.SkillDependencies...)
		}
	}
	b, _ := json.Marshal(sn)
	if _, err := s.pool.Exec(ctx, `INSERT INTO run_skills (run_id, snapshot) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING`, runID, b); err != nil {
		return Snapshot{}, fmt.Errorf("record skills of run %s: %w", runID, err)
	}
	sn, _, err := s.readSnapshot(ctx, runID)
	return sn, err
}

func (s *Service) readSnapshot(ctx context.Context, runID string) (Snapshot, bool, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT snapshot FROM run_skills WHERE run_id = $1`, runID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, err
	}
	var sn Snapshot
	if err := json.Unmarshal(raw, &sn); err != nil {
		return Snapshot{}, false, fmt.Errorf("skills of run %s: %w", runID, err)
	}
	return sn, true, nil
}

// Activated returns the skills of sn the transcript activated: preloaded
// ones, and those whose SKILL.md the agent read successfully with read_file.
// It is derived from the committed transcript, so it survives any crash.
func Activated(sn Snapshot, transcript []run.Entry) map[string]bool {
	out := map[string]bool{}
	byPath := map[string]string{}
	for _, s := range sn.Skills {
		if s.Preload {
			out[s.Slug] = true
		}
		byPath[s.Path] = s.Slug
	}
	for _, e := range transcript {
		for _, tc := range e.ToolCalls {
			if tc.Name != "read_file" || tc.Status != "success" {
				continue
			}
			var a struct {
				FilePath string `json:"file_path"`
			}
			if json.Unmarshal([]byte(tc.Input), &a) != nil || a.FilePath == "" {
				continue
			}
			p := a.FilePath
			if !strings.HasPrefix(p, "/") {
				p = sandbox.UserDataDir + "/" + p
			}
			if slug, ok := byPath[path.Clean(p)]; ok {
				out[slug] = true
			}
		}
	}
	return out
}

// Gate is the run-time side of skills for agent-step.
type Gate struct {
	s *Service
	// preloaded caches the SKILL.md of preloaded shared skills by slug and
	// content hash (a new version of a skill is a new hash).
	preloaded sync.Map
}

// Gate returns the run-time gate.
func (s *Service) Gate() *Gate { return &Gate{s: s} }

// Executable returns what a run's skills need to be executable (fixing the
// run's skills at its first call): their tool and MCP dependencies, added to
// the run's manifest beside the agent's own.
func (g *Gate) Executable(ctx context.Context, r run.Run) (tools, mcps []string, err error) {
	sn, err := g.s.RunSnapshot(ctx, r.ID, r.UID, r.Payload.Context.Skills, r.Payload.Context.PreloadSkills)
	if err != nil {
		return nil, nil, err
	}
	for _, sk := range sn.Skills {
		tools = append(tools, sk.Tools...)
		mcps = append(mcps, sk.MCPs...)
	}
	return normalize(tools), normalize(mcps), nil
}

// Visible lists the run's skills in the system prompt and hides the tools
// that only skills bring (dependencies not among the agent's own tools and
// MCP servers) until one of their skills is activated.
func (g *Gate) Visible(ctx context.Context, r run.Run, transcript []run.Entry, system string, specs []tool.Spec) (string, []tool.Spec, error) {
	sn, _, err := g.s.readSnapshot(ctx, r.ID)
	if err != nil || len(sn.Skills) == 0 {
		return system, specs, err
	}
	system, specs, err = Apply(sn, Activated(sn, transcript), r.Payload.Context.Tools, r.Payload.Context.MCPs, system, specs)
	if err != nil {
		return "", nil, err
	}
	pre, err := g.preloadPrompt(ctx, r.UID, sn)
	return system + pre, specs, err
}

// MaxPreloadBytes bounds the SKILL.md of one preloaded skill in the system
// prompt (cut on a character boundary and marked).
const MaxPreloadBytes = 64 << 10

// preloadPrompt is the SKILL.md of each preloaded skill, as the original's
// skills middleware injects it: a preloaded skill is active from the start,
// so the model gets its instructions without reading the file. A skill
// whose SKILL.md is gone (or a personal one without a workspace) is left
// out; other read failures are returned (the step is retried).
func (g *Gate) preloadPrompt(ctx context.Context, uid string, sn Snapshot) (string, error) {
	var b strings.Builder
	for _, sk := range sn.Skills {
		if !sk.Preload {
			continue
		}
		md, ok, err := g.skillMD(ctx, uid, sk)
		if err != nil {
			return "", fmt.Errorf("SKILL.md of preloaded skill %s: %w", sk.Slug, err)
		}
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n\n## Skill %s (preloaded; %s)\n\n%s", sk.Slug, sk.Path, cutText(md, MaxPreloadBytes))
	}
	return b.String(), nil
}

func (g *Gate) skillMD(ctx context.Context, uid string, sk RunSkill) (string, bool, error) {
	if sk.Source == SourcePersonal {
		if g.s.workspace == nil {
			return "", false, nil
		}
		b, _, _, err := g.s.workspace.ReadFile(ctx, personalScope(uid), sk.Path, MaxPreloadBytes+4)
		if sandbox.IsCode(err, "not_found") {
			return "", false, nil
		}
		return string(b), err == nil, err
	}
	key := sk.Slug + "\x00" + sk.ContentHash
	if v, ok := g.preloaded.Load(key); ok {
		return v.(string), true, nil
	}
	rc, _, err := g.s.blob.Get(ctx, skillPrefix(sk.Slug)+"SKILL.md")
	if errors.Is(err, blob.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxPreloadBytes+4))
	if err != nil {
		return "", false, err
	}
	g.preloaded.Store(key, string(data))
	return string(data), true, nil
}

// cutText cuts s at n bytes on a character boundary and marks the cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "\n…[truncated]"
}

// Apply is the visibility filter: pure, so it is benchmarked and tested on
// its own. own and ownMCPs are the agent's configured tools and MCP servers.
func Apply(sn Snapshot, active map[string]bool, own, ownMCPs []string, system string, specs []tool.Spec) (string, []tool.Spec, error) {
	gated, gatedMCP := map[string]bool{}, map[string]bool{}
	open, openMCP := map[string]bool{}, map[string]bool{}
	for _, sk := range sn.Skills {
		for _, t := range sk.Tools {
			if !slices.Contains(own, t) {
				gated[t] = true
			}
			if active[sk.Slug] {
				open[t] = true
			}
		}
		for _, m := range sk.MCPs {
			if !slices.Contains(ownMCPs, m) {
				gatedMCP[m] = true
			}
			if active[sk.Slug] {
				openMCP[m] = true
			}
		}
	}
	out := make([]tool.Spec, 0, len(specs))
	for _, sp := range specs {
		if sp.Base {
			out = append(out, sp)
			continue
		}
		if gated[sp.Name] && !open[sp.Name] {
			continue
		}
		if server, ok := mcpServer(sp.Name); ok && gatedMCP[server] && !openMCP[server] {
			continue
		}
		out = append(out, sp)
	}
	return system + Prompt(sn, active), out, nil
}

// mcpServer is the server slug of an MCP tool name ("mcp__<slug>__<tool>").
func mcpServer(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return "", false
	}
	i := strings.Index(rest, "__")
	if i < 0 {
		return "", false
	}
	return rest[:i], true
}

// Prompt is the skills section of the system prompt.
func Prompt(sn Snapshot, active map[string]bool) string {
	if len(sn.Skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n## Skills\n\nSkills are instructions (and files) for particular tasks. Before you use a skill, read its SKILL.md with read_file at the path given; the tools it needs become available once you have read it. Shared skills are read-only under " + SharedRoot + ".\n\n")
	for _, sk := range sn.Skills {
		state := ""
		if active[sk.Slug] {
			state = " (active)"
		}
		fmt.Fprintf(&b, "- %s%s: %s — %s\n", sk.Slug, state, oneLine(sk.Description), sk.Path)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Syncer writes a thread's skills directory on the provisioner
// (*sandbox.Client).
type Syncer interface {
	SyncSkills(ctx context.Context, s sandbox.Scope, skills []sandbox.SkillDir) error
}

// Materializer puts a run's shared and built-in skills into its sandbox's
// read-only skills directory (/home/gem/skills) before its sandbox tools
// run. Personal skills are in the workspace already.
type Materializer struct {
	s    *Service
	sync Syncer
	done sync.Map // thread + fingerprint -> struct{}: already written by this process
}

// Materializer returns the materializer writing through sync.
func (s *Service) Materializer(sync Syncer) *Materializer { return &Materializer{s: s, sync: sync} }

// Prepare materialises the skills of c's run (idempotent; the provisioner
// skips skills whose content hash it already has).
func (m *Materializer) Prepare(ctx context.Context, c tool.Call) error {
	sn, ok, err := m.s.readSnapshot(ctx, c.RunID)
	if err != nil || !ok {
		return err
	}
	key := c.UID + "\x00" + c.ThreadID + "\x00" + sn.Fingerprint()
	if _, ok := m.done.Load(key); ok {
		return nil
	}
	var dirs []sandbox.SkillDir
	for _, sk := range sn.Skills {
		if sk.Source == SourcePersonal {
			continue
		}
		fs, err := m.s.Files(ctx, sk.Slug)
		if err != nil {
			return err
		}
		d := sandbox.SkillDir{Slug: sk.Slug, Hash: ContentHash(fs)}
		for _, f := range fs {
			d.Files = append(d.Files, sandbox.SkillFile{Path: f.Path, Data: f.Data})
		}
		dirs = append(dirs, d)
	}
	if err := m.sync.SyncSkills(ctx, sandbox.ThreadScope(c.UID, c.ThreadID), dirs); err != nil {
		return err
	}
	m.done.Store(key, struct{}{})
	return nil
}

// Needs reports whether the skills of run runID depend on tool name.
func (g *Gate) Needs(ctx context.Context, runID, name string) (bool, error) {
	sn, _, err := g.s.readSnapshot(ctx, runID)
	if err != nil {
		return false, err
	}
	for _, sk := range sn.Skills {
		if slices.Contains(sk.Tools, name) {
			return true, nil
		}
	}
	return false, nil
}
