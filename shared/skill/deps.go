package skill

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Dependencies of a skill.
type Dependencies struct {
	Tools  []string `json:"tool_dependencies"`
	MCPs   []string `json:"mcp_dependencies"`
	Skills []string `json:"skill_dependencies"`
}

// FindCycle returns a dependency cycle (slug → … → slug) in graph, or nil.
// graph maps a skill to the skills it depends on.
func FindCycle(graph map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, d := range graph[n] {
			switch color[d] {
			case grey:
				i := slices.Index(stack, d)
				cycle = append(append([]string{}, stack[i:]...), d)
				return true
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	keys := make([]string, 0, len(graph))
	for k := range graph {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if color[k] == white && visit(k) {
			return cycle
		}
	}
	return nil
}

// graph is every indexed skill's skill dependencies.
func (s *Service) graph(ctx context.Context) (map[string][]string, map[string]Skill, error) {
	all, err := s.all(ctx)
	if err != nil {
		return nil, nil, err
	}
	g, by := map[string][]string{}, map[string]Skill{}
	for _, sk := range all {
		g[sk.Slug], by[sk.Slug] = sk.SkillDependencies, sk
	}
	return g, by, nil
}

// checkCycle refuses deps for slug when they close a cycle.
func checkCycle(g map[string][]string, slug string, deps []string) error {
	g[slug] = deps
	if c := FindCycle(g); c != nil {
		return failure.Unprocessable("skill_dependency_cycle", "skill dependencies form a cycle: %s", strings.Join(c, " → "))
	}
	return nil
}

// SetDependencies is PUT /api/system/skills/{slug}/dependencies: tools must
// be registered, MCP servers enabled, skills readable by sub, enabled, shared
// at least as widely as the skill itself, not itself and not closing a cycle.
func (s *Service) SetDependencies(ctx context.Context, sub access.Subject, slug string, d Dependencies) (View, error) {
	sk, err := s.manageable(ctx, sub, slug)
	if err != nil {
		return View{}, err
	}
	if err := editable(sk); err != nil {
		return View{}, err
	}
	d.Tools, d.MCPs, d.Skills = normalize(d.Tools), normalize(d.MCPs), normalize(d.Skills)
	var bad []string
	for _, t := range d.Tools {
		if s.tools == nil || !s.tools.Has(t) {
			bad = append(bad, t)
		}
	}
	if len(bad) > 0 {
		return View{}, failure.Unprocessable("invalid_tool_dependencies", "unknown tools: %s", strings.Join(bad, ", "))
	}
	if len(d.MCPs) > 0 {
		var enabled []string
		if s.mcps != nil {
			if enabled, err = s.mcps(ctx); err != nil {
				return View{}, err
			}
		}
		for _, m := range d.MCPs {
			if !slices.Contains(enabled, m) {
				bad = append(bad, m)
			}
		}
		if len(bad) > 0 {
			return View{}, failure.Unprocessable("invalid_mcp_dependencies", "unknown or disabled MCP servers: %s", strings.Join(bad, ", "))
		}
	}
	if slices.Contains(d.Skills, slug) {
		return View{}, failure.Unprocessable("skill_dependency_cycle", "a skill cannot depend on itself")
	}
	g, by, err := s.graph(ctx)
	if err != nil {
		return View{}, err
	}
	for _, dep := range d.Skills {
		o, ok := by[dep]
		if !ok || !o.Enabled || Level(sub, o) == access.None {
			bad = append(bad, dep)
		}
	}
	if len(bad) > 0 {
		return View{}, failure.Unprocessable("invalid_skill_dependencies", "unknown, disabled or inaccessible skills: %s", strings.Join(bad, ", "))
	}
	if err := checkCycle(g, slug, d.Skills); err != nil {
		return View{}, err
	}
	for _, dep := range d.Skills {
		if !coversScope(by[dep], sk) {
			bad = append(bad, dep)
		}
	}
	if len(bad) > 0 {
		return View{}, failure.Unprocessable("skill_dependency_scope", "skills shared more narrowly than %s: %s", slug, strings.Join(bad, ", "))
	}
	t, _ := json.Marshal(d.Tools)
	m, _ := json.Marshal(d.MCPs)
	k, _ := json.Marshal(d.Skills)
	if _, err := s.pool.Exec(ctx, `UPDATE skills SET tool_dependencies = $2, mcp_dependencies = $3, skill_dependencies = $4,
		updated_by = $5, updated_at = now() WHERE slug = $1`, slug, t, m, k, sub.UID); err != nil {
		return View{}, err
	}
	sk, err = s.get(ctx, s.pool, slug)
	return ViewOf(sub, sk), err
}

// coversScope reports whether everyone who reads parent reads dep (the
// original's can_skill_depend_on): built-in deps always do.
func coversScope(dep, parent Skill) bool {
	if dep.SourceType == SourceBuiltin {
		return true
	}
	scopes := func(sk Skill) []access.Scope {
		c, _ := access.Parse(sk.ShareConfig)
		if c == nil {
			return []access.Scope{{AccessLevel: "user", UserUIDs: []string{sk.CreatedBy}}}
		}
		out := []access.Scope{c.ReadScope}
		if c.ManageScope != nil {
			out = append(out, *c.ManageScope)
		}
		return out
	}
	ds, ps := scopes(dep), scopes(parent)
	for _, p := range ps {
		ok := false
		for _, d := range ds {
			if contains(d, p) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func contains(outer, inner access.Scope) bool {
	if outer.AccessLevel == "global" {
		return true
	}
	if inner.AccessLevel == "global" || outer.AccessLevel != inner.AccessLevel {
		return false
	}
	if inner.AccessLevel == "department" {
		for _, d := range inner.DepartmentIDs {
			if !slices.Contains(outer.DepartmentIDs, d) {
				return false
			}
		}
		return true
	}
	for _, u := range inner.UserUIDs {
		if !slices.Contains(outer.UserUIDs, u) {
			return false
		}
	}
	return true
}
