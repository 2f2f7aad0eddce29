package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Toolset is the MCP layer at run time: it fixes a run's tools at its first
// step and runs MCP tool calls for tool-invoke.
type Toolset struct {
	db    postgres.DB
	store *Store
	pool  *Pool
	log   *slog.Logger
	// manifests caches manifests read back (write-once, so never stale).
	manifests manifestCache
}

// NewToolset returns the run-time MCP layer.
func NewToolset(db postgres.DB, store *Store, pool *Pool, log *slog.Logger) *Toolset {
	if log == nil {
		log = slog.Default()
	}
	return &Toolset{db: db, store: store, pool: pool, log: log}
}

// Store returns the server store.
func (ts *Toolset) Store() *Store { return ts.store }

// Pool returns the connection pool.
func (ts *Toolset) Pool() *Pool { return ts.pool }

// Manifest is a run's write-once record of its executable tools.
type Manifest struct {
	Version int              `json:"manifest_version"`
	Tools   []ManifestTool   `json:"tools"`
	MCPs    []ManifestServer `json:"mcps"`
}

// ManifestTool is one executable tool with the sha256 of its definition.
type ManifestTool struct {
	Name        string `json:"name"`
	Layer       string `json:"layer"` // builtin | knowledge | mcp
	ContentHash string `json:"content_hash"`
	// MCP tools keep their definition, so every step offers the same tool.
	Server  string     `json:"server,omitempty"`
	MCPName string     `json:"mcp_name,omitempty"`
	Spec    *tool.Spec `json:"spec,omitempty"`
}

// ManifestServer is an MCP server the run's agent selected.
type ManifestServer struct {
	Slug       string `json:"slug"`
	ConfigHash string `json:"config_hash,omitempty"`
	Tools      int    `json:"tools"`
	Error      string `json:"error,omitempty"`
}

// Prefix starts every model-facing MCP tool name.
const Prefix = "mcp__"

var nameJunk = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// ToolName is the model-facing name of an MCP server's tool.
func ToolName(slug, name string) string {
	n := Prefix + slug + "__" + nameJunk.ReplaceAllString(name, "_")
	if len(n) > 64 {
		sum := sha256.Sum256([]byte(n))
		n = n[:55] + "_" + hex.EncodeToString(sum[:4])
	}
	return n
}

func hashJSON(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ServerTools returns a server's tools: the cache when it belongs to the
// server's current config hash, otherwise fetched and cached. refresh skips
// the cache.
func (ts *Toolset) ServerTools(ctx context.Context, s Server, refresh bool) ([]ToolDef, error) {
	if refresh {
		if err := ts.store.clearTools(ctx, s.Slug); err != nil {
			return nil, err
		}
	} else if defs, ok, err := ts.store.cachedTools(ctx, s.Slug, s.ConfigHash); err != nil || ok {
		return defs, err
	}
	defs, err := ts.pool.ListTools(ctx, s)
	if err != nil {
		return nil, err
	}
	if err := ts.store.saveTools(ctx, s.Slug, s.ConfigHash, defs); err != nil {
		return nil, err
	}
	return defs, nil
}

// Manifest returns a run's manifest, recording it first when the run has
// none: builtin are the registry tools the agent's context allows (already
// filtered), mcps the context's MCP server slugs. Servers that are disabled,
// missing or unreachable contribute no tools (and say why in the manifest);
// the run goes on without them. Concurrent first calls agree: the first
// insert wins and every caller reads it back.
func (ts *Toolset) Manifest(ctx context.Context, runID string, mcps []string, builtin []tool.Spec) (Manifest, error) {
	if m, ok, err := ts.read(ctx, runID); err != nil || ok {
		return m, err
	}
	m := Manifest{Version: 1, Tools: []ManifestTool{}, MCPs: []ManifestServer{}}
	for _, s := range builtin {
		layer := "builtin"
		if s.Category == "knowledge" {
			layer = "knowledge"
		}
		m.Tools = append(m.Tools, ManifestTool{Name: s.Name, Layer: layer, ContentHash: hashJSON(s)})
	}
	seen := map[string]bool{}
	for _, slug := range mcps {
		if seen[slug] {
			continue
		}
		seen[slug] = true
		ms := ManifestServer{Slug: slug}
		s, err := ts.store.Get(ctx, slug)
		switch {
		case errors.Is(err, ErrNotFound):
			ms.Error = "not configured"
		case err != nil:
			return Manifest{}, err
		case !s.Enabled:
			ms.ConfigHash, ms.Error = s.ConfigHash, "disabled"
		default:
			ms.ConfigHash = s.ConfigHash
			defs, err := ts.ServerTools(ctx, s, false)
			if err != nil {
				ts.log.Warn("MCP server unavailable at run start", "run", runID, "server", slug, "error", err)
				ms.Error = err.Error()
				break
			}
			for _, d := range defs {
				if slices.Contains(s.DisabledTools, d.Name) {
					continue
				}
				display := d.Title
				if display == "" {
					display = d.Name
				}
				spec := tool.Spec{Name: ToolName(slug, d.Name), DisplayName: display, Category: "mcp", Tags: []string{slug},
					Description: d.Description, Parameters: d.InputSchema}
				m.Tools = append(m.Tools, ManifestTool{Name: spec.Name, Layer: "mcp", ContentHash: hashJSON(d), Server: slug, MCPName: d.Name, Spec: &spec})
				ms.Tools++
			}
		}
		m.MCPs = append(m.MCPs, ms)
	}
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	if _, err := ts.db.Exec(ctx, `INSERT INTO run_tool_manifests (run_id, manifest, fingerprint) VALUES ($1, $2, $3)
		ON CONFLICT (run_id) DO NOTHING`, runID, b, hex.EncodeToString(sum[:])); err != nil {
		return Manifest{}, fmt.Errorf("record tool manifest: %w", err)
	}
	m, _, err := ts.read(ctx, runID)
	return m, err
}

func (ts *Toolset) read(ctx context.Context, runID string) (Manifest, bool, error) {
	if m, ok := ts.manifests.get(runID); ok {
		return m, true, nil
	}
	var raw []byte
	err := ts.db.QueryRow(ctx, `SELECT manifest FROM run_tool_manifests WHERE run_id = $1`, runID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return Manifest{}, false, nil
	}
	if err != nil {
		return Manifest{}, false, err
	}
	return ts.decode(runID, raw)
}

func (ts *Toolset) decode(runID string, raw []byte) (Manifest, bool, error) {
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Manifest{}, false, fmt.Errorf("tool manifest of run %s: %w", runID, err)
	}
	ts.manifests.put(runID, m)
	return m, true, nil
}

// manifestCache holds up to manifestCacheSize manifests, dropping the
// oldest first. Safe for concurrent use.
type manifestCache struct {
	mu    sync.Mutex
	byRun map[string]Manifest
	order []string
}

const manifestCacheSize = 2048

func (c *manifestCache) get(runID string) (Manifest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.byRun[runID]
	return m, ok
}

func (c *manifestCache) put(runID string, m Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byRun == nil {
		c.byRun = map[string]Manifest{}
	}
	if _, ok := c.byRun[runID]; ok {
		return
	}
	if len(c.order) >= manifestCacheSize {
		delete(c.byRun, c.order[0])
		c.order = c.order[1:]
	}
	c.byRun[runID] = m
	c.order = append(c.order, runID)
}

// mcpEntry is the MCP tool name of manifest m.
func (m Manifest) mcpEntry(name string) (ManifestTool, bool) {
	for _, t := range m.Tools {
		if t.Name == name && t.Layer == "mcp" && t.Spec != nil {
			return t, true
		}
	}
	return ManifestTool{}, false
}

// resolveSQL reads, in one statement, a run's manifest and the current
// configuration of the server of one of its MCP tools ($2). No row: the
// run has no manifest, the tool is not in it, or its server is gone.
const resolveSQL = `SELECT m.manifest, ` + cols + ` FROM run_tool_manifests m
	JOIN mcp_servers ON mcp_servers.slug = (SELECT t->>'server' FROM jsonb_array_elements(m.manifest->'tools') t
		WHERE t->>'name' = $2 AND t->>'layer' = 'mcp' LIMIT 1)
	WHERE m.run_id = $1`

// StepSpecs returns the tools a step offers the model: the run's manifest
// (recorded at its first step), builtin tools in their current definition,
// MCP tools as recorded.
func (ts *Toolset) StepSpecs(ctx context.Context, runID string, mcps []string, builtin []tool.Spec) ([]tool.Spec, error) {
	m, err := ts.Manifest(ctx, runID, mcps, builtin)
	if err != nil {
		return nil, err
	}
	byName := map[string]tool.Spec{}
	for _, s := range builtin {
		byName[s.Name] = s
	}
	var out []tool.Spec
	for _, t := range m.Tools {
		switch {
		case t.Spec != nil:
			out = append(out, *t.Spec)
		default:
			if s, ok := byName[t.Name]; ok {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// Resolve returns the MCP tool name of a run may call (false when the name
// is not an MCP tool of the run's manifest), with its server's configuration
// read now — the check where the effect happens (Invoke) uses it. One round
// trip: the server's row when the run's manifest is cached (it is
// write-once), else the manifest and the row in one statement.
func (ts *Toolset) Resolve(ctx context.Context, runID, name string) (tool.Tool, bool, error) {
	if !strings.HasPrefix(name, Prefix) {
		return nil, false, nil
	}
	if m, ok := ts.manifests.get(runID); ok {
		e, ok := m.mcpEntry(name)
		if !ok {
			return nil, false, nil
		}
		s, err := ts.store.Get(ctx, e.Server)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
		return mcpTool{ts: ts, entry: e, server: s, serverErr: err}, true, nil
	}
	var raw []byte
	s, err := ts.store.scanAfter(ts.db.QueryRow(ctx, resolveSQL, runID, name), &raw)
	switch {
	case err == nil:
		m, _, err := ts.decode(runID, raw)
		if err != nil {
			return nil, false, err
		}
		e, ok := m.mcpEntry(name)
		return mcpTool{ts: ts, entry: e, server: s}, ok, nil
	case !errors.Is(err, ErrNotFound):
		return nil, false, err
	}
	// No manifest, no such tool, or its server was deleted.
	m, ok, err := ts.read(ctx, runID)
	if err != nil || !ok {
		return nil, false, err
	}
	e, ok := m.mcpEntry(name)
	if !ok {
		return nil, false, nil
	}
	return mcpTool{ts: ts, entry: e, serverErr: ErrNotFound}, true, nil
}

// lookupSQL is Resolve's read as a LATERAL subquery over a tool call's row t
// (run.Joined): the call's entry in its run's manifest when its name is an
// MCP tool's (NULL when it is not, when the run has no manifest or the tool
// is not in it), and the current row of that entry's server (found: it still
// exists). Exactly one row. OFFSET 0 keeps e from being inlined: entry is
// used twice, and inlined it would unpack the manifest twice.
const lookupSQL = `SELECT e.entry, s.slug IS NOT NULL AS found, ` + optionalCols + `
	FROM (SELECT CASE WHEN starts_with(t.tool_name, '` + Prefix + `') THEN (
		SELECT te FROM run_tool_manifests m CROSS JOIN LATERAL jsonb_array_elements(m.manifest->'tools') te
		WHERE m.run_id = t.run_id AND te->>'name' = t.tool_name AND te->>'layer' = 'mcp' LIMIT 1) END AS entry
		OFFSET 0) e
	LEFT JOIN mcp_servers s ON s.slug = e.entry->>'server'`

// Lookup is Resolve made part of the statement that loads a tool call
// (run.Store.GetToolCallAndRunWith: one round trip for both, instead of one
// more for Resolve). sql and dest go into that statement (run.Joined); once
// it has been read, resolve answers as Resolve would for the call's tool
// name, with the server's row as that statement read it — in this
// invocation, before the call, so Invoke's check where the effect happens
// is unchanged. Only the tool's own manifest entry is read and decoded, not
// the whole manifest. A Lookup serves one statement.
func (ts *Toolset) Lookup() (sql string, dest []any, resolve func(name string) (tool.Tool, bool, error)) {
	var (
		entry  []byte
		found  bool
		s      Server
		sealed string
	)
	dest = append([]any{&entry, &found}, serverDest(&s, &sealed)...)
	return lookupSQL, dest, func(name string) (tool.Tool, bool, error) {
		if !strings.HasPrefix(name, Prefix) || entry == nil {
			return nil, false, nil // not an MCP tool of the run's manifest
		}
		var e ManifestTool
		if err := json.Unmarshal(entry, &e); err != nil {
			return nil, false, fmt.Errorf("tool manifest entry %s: %w", name, err)
		}
		if e.Name != name || e.Layer != "mcp" || e.Spec == nil { // as mcpEntry
			return nil, false, nil
		}
		if !found {
			return mcpTool{ts: ts, entry: e, serverErr: ErrNotFound}, true, nil
		}
		if err := ts.store.openHeaders(&s, sealed); err != nil {
			return nil, false, err
		}
		return mcpTool{ts: ts, entry: e, server: s}, true, nil
	}
}

// mcpTool runs one MCP tool of a run's manifest.
type mcpTool struct {
	ts    *Toolset
	entry ManifestTool
	// server is the server's configuration read by Resolve (serverErr:
	// ErrNotFound when it is no longer configured).
	server    Server
	serverErr error
}

func (t mcpTool) Spec() tool.Spec { return *t.entry.Spec }

// Invoke re-checks the server where the effect happens (still configured,
// enabled, the tool not disabled: its row as Resolve read it in this
// invocation, just before), then calls it. Every failure of the
// server — unreachable, dying mid-call, timing out — is a tool error the
// model reads; the run goes on.
func (t mcpTool) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	e := t.entry
	args := map[string]any{}
	if strings.TrimSpace(c.Arguments) != "" {
		if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
			return tool.Errorf("invalid arguments: " + err.Error()), nil
		}
	}
	s, err := t.server, t.serverErr
	if errors.Is(err, ErrNotFound) {
		return tool.Errorf(fmt.Sprintf("MCP server %q is no longer configured", e.Server)), nil
	}
	if err != nil {
		return tool.Result{}, err
	}
	if !s.Enabled {
		return tool.Errorf(fmt.Sprintf("MCP server %q is disabled", e.Server)), nil
	}
	if slices.Contains(s.DisabledTools, e.MCPName) {
		return tool.Errorf(fmt.Sprintf("tool %q of MCP server %q is disabled", e.MCPName, e.Server)), nil
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, connectTimeout(s))
		defer cancel()
	}
	res, err := t.ts.pool.CallTool(ctx, s, e.MCPName, args)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return tool.Errorf(fmt.Sprintf("MCP server %q: tool %q timed out", e.Server, e.MCPName)), nil
		}
		return tool.Errorf(fmt.Sprintf("MCP server %q failed during tool %q: %v", e.Server, e.MCPName, err)), nil
	}
	if res.IsError {
		return tool.Result{Output: "Error: " + res.Text, IsError: true}, nil
	}
	return tool.Result{Output: res.Text}, nil
}

// Open builds the MCP layer: the server store (headers sealed with sealer,
// URLs checked against guard), the connection pool dialling through guard,
// and the run-time toolset.
func Open(db postgres.DB, sealer Sealer, guard Guard, log *slog.Logger) *Toolset {
	return NewToolset(db, NewStore(db, sealer, guard), NewPool(guard), log)
}

// Guard is the outbound policy (*netguard.Guard).
type Guard interface {
	URLChecker
	HTTPClients
}
