// Package mcp is the MCP layer of the tool system: the administrator's MCP
// servers (table mcp_servers, owned here), their tool lists cached by config
// hash, the connections to them through the official Go SDK over the
// SSRF-guarded client (shared/netguard), and a run's tool manifest (table
// run_tool_manifests, owned here): the executable tools of a run, fixed at
// its first step from the agent's context.mcps, with content hashes.
//
// Transports: streamable_http and sse from the API; stdio is refused from
// input (only code-defined built-ins could use it, and none ship). Headers
// are sealed with shared/secret (YUXI_ENCRYPTION_KEY) and never returned.
//
// Model-facing MCP tool names are "mcp__<server slug>__<tool name>" so that
// they never collide with builtin or knowledge tools.
//
// Imported by: shared/bootstrap/mcplayer (which opens it for agent-step,
// tool-invoke and intake), functions/intake/intake, tests. May import: shared/postgres,
// shared/failure, shared/tool, pgx and the MCP Go SDK.
package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Transports accepted from the API.
const (
	TransportStreamableHTTP = "streamable_http"
	TransportSSE            = "sse"
)

// Sealer encrypts secrets at rest; *secret.Keyring satisfies it (a nil
// keyring refuses with 503 encryption_key_missing).
type Sealer interface {
	Seal(plaintext, associatedData string) (string, error)
	Open(sealed, associatedData string) (string, error)
	Reseal(sealed, associatedData string) (string, bool, error)
}

// Server is one MCP server's configuration.
type Server struct {
	Slug           string
	Name           string
	Description    string
	Transport      string
	URL            string
	Headers        map[string]string // plaintext; never leaves the process
	HeaderNames    []string
	Timeout        int // seconds, 0: default
	SSEReadTimeout int // seconds, 0: default
	Tags           []string
	Icon           string
	Enabled        bool
	DisabledTools  []string
	ConfigHash     string
	CreatedBy      string
	UpdatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// View is the admin's view of a server (the original's to_dict, minus
// secrets: header values are never returned, only their names).
type View struct {
	Slug           string    `json:"slug"`
	Name           string    `json:"name"`
	Description    string    `json:"description"`
	Transport      string    `json:"transport"`
	URL            string    `json:"url"`
	HeaderNames    []string  `json:"header_names"`
	HasHeaders     bool      `json:"has_headers"`
	Timeout        *int      `json:"timeout"`
	SSEReadTimeout *int      `json:"sse_read_timeout"`
	Tags           []string  `json:"tags"`
	Icon           string    `json:"icon"`
	Enabled        bool      `json:"enabled"`
	DisabledTools  []string  `json:"disabled_tools"`
	ConfigHash     string    `json:"config_hash"`
	CreatedBy      string    `json:"created_by"`
	UpdatedBy      string    `json:"updated_by"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// PublicView is what a plain user sees (the original's redacted list).
type PublicView struct {
	Name        string   `json:"name"`
	Slug        string   `json:"slug"`
	Description string   `json:"description"`
	Icon        string   `json:"icon"`
	Enabled     bool     `json:"enabled"`
	Tags        []string `json:"tags"`
}

func nz[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func optInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// View returns the admin view.
func (s Server) View() View {
	return View{Slug: s.Slug, Name: s.Name, Description: s.Description, Transport: s.Transport, URL: s.URL,
		HeaderNames: nz(s.HeaderNames), HasHeaders: len(s.HeaderNames) > 0, Timeout: optInt(s.Timeout), SSEReadTimeout: optInt(s.SSEReadTimeout),
		Tags: nz(s.Tags), Icon: s.Icon, Enabled: s.Enabled, DisabledTools: nz(s.DisabledTools), ConfigHash: s.ConfigHash,
		CreatedBy: s.CreatedBy, UpdatedBy: s.UpdatedBy, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// PublicView returns the redacted view.
func (s Server) PublicView() PublicView {
	return PublicView{Name: s.Name, Slug: s.Slug, Description: s.Description, Icon: s.Icon, Enabled: s.Enabled, Tags: nz(s.Tags)}
}

// configHash covers what decides the tool list and the connection.
func configHash(s Server) string {
	names := make([]string, 0, len(s.Headers))
	for k := range s.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n%d\n", s.Transport, s.URL, s.Timeout, s.SSEReadTimeout)
	for _, k := range names {
		fmt.Fprintf(h, "%s: %s\n", k, s.Headers[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Input is a create or update request (the original's fields). Nil fields
// of an update keep their value.
type Input struct {
	Slug           *string           `json:"slug"`
	Name           *string           `json:"name"`
	Transport      *string           `json:"transport"`
	URL            *string           `json:"url"`
	Command        *string           `json:"command"`
	Args           []any             `json:"args"`
	Env            map[string]any    `json:"env"`
	Description    *string           `json:"description"`
	Headers        map[string]string `json:"headers"`
	Timeout        *int              `json:"timeout"`
	SSEReadTimeout *int              `json:"sse_read_timeout"`
	Tags           []string          `json:"tags"`
	Icon           *string           `json:"icon"`
}

// URLChecker validates a server URL against the outbound policy
// (netguard.Guard.CheckURL).
type URLChecker interface {
	CheckURL(ctx context.Context, u *url.URL) error
}

// Store reads and writes mcp_servers.
type Store struct {
	db     postgres.DB
	sealer Sealer
	urls   URLChecker
}

// NewStore returns a store; urls may be nil (no URL policy check at save
// time; the dial is checked anyway).
func NewStore(db postgres.DB, sealer Sealer, urls URLChecker) *Store {
	return &Store{db: db, sealer: sealer, urls: urls}
}

// ErrNotFound: no such server.
var ErrNotFound = failure.NotFound("mcp_server_not_found", "MCP server not found")

var slugRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
var slugJunk = regexp.MustCompile(`[^a-z0-9_-]+`)

// Slugify derives a slug from a name: lower-case letters, digits, "-" and "_".
func Slugify(name string) string {
	s := strings.Trim(slugJunk.ReplaceAllString(strings.ToLower(strings.TrimSpace(name)), "-"), "-_")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

func headersAD(slug string) string { return "mcp_servers:" + slug + ":headers" }

func (st *Store) validate(ctx context.Context, s *Server, in Input) error {
	if in.Command != nil || in.Args != nil || in.Env != nil {
		return failure.Unprocessable("stdio_not_allowed", "command, args and env are not accepted: stdio MCP servers are built into the code, never configured through the API")
	}
	switch s.Transport {
	case TransportStreamableHTTP, TransportSSE:
	case "stdio":
		return failure.Unprocessable("stdio_not_allowed", "transport stdio is not accepted from the API (only code-defined built-in servers use it)")
	default:
		return failure.Invalid("invalid_transport", "transport must be one of streamable_http, sse")
	}
	if s.Name == "" || len(s.Name) > 100 {
		return failure.Invalid("invalid_name", "name is required (at most 100 characters)")
	}
	if !slugRe.MatchString(s.Slug) {
		return failure.Invalid("invalid_slug", "slug must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	u, err := url.Parse(s.URL)
	if s.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return failure.Invalid("invalid_url", "url must be an http(s) URL when transport is %s", s.Transport)
	}
	if st.urls != nil {
		if err := st.urls.CheckURL(ctx, u); err != nil {
			return failure.Unprocessable("outbound_denied", "%v", err)
		}
	}
	if s.Timeout < 0 || s.Timeout > 3600 || s.SSEReadTimeout < 0 || s.SSEReadTimeout > 86400 {
		return failure.Invalid("invalid_timeout", "timeout must be 0–3600 s and sse_read_timeout 0–86400 s")
	}
	for k := range s.Headers {
		if k == "" || strings.ContainsAny(k, " \r\n:") {
			return failure.Invalid("invalid_headers", "header name %q is not valid", k)
		}
	}
	return nil
}

func apply(s *Server, in Input) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	set(&s.Name, in.Name)
	set(&s.Transport, in.Transport)
	set(&s.URL, in.URL)
	set(&s.Description, in.Description)
	set(&s.Icon, in.Icon)
	if in.Headers != nil {
		s.Headers = in.Headers
	}
	if in.Timeout != nil {
		s.Timeout = *in.Timeout
	}
	if in.SSEReadTimeout != nil {
		s.SSEReadTimeout = *in.SSEReadTimeout
	}
	if in.Tags != nil {
		s.Tags = in.Tags
	}
}

// Create stores a new server.
func (st *Store) Create(ctx context.Context, in Input, actor string) (Server, error) {
	s := Server{Enabled: true, CreatedBy: actor, UpdatedBy: actor}
	apply(&s, in)
	if in.Slug != nil && *in.Slug != "" {
		s.Slug = *in.Slug
	} else {
		s.Slug = Slugify(s.Name)
	}
	if err := st.validate(ctx, &s, in); err != nil {
		return Server{}, err
	}
	sealed, names, err := st.seal(s)
	if err != nil {
		return Server{}, err
	}
	s.HeaderNames, s.ConfigHash = names, configHash(s)
	err = st.db.QueryRow(ctx, `INSERT INTO mcp_servers (slug, name, description, transport, url, headers_sealed, header_names,
		timeout_s, sse_read_timeout_s, tags, icon, config_hash, created_by, updated_by)
		VALUES ($1,$2,$3,$4,$5,$6,$7,NULLIF($8,0),NULLIF($9,0),$10,$11,$12,$13,$13) RETURNING created_at, updated_at`,
		s.Slug, s.Name, s.Description, s.Transport, s.URL, sealed, nz(names), s.Timeout, s.SSEReadTimeout, nz(s.Tags), s.Icon,
		s.ConfigHash, actor).Scan(&s.CreatedAt, &s.UpdatedAt)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return Server{}, failure.Conflict("mcp_server_exists", "an MCP server %q already exists", s.Slug)
	}
	return s, err
}

// ResealSecrets seals again, under the current key, the servers' headers
// that a previous key sealed (after a key rotation); failed names the
// servers whose headers do not open with any configured key.
func (st *Store) ResealSecrets(ctx context.Context) (resealed int, failed []string, err error) {
	if _, err := st.sealer.Seal("", "probe"); err != nil {
		return 0, nil, err // no key configured: nothing can be sealed
	}
	return postgres.ResealColumn(ctx, st.db, postgres.SealedColumn{Table: "mcp_servers", Key: "slug", Column: "headers_sealed"},
		func(slug, sealed string) (string, bool, error) { return st.sealer.Reseal(sealed, headersAD(slug)) })
}

func (st *Store) seal(s Server) (sealed string, names []string, err error) {
	if len(s.Headers) == 0 {
		return "", []string{}, nil
	}
	for k := range s.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	b, _ := json.Marshal(s.Headers)
	sealed, err = st.sealer.Seal(string(b), headersAD(s.Slug))
	return sealed, names, err
}

const cols = `slug, name, description, transport, url, headers_sealed, header_names, coalesce(timeout_s, 0),
	coalesce(sse_read_timeout_s, 0), tags, icon, enabled, disabled_tools, config_hash, created_by, updated_by, created_at, updated_at`

// optionalCols are cols of a row s of mcp_servers that may be missing (the
// right side of a LEFT JOIN): a missing row reads as zero values, in the
// types serverDest scans.
const optionalCols = `coalesce(s.slug, ''), coalesce(s.name, ''), coalesce(s.description, ''), coalesce(s.transport, ''),
	coalesce(s.url, ''), coalesce(s.headers_sealed, ''), coalesce(s.header_names, '[]'), coalesce(s.timeout_s, 0),
	coalesce(s.sse_read_timeout_s, 0), coalesce(s.tags, '[]'), coalesce(s.icon, ''), coalesce(s.enabled, false),
	coalesce(s.disabled_tools, '[]'), coalesce(s.config_hash, ''), coalesce(s.created_by, ''), coalesce(s.updated_by, ''),
	coalesce(s.created_at, 'epoch'), coalesce(s.updated_at, 'epoch')`

func (st *Store) scan(row pgx.Row) (Server, error) { return st.scanAfter(row) }

// scanAfter scans a row of extra columns followed by cols.
func (st *Store) scanAfter(row pgx.Row, extra ...any) (Server, error) {
	var s Server
	var sealed string
	if err := row.Scan(append(extra, serverDest(&s, &sealed)...)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Server{}, ErrNotFound
		}
		return Server{}, err
	}
	return s, st.openHeaders(&s, sealed)
}

// serverDest are the scan destinations of cols.
func serverDest(s *Server, sealed *string) []any {
	return []any{&s.Slug, &s.Name, &s.Description, &s.Transport, &s.URL, sealed, &s.HeaderNames, &s.Timeout,
		&s.SSEReadTimeout, &s.Tags, &s.Icon, &s.Enabled, &s.DisabledTools, &s.ConfigHash, &s.CreatedBy, &s.UpdatedBy,
		&s.CreatedAt, &s.UpdatedAt}
}

// openHeaders opens a scanned server's sealed headers into s.Headers.
func (st *Store) openHeaders(s *Server, sealed string) error {
	if sealed == "" {
		return nil
	}
	plain, err := st.sealer.Open(sealed, headersAD(s.Slug))
	if err != nil {
		return fmt.Errorf("open headers of MCP server %s: %w", s.Slug, err)
	}
	if err := json.Unmarshal([]byte(plain), &s.Headers); err != nil {
		return fmt.Errorf("headers of MCP server %s: %w", s.Slug, err)
	}
	return nil
}

// Get returns one server with its headers opened.
func (st *Store) Get(ctx context.Context, slug string) (Server, error) {
	return st.scan(st.db.QueryRow(ctx, `SELECT `+cols+` FROM mcp_servers WHERE slug = $1`, slug))
}

// List returns every server, sorted by slug.
func (st *Store) List(ctx context.Context) ([]Server, error) {
	rows, err := st.db.Query(ctx, `SELECT `+cols+` FROM mcp_servers ORDER BY slug`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Server{}
	for rows.Next() {
		s, err := st.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Update changes a server; the slug cannot change.
func (st *Store) Update(ctx context.Context, slug string, in Input, actor string) (Server, error) {
	s, err := st.Get(ctx, slug)
	if err != nil {
		return Server{}, err
	}
	apply(&s, in)
	if err := st.validate(ctx, &s, in); err != nil {
		return Server{}, err
	}
	sealed, names, err := st.seal(s)
	if err != nil {
		return Server{}, err
	}
	s.HeaderNames, s.ConfigHash, s.UpdatedBy = names, configHash(s), actor
	err = st.db.QueryRow(ctx, `UPDATE mcp_servers SET name=$2, description=$3, transport=$4, url=$5, headers_sealed=$6,
		header_names=$7, timeout_s=NULLIF($8,0), sse_read_timeout_s=NULLIF($9,0), tags=$10, icon=$11, config_hash=$12,
		updated_by=$13, updated_at=now() WHERE slug=$1 RETURNING updated_at`,
		s.Slug, s.Name, s.Description, s.Transport, s.URL, sealed, nz(names), s.Timeout, s.SSEReadTimeout, nz(s.Tags), s.Icon,
		s.ConfigHash, actor).Scan(&s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Server{}, ErrNotFound
	}
	return s, err
}

// Delete removes a server.
func (st *Store) Delete(ctx context.Context, slug string) error {
	tag, err := st.db.Exec(ctx, `DELETE FROM mcp_servers WHERE slug = $1`, slug)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

// SetEnabled switches a server on or off.
func (st *Store) SetEnabled(ctx context.Context, slug string, enabled bool, actor string) (Server, error) {
	tag, err := st.db.Exec(ctx, `UPDATE mcp_servers SET enabled=$2, updated_by=$3, updated_at=now() WHERE slug=$1`, slug, enabled, actor)
	if err != nil {
		return Server{}, err
	}
	if tag.RowsAffected() == 0 {
		return Server{}, ErrNotFound
	}
	return st.Get(ctx, slug)
}

// ToggleTool flips one tool's enabled state and returns the new state.
func (st *Store) ToggleTool(ctx context.Context, slug, toolName, actor string) (bool, error) {
	var disabled []string
	err := st.db.QueryRow(ctx, `UPDATE mcp_servers SET disabled_tools = CASE WHEN disabled_tools ? $2
			THEN disabled_tools - $2 ELSE disabled_tools || to_jsonb($2::text) END,
		updated_by=$3, updated_at=now() WHERE slug=$1 RETURNING disabled_tools`, slug, toolName, actor).Scan(&disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ErrNotFound
	}
	return !slices.Contains(disabled, toolName), err
}

// cachedTools returns the cached tool list when it belongs to configHash.
func (st *Store) cachedTools(ctx context.Context, slug, configHash string) ([]ToolDef, bool, error) {
	var raw []byte
	err := st.db.QueryRow(ctx, `SELECT tools_cache FROM mcp_servers WHERE slug=$1 AND tools_cache_hash=$2`, slug, configHash).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && raw == nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var defs []ToolDef
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, false, nil
	}
	return defs, true, nil
}

// saveTools caches a tool list under the config hash it was fetched with
// (a config changed meanwhile keeps its own, newer hash: nothing is saved).
func (st *Store) saveTools(ctx context.Context, slug, configHash string, defs []ToolDef) error {
	b, _ := json.Marshal(nz(defs))
	_, err := st.db.Exec(ctx, `UPDATE mcp_servers SET tools_cache=$3, tools_cache_hash=$2, tools_fetched_at=now()
		WHERE slug=$1 AND config_hash=$2`, slug, configHash, b)
	return err
}

// clearTools drops the cache (refresh).
func (st *Store) clearTools(ctx context.Context, slug string) error {
	_, err := st.db.Exec(ctx, `UPDATE mcp_servers SET tools_cache=NULL, tools_cache_hash=NULL WHERE slug=$1`, slug)
	return err
}
