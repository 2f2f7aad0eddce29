package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// InstallToolName is the tool a main agent installs a personal skill with
// (as the original's install_skill: from a file of the thread's sandbox or
// a remote source; sub-agents do not get it).
const InstallToolName = "install_skill"

// Runs reads a run (*run.Store).
type Runs interface {
	Get(ctx context.Context, id string) (run.Run, error)
}

// InstallTool is install_skill. Its service and runs are found when it is
// called (a process builds its tools before its skills service), so a tool
// offered without them (agent-step only offers it) reports unavailable.
type InstallTool struct {
	Bind func() (*Service, Runs)
}

type installArgs struct {
	Source string   `json:"source"`
	Skills []string `json:"skills"`
}

// Spec implements tool.Tool.
func (InstallTool) Spec() tool.Spec {
	return tool.Spec{Name: InstallToolName, Description: "Install a skill as your user's personal skill (in their workspace, " +
		PersonalRoot + ") and activate it in this conversation. source is either a file of this thread's sandbox " +
		"(a SKILL.md or a .zip holding skills, e.g. /home/gem/user-data/outputs/my-skill.zip) or the URL of a remote skills " +
		"source the platform allows (a repository or archive); skills names which of a source's skills to install " +
		"(optional when it holds exactly one). An existing personal skill of the same slug is not overwritten.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"source":{"type":"string","description":"a sandbox file path (SKILL.md or .zip) or an allowed remote source URL"},` +
			`"skills":{"type":"array","items":{"type":"string"},"description":"slugs of the source's skills to install"}},` +
			`"required":["source"],"additionalProperties":false}`)}
}

// Invoke implements tool.Tool. The user is re-checked here, at the effect:
// the call's run must be a main run of that user, and the user must exist
// and not be deleted. A redelivered call is idempotent: a personal skill
// already there with the same SKILL.md counts as installed.
func (t InstallTool) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var svc *Service
	var runs Runs
	if t.Bind != nil {
		svc, runs = t.Bind()
	}
	if svc == nil || runs == nil || svc.workspace == nil {
		return tool.Errorf("installing skills needs the sandbox provisioner, which is not configured"), nil
	}
	var in installArgs
	dec := json.NewDecoder(strings.NewReader(c.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || strings.TrimSpace(in.Source) == "" {
		return tool.Errorf("invalid arguments: want {\"source\": \"…\", \"skills\": [\"…\"]}"), nil
	}
	r, err := runs.Get(ctx, c.RunID)
	if err != nil {
		return tool.Result{}, fmt.Errorf("load run %s: %w", c.RunID, err)
	}
	if r.UID != c.UID || r.ThreadID != c.ThreadID {
		return tool.Errorf("this run is not yours"), nil
	}
	if r.RunType == run.TypeSubagent {
		return tool.Errorf("a sub-agent cannot install skills"), nil
	}
	sub, err := svc.liveSubject(ctx, c.UID)
	if err != nil {
		if fe, ok := failure.As(err); ok {
			return tool.Errorf(fe.Message), nil
		}
		return tool.Result{}, err
	}
	found, err := svc.installSource(ctx, c, strings.TrimSpace(in.Source))
	if err != nil {
		if fe, ok := failure.As(err); ok {
			return tool.Errorf(fe.Code + ": " + fe.Message), nil
		}
		return tool.Result{}, err
	}
	names := normalize(in.Skills)
	if len(names) == 0 {
		if len(found) != 1 {
			have := make([]string, 0, len(found))
			for n := range found {
				have = append(have, n)
			}
			sort.Strings(have)
			return tool.Errorf(fmt.Sprintf("the source holds %d skills (%s): name the ones to install in skills", len(found), strings.Join(have, ", "))), nil
		}
		for n := range found {
			names = []string{n}
		}
	}
	type outcome struct {
		Slug      string `json:"slug"`
		Installed bool   `json:"installed"`
		Path      string `json:"path,omitempty"`
		Error     string `json:"error,omitempty"`
	}
	var out []outcome
	var installed []RunSkill
	for _, n := range names {
		files, ok := found[n]
		if !ok {
			out = append(out, outcome{Slug: n, Error: "not found in the source"})
			continue
		}
		rs, err := svc.installPersonalFiles(ctx, sub, files)
		if err != nil {
			out = append(out, outcome{Slug: n, Error: errText(err)})
			continue
		}
		installed = append(installed, rs)
		out = append(out, outcome{Slug: rs.Slug, Installed: true, Path: rs.Path})
	}
	if len(installed) > 0 {
		if err := svc.activateInRun(ctx, c.RunID, installed); err != nil {
			return tool.Result{}, err
		}
	}
	b, _ := json.Marshal(map[string]any{"results": out,
		"note": "installed skills are active in this conversation; their SKILL.md is at the path shown"})
	if len(installed) == 0 {
		return tool.Result{Output: "Error: nothing installed: " + string(b), IsError: true}, nil
	}
	return tool.Result{Output: string(b)}, nil
}

// liveSubject is uid as it is now: a user that does not exist or was
// deleted installs nothing.
func (s *Service) liveSubject(ctx context.Context, uid string) (access.Subject, error) {
	sub := access.Subject{UID: uid}
	var deleted bool
	err := s.pool.QueryRow(ctx, `SELECT role, department_id, is_deleted FROM users WHERE uid = $1`, uid).Scan(&sub.Role, &sub.DepartmentID, &deleted)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && deleted) {
		return sub, failure.Forbidden("user_inactive", "the user of this conversation no longer exists")
	}
	return sub, err
}

// installSource reads the skills of source, by slug: a remote source
// through the remote rules (allow-listed hosts, archive limits), anything
// else a file of the call's thread in its sandbox (a SKILL.md or a zip).
func (s *Service) installSource(ctx context.Context, c tool.Call, source string) (map[string][]File, error) {
	if strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://") {
		return s.fetchRemote(ctx, source)
	}
	data, _, truncated, err := s.workspace.ReadFile(ctx, sandbox.ThreadScope(c.UID, c.ThreadID), source, s.cfg.Limits.MaxArchive)
	if sandbox.IsCode(err, "not_found") {
		return nil, failure.NotFound("skill_source_not_found", "no file %s in this thread's sandbox", source)
	}
	if err != nil {
		if fe, ok := failure.As(err); ok {
			return nil, fe
		}
		return nil, failure.Unprocessable("skill_source_unreadable", "read %s: %v", source, err)
	}
	if truncated {
		return nil, failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "%s is over %d bytes", source, s.cfg.Limits.MaxArchive)
	}
	var dirs map[string][]File
	switch name := strings.ToLower(path.Base(source)); {
	case strings.HasSuffix(name, ".zip"):
		files, err := Unzip(data, s.cfg.Limits)
		if err != nil {
			return nil, err
		}
		dirs = skillDirs(files)
	case name == "skill.md":
		dirs = map[string][]File{".": {{Path: "SKILL.md", Data: data}}}
	default:
		return nil, failure.Unprocessable("unsupported_skill_source", "a sandbox source is a SKILL.md or a .zip")
	}
	out := map[string][]File{}
	for _, fs := range dirs {
		md, _ := skillMD(fs)
		m, err := ParseSkillMD(md)
		if err != nil {
			return nil, err
		}
		out[m.Slug] = fs
	}
	return out, nil
}

// installPersonalFiles writes one skill's files into sub's workspace under
// the slug its SKILL.md declares (SKILL.md first and exclusive: it claims
// the slug). The same SKILL.md already there is success (a redelivered
// call); another one is personal_skill_exists.
func (s *Service) installPersonalFiles(ctx context.Context, sub access.Subject, files []File) (RunSkill, error) {
	m, err := s.parseFiles(files)
	if err != nil {
		return RunSkill{}, err
	}
	md, _ := skillMD(files) // there: parseFiles read it
	dir, sc := fmt.Sprintf(personalRel, m.Slug), personalScope(sub.UID)
	files = slices.Clone(files)
	sort.Slice(files, func(i, j int) bool {
		return files[i].Path == "SKILL.md" || (files[j].Path != "SKILL.md" && files[i].Path < files[j].Path)
	})
	for i, f := range files {
		if _, err := s.workspace.WriteFile(ctx, sc, dir+f.Path, f.Data, i == 0); err != nil {
			if !sandbox.IsCode(err, "exists") {
				return RunSkill{}, err
			}
			have, _, _, rerr := s.workspace.ReadFile(ctx, sc, dir+"SKILL.md", s.cfg.Limits.MaxFile)
			if rerr != nil || !bytes.Equal(have, md) {
				return RunSkill{}, failure.Conflict("personal_skill_exists", "you already have a personal skill %q", m.Slug)
			}
			// The same skill: a redelivered call goes on writing its files.
		}
	}
	return RunSkill{Slug: m.Slug, Name: m.Name, Description: m.Description, Source: SourcePersonal, Path: dir + "SKILL.md",
		Tools: []string{}, MCPs: []string{}, ContentHash: ContentHash(files), Preload: true}, nil
}

// activateInRun adds installed skills to run runID's skills, preloaded (so
// active from its next model turn: their SKILL.md goes into the system
// prompt), replacing any of the same slug. Serialised on the snapshot row.
func (s *Service) activateInRun(ctx context.Context, runID string, installed []RunSkill) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO run_skills (run_id, snapshot) VALUES ($1, '{"snapshot_version":1,"skills":[]}')
		ON CONFLICT (run_id) DO NOTHING`, runID); err != nil {
		return fmt.Errorf("skills of run %s: %w", runID, err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var raw []byte
	if err := tx.QueryRow(ctx, `SELECT snapshot FROM run_skills WHERE run_id = $1 FOR UPDATE`, runID).Scan(&raw); err != nil {
		return fmt.Errorf("skills of run %s: %w", runID, err)
	}
	var sn Snapshot
	if err := json.Unmarshal(raw, &sn); err != nil {
		return fmt.Errorf("skills of run %s: %w", runID, err)
	}
	for _, rs := range installed {
		sn.Skills = slices.DeleteFunc(sn.Skills, func(x RunSkill) bool { return x.Slug == rs.Slug })
		sn.Skills = append(sn.Skills, rs)
	}
	b, _ := json.Marshal(sn)
	if _, err := tx.Exec(ctx, `UPDATE run_skills SET snapshot = $2 WHERE run_id = $1`, runID, b); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
