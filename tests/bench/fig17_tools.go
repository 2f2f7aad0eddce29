package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
	agentrun "github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 17: what agent-step does per step to assemble the run's tools and
// filter them by skill activation (functions/agent-step/agentstep step.tools:
// the skills' executable tools, the registry's visible tools, the run's
// manifest with its MCP tools, the skill gate's visibility filter and
// prompt section), for a run with 50 MCP tools (5 servers × 10) and 20
// skills (each bringing one MCP server's tools; the skills of 3 servers
// activated by the transcript, so 2 servers' tools stay hidden). Denominator: figure 1's step floor (BEGIN; INSERT;
// COMMIT), timed alternately in this run.
const (
	toolsWarm    = 30
	toolsTimed   = 300
	toolsTarget  = 1.2
	toolsServers = 5
	toolsPerMCP  = 10
	toolsSkills  = 20
)

func figTools(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[17] tool assembly + skill visibility filter per step (50 MCP tools, 20 skills) ÷ step floor",
		"the reads and filtering of agentstep's step.tools for one run (skills snapshot and tool manifest already recorded, "+
			"as from step 2 on): Gate.Executable, Registry.Visible, Toolset.StepSpecs, Gate.Visible; "+
			"floor: figure 1's BEGIN; INSERT INTO bench_floor; COMMIT (pgx, same database), timed alternately")
	// The process's bus does not execute steps: the figure hands the
	// recorded StepReady events to the handler.
	app, rec, db, release, err := e.stepProcess(ctx)
	if err != nil {
		return err
	}
	defer release()
	steps, err := createRuns(ctx, app, rec, 1)
	if err != nil {
		return err
	}
	runID := steps[0].RunID
	ts := mcplayer.Open(app.Core)
	skills := mcplayer.Skills(ctx, app.Core, nil, app.Tools, ts, nil, false)
	gate := skills.Gate()

	// The run's recorded manifest (builtin tools + 50 MCP tools) and skills.
	params := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look up"},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["query"]}`)
	m := mcp.Manifest{Version: 1}
	for _, s := range app.Tools.Visible(nil) {
		m.Tools = append(m.Tools, mcp.ManifestTool{Name: s.Name, Layer: "builtin", ContentHash: "x"})
	}
	var servers []string
	for i := range toolsServers {
		slug := fmt.Sprintf("server%d", i)
		servers = append(servers, slug)
		m.MCPs = append(m.MCPs, mcp.ManifestServer{Slug: slug})
		for j := range toolsPerMCP {
			name := mcp.ToolName(slug, fmt.Sprintf("tool_%d", j))
			sp := tool.Spec{Name: name, DisplayName: name, Category: "mcp", Tags: []string{slug},
				Description: "A tool of an MCP server, described in a sentence or two as servers do.", Parameters: params}
			m.Tools = append(m.Tools, mcp.ManifestTool{Name: name, Layer: "mcp", ContentHash: "x", Server: slug, MCPName: fmt.Sprintf("tool_%d", j), Spec: &sp})
		}
	}
	sn := skill.Snapshot{Version: 1}
	var slugs []string
	var transcript []agentrun.Entry
	for i := range toolsSkills {
		slug := fmt.Sprintf("skill-%02d", i)
		slugs = append(slugs, slug)
		path := skill.SharedRoot + "/" + slug + "/SKILL.md"
		sn.Skills = append(sn.Skills, skill.RunSkill{Slug: slug, Name: slug, Description: "A skill for a particular kind of task.",
			Source: skill.SourceUpload, Path: path, MCPs: []string{servers[i%toolsServers]}, ContentHash: "x"})
		if i%toolsServers < 3 { // servers 0-2 opened by a read SKILL.md, 3-4 stay hidden
			transcript = append(transcript, agentrun.Entry{ToolCalls: []agentrun.ToolCallEntry{{Name: "read_file", Status: "success",
				Input: `{"file_path":"` + path + `"}`}}})
		}
	}
	mj, _ := json.Marshal(m)
	sj, _ := json.Marshal(sn)
	if _, err := app.Pool.Exec(ctx, `INSERT INTO run_tool_manifests (run_id, manifest, fingerprint) VALUES ($1, $2, 'bench')`, runID, mj); err != nil {
		return err
	}
	if _, err := app.Pool.Exec(ctx, `INSERT INTO run_skills (run_id, snapshot) VALUES ($1, $2)`, runID, sj); err != nil {
		return err
	}
	rn := agentrun.Run{ID: runID, UID: "bench"}
	rn.Payload.Context.Skills = slugs
	visible, activated := 0, len(transcript)
	once := func() error {
		tools, more, err := gate.Executable(ctx, rn)
		if err != nil {
			return err
		}
		specs := app.Tools.Visible(tools)
		if specs, err = ts.StepSpecs(ctx, runID, more, specs); err != nil {
			return err
		}
		_, specs, err = gate.Visible(ctx, rn, transcript, "You are a helpful agent.", specs)
		visible = len(specs)
		return err
	}
	floor, err := benchkit.OpenCommitFloor(ctx, db.URL)
	if err != nil {
		return err
	}
	defer floor.Close()
	e.Progress("figure 17: timing %d tool assemblies against %d commits", toolsTimed, toolsTimed)
	var lat, floorLat benchkit.Samples
	for i := range toolsWarm + toolsTimed {
		start := time.Now()
		if err := once(); err != nil {
			return err
		}
		d := time.Since(start)
		fd, err := floor.Once(ctx)
		if err != nil {
			return err
		}
		if i >= toolsWarm {
			lat, floorLat = append(lat, d), append(floorLat, fd)
		}
	}
	p50, f50 := lat.P50(), floorLat.P50()
	ratio := benchkit.DurRatio(p50, f50)
	wantVisible := len(app.Tools.Visible(nil)) + 3*toolsPerMCP
	r.Line("tool_assembly_p50", benchkit.Ms(p50), benchkit.X(ratio)+" vs floor "+benchkit.Ms(f50), fmt.Sprintf("≤ %.1f×", toolsTarget),
		ratio <= toolsTarget && visible == wantVisible)
	r.Detail("p99 %s (floor p99 %s); %d tools offered after the filter (want %d: %d builtin + %d executable MCP tools, of which 2 servers' stay gated); %d skills, %d activated",
		benchkit.Ms(lat.P99()), benchkit.Ms(floorLat.P99()), visible, wantVisible, len(app.Tools.Visible(nil)), toolsServers*toolsPerMCP, toolsSkills, activated)
	return nil
}
