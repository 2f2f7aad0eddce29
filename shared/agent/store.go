package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Errors.
var (
	ErrNotFound = failure.NotFound("agent_not_found", "agent not found")
)

// Agent is a stored agent definition.
type Agent struct {
	ID          int64           `json:"id"`
	Slug        string          `json:"slug"`
	BackendID   string          `json:"backend_id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Icon        *string         `json:"icon"`
	Pics        json.RawMessage `json:"pics"`
	ConfigJSON  json.RawMessage `json:"config_json"`
	ShareConfig json.RawMessage `json:"share_config"`
	IsDefault   bool            `json:"is_default"`
	IsSubagent  bool            `json:"is_subagent"`
	IsBuiltin   bool            `json:"is_builtin"`
	CreatedBy   *string         `json:"created_by"`
	UpdatedBy   *string         `json:"updated_by"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// Permission is the caller's access level ("read" or "manage").
	Permission string `json:"permission"`
}

// Context returns the agent's parsed config_json.context.
func (a Agent) Context() (Context, error) { return ParseContext(a.ConfigJSON) }

// Store reads and writes agents.
type Store struct {
	pool      *pgxpool.Pool
	knownTool func(string) bool
}

// NewStore returns a store; knownTool validates tool names in contexts (nil: no check).
func NewStore(pool *pgxpool.Pool, knownTool func(string) bool) *Store {
	return &Store{pool: pool, knownTool: knownTool}
}

const agentCols = `id, slug, backend_id, name, description, icon, pics, config_json, share_config,
	is_default, is_subagent, is_builtin, created_by, updated_by, created_at, updated_at`

func scanAgent(row pgx.Row) (Agent, error) {
	var a Agent
	var share []byte
	err := row.Scan(&a.ID, &a.Slug, &a.BackendID, &a.Name, &a.Description, &a.Icon, &a.Pics, &a.ConfigJSON, &share,
		&a.IsDefault, &a.IsSubagent, &a.IsBuiltin, &a.CreatedBy, &a.UpdatedBy, &a.CreatedAt, &a.UpdatedAt)
	if share != nil {
		a.ShareConfig = share
	} else {
		a.ShareConfig = json.RawMessage("null")
	}
	return a, err
}

// creatorOnly is the share_config of an agent created without one: only its
// creator (and superadmins) read and manage it.
var creatorOnly = access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "user"}}

// creatorOnlyJSON is creatorOnly as stored.
var creatorOnlyJSON = []byte(`{"version":2,"read_scope":{"access_level":"user"},"manage_scope":null}`)

func level(sub access.Subject, a Agent) access.Level {
	share, err := access.Parse(a.ShareConfig)
	if err != nil {
		share = &access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "user"}} // unreadable config: creator only
	}
	if share == nil && !a.IsBuiltin {
		// Private by default, like a KB: an agent stored without a
		// share_config (before the default below existed) is its creator's.
		share = &creatorOnly
	}
	created := ""
	if a.CreatedBy != nil {
		created = *a.CreatedBy
	}
	return access.Resolve(sub, created, share, access.Manage)
}

// Get returns the agent with slug if sub may read it; ErrNotFound otherwise
// (an invisible agent is indistinguishable from a missing one).
func (s *Store) Get(ctx context.Context, sub access.Subject, slug string) (Agent, error) {
	a, err := scanAgent(s.pool.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE slug = $1`, slug))
	return visible(a, err, sub, slug)
}

// QueueGet queues Get's read on b, to be sent in a pipeline with the
// caller's other statements (queue reads the agent in the round trip that
// locks the thread); done receives Get's result when the batch's results are
// read. The batch itself fails only when the statement does.
func (s *Store) QueueGet(b *pgx.Batch, sub access.Subject, slug string, done func(Agent, error)) {
	b.Queue(`SELECT `+agentCols+` FROM agents WHERE slug = $1`, slug).QueryRow(func(row pgx.Row) error {
		a, err := scanAgent(row)
		done(visible(a, err, sub, slug))
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	})
}

// visible is Get's result for a read agent a (or the read's error).
func visible(a Agent, err error, sub access.Subject, slug string) (Agent, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, ErrNotFound
	}
	if err != nil {
		return Agent{}, fmt.Errorf("load agent %s: %w", slug, err)
	}
	l := level(sub, a)
	if l == access.None {
		return Agent{}, ErrNotFound
	}
	a.Permission = l.String()
	return a, nil
}

// Default returns the default agent.
func (s *Store) Default(ctx context.Context, sub access.Subject) (Agent, error) {
	a, err := scanAgent(s.pool.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE is_default`))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, ErrNotFound
	}
	if err != nil {
		return Agent{}, err
	}
	l := level(sub, a)
	if l == access.None {
		return Agent{}, ErrNotFound // a default the caller may not see is no default for them
	}
	a.Permission = l.String()
	return a, nil
}

// List returns the agents sub may read, default first.
func (s *Store) List(ctx context.Context, sub access.Subject, includeSubagents bool) ([]Agent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentCols+` FROM agents
		WHERE ($1 OR NOT is_subagent) ORDER BY is_default DESC, created_at, id`, includeSubagents)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Agent{}
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, err
		}
		if l := level(sub, a); l != access.None {
			a.Permission = l.String()
			out = append(out, a)
		}
	}
	return out, rows.Err()
}

// Input is a create or update request. Nil fields are left unchanged on update.
type Input struct {
	Name        *string          `json:"name"`
	Slug        *string          `json:"slug"`
	BackendID   *string          `json:"backend_id"`
	Description *string          `json:"description"`
	Icon        *string          `json:"icon"`
	Pics        *json.RawMessage `json:"pics"`
	ConfigJSON  *json.RawMessage `json:"config_json"`
	ShareConfig *json.RawMessage `json:"share_config"`
	IsSubagent  *bool            `json:"is_subagent"`
	SetDefault  *bool            `json:"set_default"`
}

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,79}$`)

func (in Input) validate(create bool, knownTool func(string) bool) error {
	if create && (in.Name == nil || strings.TrimSpace(*in.Name) == "") {
		return failure.Unprocessable("invalid_agent", "name is required")
	}
	if in.Name != nil && (strings.TrimSpace(*in.Name) == "" || len(*in.Name) > 200) {
		return failure.Unprocessable("invalid_agent", "name must be 1 to 200 characters")
	}
	if in.Slug != nil && !slugPattern.MatchString(*in.Slug) {
		return failure.Unprocessable("invalid_slug", "slug must match %s", slugPattern)
	}
	if in.BackendID != nil && *in.BackendID != BackendChatbot {
		return failure.Unprocessable("unknown_backend", "backend_id %q is not available", *in.BackendID)
	}
	if in.SetDefault != nil && *in.SetDefault {
		return failure.Unprocessable("set_default_not_allowed", "set_default must be false; use POST /api/agent/{slug}/set_default")
	}
	if in.ConfigJSON != nil {
		c, err := ParseContext(*in.ConfigJSON)
		if err != nil {
			return err
		}
		if err := c.Validate(knownTool); err != nil {
			return err
		}
	}
	if in.ShareConfig != nil {
		if _, err := access.Parse(*in.ShareConfig); err != nil {
			return err
		}
	}
	if in.Pics != nil {
		var pics []string
		if err := json.Unmarshal(*in.Pics, &pics); err != nil {
			return failure.Unprocessable("invalid_agent", "pics must be a list of strings")
		}
	}
	return nil
}

// Create stores a new agent created by sub.
func (s *Store) Create(ctx context.Context, sub access.Subject, in Input) (Agent, error) {
	if err := in.validate(true, s.knownTool); err != nil {
		return Agent{}, err
	}
	if in.ConfigJSON != nil {
		if err := checkAdminOnly(sub, nil, *in.ConfigJSON); err != nil {
			return Agent{}, err
		}
	}
	slug := ""
	if in.Slug != nil {
		slug = *in.Slug
	} else {
		b := make([]byte, 5)
		_, _ = rand.Read(b)
		slug = "agent-" + hex.EncodeToString(b)
	}
	backend := BackendChatbot
	desc := ""
	if in.Description != nil {
		desc = *in.Description
	}
	pics := json.RawMessage("[]")
	if in.Pics != nil {
		pics = *in.Pics
	}
	cfg := json.RawMessage(`{"context":{}}`)
	if in.ConfigJSON != nil {
		cfg = *in.ConfigJSON
	}
	var share any = creatorOnlyJSON // private by default
	if in.ShareConfig != nil && string(*in.ShareConfig) != "null" {
		share = []byte(*in.ShareConfig)
	}
	sub2 := false
	if in.IsSubagent != nil {
		sub2 = *in.IsSubagent
	}
	a, err := scanAgent(s.pool.QueryRow(ctx, `
		INSERT INTO agents (slug, backend_id, name, description, icon, pics, config_json, share_config, is_subagent, created_by, updated_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
		RETURNING `+agentCols, slug, backend, strings.TrimSpace(*in.Name), desc, in.Icon, pics, cfg, share, sub2, sub.UID))
	if postgres.IsUniqueViolation(err, "agents_slug_key") {
		return Agent{}, failure.Conflict("slug_taken", "an agent with slug %q already exists", slug)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("create agent: %w", err)
	}
	a.Permission = access.Manage.String()
	return a, nil
}

// Update changes an agent sub may manage (403 when sub may only read it).
func (s *Store) Update(ctx context.Context, sub access.Subject, slug string, in Input) (Agent, error) {
	if err := in.validate(false, s.knownTool); err != nil {
		return Agent{}, err
	}
	if in.Slug != nil && *in.Slug != slug {
		return Agent{}, failure.Unprocessable("invalid_agent", "slug cannot be changed")
	}
	var out Agent
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		a, err := lockManaged(ctx, tx, sub, slug, "change")
		if err != nil {
			return err
		}
		var share any = []byte(a.ShareConfig)
		if string(a.ShareConfig) == "null" {
			share = nil
		}
		if in.ShareConfig != nil {
			share = []byte(*in.ShareConfig)
			if string(*in.ShareConfig) == "null" && !a.IsBuiltin {
				share = creatorOnlyJSON // "no sharing" is private, never global
			} else if string(*in.ShareConfig) == "null" {
				share = nil
			}
		}
		name, desc, icon, pics, cfg, isSub := a.Name, a.Description, a.Icon, a.Pics, a.ConfigJSON, a.IsSubagent
		if in.Name != nil {
			name = strings.TrimSpace(*in.Name)
		}
		if in.Description != nil {
			desc = *in.Description
		}
		if in.Icon != nil {
			icon = in.Icon
		}
		if in.Pics != nil {
			pics = *in.Pics
		}
		if in.ConfigJSON != nil {
			if err := checkAdminOnly(sub, a.ConfigJSON, *in.ConfigJSON); err != nil {
				return err
			}
			cfg = *in.ConfigJSON
		}
		if in.IsSubagent != nil {
			isSub = *in.IsSubagent
		}
		out, err = scanAgent(tx.QueryRow(ctx, `
			UPDATE agents SET name = $2, description = $3, icon = $4, pics = $5, config_json = $6,
				share_config = $7, is_subagent = $8, updated_by = $9, updated_at = now()
			WHERE slug = $1 RETURNING `+agentCols, slug, name, desc, icon, pics, cfg, share, isSub, sub.UID))
		return err
	})
	if err != nil {
		return Agent{}, err
	}
	out.Permission = access.Manage.String()
	return out, nil
}

// lockManaged locks the agent row for an update by sub, who must be able to
// manage it: 404 when sub cannot see it, 403 when sub may only use it.
func lockManaged(ctx context.Context, tx pgx.Tx, sub access.Subject, slug, verb string) (Agent, error) {
	a, err := scanAgent(tx.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE slug = $1 FOR UPDATE`, slug))
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, ErrNotFound
	}
	if err != nil {
		return Agent{}, err
	}
	switch level(sub, a) {
	case access.None:
		return Agent{}, ErrNotFound
	case access.Read:
		return Agent{}, failure.Forbidden("agent_manage_forbidden", "you may use this agent but not %s it", verb)
	}
	return a, nil
}

// Delete removes an agent sub may manage; built-in and default agents cannot be deleted (409).
func (s *Store) Delete(ctx context.Context, sub access.Subject, slug string) error {
	return postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		a, err := lockManaged(ctx, tx, sub, slug, "delete")
		if err != nil {
			return err
		}
		if a.IsBuiltin || a.IsDefault {
			return failure.Conflict("agent_builtin", "the built-in default agent cannot be deleted")
		}
		_, err = tx.Exec(ctx, `DELETE FROM agents WHERE slug = $1`, slug)
		return err
	})
}

// setDefaultLockKey is the transaction-scoped advisory lock that serializes
// SetDefault calls.
const setDefaultLockKey = 0x59756466 // "Yudf"

// SetDefault makes slug the default agent (admin only, checked by the caller).
// Concurrent calls are serialized: without that, each would clear the old
// default and then collide on uq_agents_default (or deadlock); with it, the
// last one wins and every call succeeds.
func (s *Store) SetDefault(ctx context.Context, slug string) error {
	return postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, setDefaultLockKey); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE slug = $1)`, slug).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ErrNotFound
		}
		if _, err := tx.Exec(ctx, `UPDATE agents SET is_default = false WHERE is_default AND slug <> $1`, slug); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE agents SET is_default = true, updated_at = now() WHERE slug = $1`, slug)
		return err
	})
}
