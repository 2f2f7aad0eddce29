// Package usersettings is what each user configures for themselves: the
// user config (enable_memory), the sandbox environment variables their
// agents' sandboxes get (agent_envs; never shown to anyone else), and the
// images they upload (avatars, chat images): PNG, JPEG, GIF or WebP,
// checked by content (shared/imagecheck: magic bytes, then a full decode)
// and stored in the object store under unguessable keys.
//
// Owns the tables user_config and agent_envs.
// Imported by: functions/intake, shared/bootstrap/identity, the sandbox tools' wiring
// (tool-invoke's main, infra/local: EnvForUID).
// May import: shared/blob, shared/failure, shared/imagecheck, shared/postgres, pgx.
package usersettings

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/imagecheck"
)

// Agent environment limits, as the original (user_router.py).
const (
	MaxEnvCount       = 200
	MaxEnvKeyLength   = 128
	MaxEnvValueLength = 32768
	// MaxImageBytes bounds an uploaded image (5 MB, as the original).
	MaxImageBytes = 5 << 20
	// MaxImagePixels bounds an uploaded image's decoded size (a small
	// compressed file can decode to gigabytes).
	MaxImagePixels = 40_000_000
	// ImagePrefix starts every uploaded image's object key.
	ImagePrefix = "user-images/"
)

var envKeyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Store reads and writes one user's settings. Every method takes the user
// id of the authenticated caller: there is no way to name another user.
type Store struct {
	pool    *pgxpool.Pool
	objects blob.Store
	now     func() time.Time
}

// New returns the store; objects may be nil (then uploads answer 503).
func New(pool *pgxpool.Pool, objects blob.Store) *Store {
	return &Store{pool: pool, objects: objects, now: time.Now}
}

// Config is a user's config.
type Config struct {
	EnableMemory bool `json:"enable_memory"`
}

// ConfigUpdate changes the config; nil leaves a field.
type ConfigUpdate struct {
	EnableMemory *bool `json:"enable_memory"`
}

// Config returns the user's config (defaults when never set).
func (s *Store) Config(ctx context.Context, userID int64) (Config, error) {
	var c Config
	err := s.pool.QueryRow(ctx, `SELECT enable_memory FROM user_config WHERE user_id = $1`, userID).Scan(&c.EnableMemory)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Config{}, fmt.Errorf("load user config %d: %w", userID, err)
	}
	return c, nil
}

// UpdateConfig changes the user's config and returns it.
func (s *Store) UpdateConfig(ctx context.Context, userID int64, in ConfigUpdate) (Config, error) {
	var c Config
	err := s.pool.QueryRow(ctx, `INSERT INTO user_config (user_id, enable_memory, updated_at) VALUES ($1, COALESCE($2, false), now())
		ON CONFLICT (user_id) DO UPDATE SET enable_memory = COALESCE($2, user_config.enable_memory), updated_at = now()
		RETURNING enable_memory`, userID, in.EnableMemory).Scan(&c.EnableMemory)
	if err != nil {
		return Config{}, fmt.Errorf("update user config %d: %w", userID, err)
	}
	return c, nil
}

// AgentEnv is the user's sandbox environment.
type AgentEnv struct {
	Env       map[string]string `json:"env"`
	UpdatedAt *time.Time        `json:"updated_at"`
}

// ValidateEnv checks and normalizes an environment as the original: at most
// MaxEnvCount names matching [A-Za-z_][A-Za-z0-9_]* of at most
// MaxEnvKeyLength bytes (trimmed, unique), string values of at most
// MaxEnvValueLength characters, no NUL (it cannot enter an environment).
func ValidateEnv(env map[string]any) (map[string]string, error) {
	if len(env) > MaxEnvCount {
		return nil, failure.Unprocessable("too_many_env_vars", "at most %d environment variables", MaxEnvCount)
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		name := strings.TrimSpace(k)
		switch {
		case name == "":
			return nil, failure.Unprocessable("invalid_env_name", "an environment variable name is empty")
		case len(name) > MaxEnvKeyLength:
			return nil, failure.Unprocessable("invalid_env_name", "environment variable names are at most %d characters", MaxEnvKeyLength)
		case !envKeyPattern.MatchString(name):
			return nil, failure.Unprocessable("invalid_env_name", "environment variable name %q must match [A-Za-z_][A-Za-z0-9_]*", name)
		}
		if _, dup := out[name]; dup {
			return nil, failure.Unprocessable("duplicate_env_name", "environment variable %s is given twice", name)
		}
		s, ok := v.(string)
		if !ok {
			return nil, failure.Unprocessable("invalid_env_value", "the value of %s must be a string", name)
		}
		if utf8.RuneCountInString(s) > MaxEnvValueLength || strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
			return nil, failure.Unprocessable("invalid_env_value", "the value of %s must be at most %d characters without NUL", name, MaxEnvValueLength)
		}
		out[name] = s
	}
	return out, nil
}

// AgentEnv returns the user's sandbox environment (empty when never set).
func (s *Store) AgentEnv(ctx context.Context, userID int64) (AgentEnv, error) {
	var raw []byte
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT env, updated_at FROM agent_envs WHERE user_id = $1`, userID).Scan(&raw, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return AgentEnv{Env: map[string]string{}}, nil
	}
	if err != nil {
		return AgentEnv{}, fmt.Errorf("load agent env %d: %w", userID, err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(raw, &env); err != nil {
		return AgentEnv{}, fmt.Errorf("decode agent env %d: %w", userID, err)
	}
	at = at.UTC()
	return AgentEnv{Env: env, UpdatedAt: &at}, nil
}

// ReplaceAgentEnv replaces the user's sandbox environment with env.
func (s *Store) ReplaceAgentEnv(ctx context.Context, userID int64, env map[string]any) (AgentEnv, error) {
	clean, err := ValidateEnv(env)
	if err != nil {
		return AgentEnv{}, err
	}
	raw, err := json.Marshal(clean)
	if err != nil {
		return AgentEnv{}, err
	}
	var at time.Time
	if err := s.pool.QueryRow(ctx, `INSERT INTO agent_envs (user_id, env, updated_at) VALUES ($1, $2, now())
		ON CONFLICT (user_id) DO UPDATE SET env = EXCLUDED.env,
			updated_at = CASE WHEN agent_envs.env = EXCLUDED.env THEN agent_envs.updated_at ELSE now() END
		RETURNING updated_at`, userID, raw).Scan(&at); err != nil {
		return AgentEnv{}, fmt.Errorf("replace agent env %d: %w", userID, err)
	}
	at = at.UTC()
	return AgentEnv{Env: clean, UpdatedAt: &at}, nil
}

// EnvFor is what a sandbox of the user's gets injected: the user's
// variables, never anyone else's. The sandbox provisioner calls it when it
// starts a sandbox for a run of userID.
func (s *Store) EnvFor(ctx context.Context, userID int64) (map[string]string, error) {
	e, err := s.AgentEnv(ctx, userID)
	if err != nil {
		return nil, err
	}
	return e.Env, nil
}

// EnvForUID is EnvFor by the user's uid (what a tool call carries); an
// unknown uid has no variables.
func (s *Store) EnvForUID(ctx context.Context, uid string) (map[string]string, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT e.env FROM agent_envs e JOIN users u ON u.id = e.user_id WHERE u.uid = $1`, uid).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load agent env of %s: %w", uid, err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("decode agent env of %s: %w", uid, err)
	}
	return env, nil
}

// ErrNotAnImage answers uploads that are not PNG, JPEG, GIF or WebP.
var ErrNotAnImage = failure.New(failure.KindUnsupportedMedia, "unsupported_image", "the file is not a PNG, JPEG, GIF or WebP image")

// ErrImageTooLarge answers uploads over MaxImageBytes.
var ErrImageTooLarge = failure.New(failure.KindTooLarge, "image_too_large", "images are at most %d bytes", MaxImageBytes)

// SaveImage stores an uploaded image of the user's and returns its object
// key, ImagePrefix + kind + "/" + 128 random bits + extension: the key is
// the capability to read it (images are shown by <img> tags, which carry no
// token). The type comes from the content's magic bytes, never the name.
func (s *Store) SaveImage(ctx context.Context, kind string, r io.Reader) (string, blob.Info, error) {
	if s.objects == nil {
		return "", blob.Info{}, failure.New(failure.KindUnavailable, "uploads_unavailable", "no object store is configured")
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxImageBytes+1))
	if err != nil {
		return "", blob.Info{}, err
	}
	if len(data) > MaxImageBytes {
		return "", blob.Info{}, ErrImageTooLarge
	}
	// The whole file must decode as the type its magic bytes name: it is
	// stored and served as uploaded.
	t, err := imagecheck.Verify(data, MaxImagePixels)
	switch {
	case errors.Is(err, imagecheck.ErrNotAnImage), errors.Is(err, imagecheck.ErrBadImage):
		return "", blob.Info{}, ErrNotAnImage
	case errors.Is(err, imagecheck.ErrTooManyPixels):
		return "", blob.Info{}, ErrImageDimensions
	case err != nil:
		return "", blob.Info{}, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", blob.Info{}, err
	}
	key := ImagePrefix + kind + "/" + hex.EncodeToString(b) + "." + t.Ext
	info, err := s.objects.Put(ctx, key, bytes.NewReader(data), int64(len(data)), t.ContentType)
	if err != nil {
		return "", blob.Info{}, fmt.Errorf("store image: %w", err)
	}
	return key, info, nil
}

// ErrImageDimensions answers images over MaxImagePixels.
var ErrImageDimensions = failure.Unprocessable("image_dimensions", "images are at most %d pixels", MaxImagePixels)

var imageKeyPattern = regexp.MustCompile(`^(avatar|images)/[0-9a-f]{32}\.(png|jpg|gif|webp)$`)

// ErrImageNotFound answers image keys that are malformed or missing.
var ErrImageNotFound = failure.NotFound("image_not_found", "image not found")

// Image opens an uploaded image by the key SaveImage returned (without ImagePrefix).
func (s *Store) Image(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	if s.objects == nil || !imageKeyPattern.MatchString(key) {
		return nil, blob.Info{}, ErrImageNotFound
	}
	rc, info, err := s.objects.Get(ctx, ImagePrefix+key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, blob.Info{}, ErrImageNotFound
	}
	return rc, info, err
}
