// Package modelprovider is the model providers managed in the product
// (/api/system/model-providers), next to the ones the environment configures
// (shared/llm.Registry), and the catalog that resolves a model spec against
// both.
//
// Precedence: the environment's providers (the built-in templates and
// YUXI_PROVIDER_*) come first and their ids are reserved — a stored
// provider cannot take one (409 provider_exists), so a spec never means two
// things. A spec whose provider is not the environment's is looked up among
// the stored, enabled providers; its model must be one of the provider's
// enabled_models of type chat.
//
// Secrets: the API key and the extra headers are sealed with
// YUXI_ENCRYPTION_KEY (shared/secret) and never answered (api_key is null,
// has_api_key tells; header values read "******"). api_key_env is refused
// for stored providers: naming a process variable through the API would let
// an administrator send any secret of the process to a URL of their choice.
//
// Outbound: base URLs set through the API are checked against the SSRF
// policy on save (422 outbound_denied) and every request to a stored
// provider — chat, /models — dials through the netguard client, so a DNS
// change after the save is refused at connect time too. Environment
// providers use the plain client (their URLs are the operator's).
//
// Refresh: every process keeps a snapshot of the rows and reloads it when
// the Redis version key (<prefix>modelproviders:version, INCR after each
// commit) moves, checked at most once per CheckEvery (1 s): a provider saved
// through one process is usable by every process within 1 s. If Redis cannot
// be read, the rows are reread at most once per CheckEvery.
//
// Owns the table model_providers.
// Imported by: shared/bootstrap, functions/intake, tests.
// May import: shared/llm, shared/secret, shared/netguard, shared/failure,
// shared/postgres, pgx, go-redis.
package modelprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/secret"
)

// Model types of enabled_models (the original's VALID_MODEL_TYPES).
const (
	TypeChat      = "chat"
	TypeEmbedding = "embedding"
	TypeRerank    = "rerank"
)

// redacted stands for a header value in answers; sent back on update it
// keeps the stored value.
const redacted = "******"

// Errors.
var (
	ErrNotFound = failure.NotFound("provider_not_found", "model provider not found")
	ErrBuiltin  = failure.Conflict("builtin_provider", "the provider is configured by the environment; change it there")
)

// Model is one enabled model of a provider (the original's enabled_models item).
type Model struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Source      string         `json:"source"`
	DisplayName string         `json:"display_name"`
	Dimension   *int           `json:"dimension,omitempty"`
	BatchSize   *int           `json:"batch_size,omitempty"`
	Extra       map[string]any `json:"extra"`
}

// Input is the body of create and update (the original's
// ModelProviderPayload). On update a nil field keeps the stored value; an
// explicit empty string clears the optional URLs, endpoints and the key.
type Input struct {
	ProviderID              *string           `json:"provider_id"`
	DisplayName             *string           `json:"display_name"`
	ProviderType            *string           `json:"provider_type"`
	DefaultProtocol         *string           `json:"default_protocol"`
	BaseURL                 *string           `json:"base_url"`
	EmbeddingBaseURL        *string           `json:"embedding_base_url"`
	RerankBaseURL           *string           `json:"rerank_base_url"`
	ModelsEndpoint          *string           `json:"models_endpoint"`
	EmbeddingModelsEndpoint *string           `json:"embedding_models_endpoint"`
	RerankModelsEndpoint    *string           `json:"rerank_models_endpoint"`
	APIKeyEnv               *string           `json:"api_key_env"`
	APIKey                  *string           `json:"api_key"`
	Capabilities            []string          `json:"capabilities"`
	EnabledModels           []Model           `json:"enabled_models"`
	Headers                 map[string]string `json:"headers_json"`
	Extra                   map[string]any    `json:"extra_json"`
	IsEnabled               *bool             `json:"is_enabled"`
	IsBuiltin               *bool             `json:"is_builtin"`
}

// View is a provider as answered (the original's to_dict plus
// credential_status and has_api_key); it never holds a secret.
type View struct {
	ID                      int64             `json:"id"`
	ProviderID              string            `json:"provider_id"`
	DisplayName             string            `json:"display_name"`
	ProviderType            string            `json:"provider_type"`
	DefaultProtocol         *string           `json:"default_protocol"`
	BaseURL                 string            `json:"base_url"`
	EmbeddingBaseURL        *string           `json:"embedding_base_url"`
	RerankBaseURL           *string           `json:"rerank_base_url"`
	ModelsEndpoint          *string           `json:"models_endpoint"`
	EmbeddingModelsEndpoint *string           `json:"embedding_models_endpoint"`
	RerankModelsEndpoint    *string           `json:"rerank_models_endpoint"`
	APIKeyEnv               *string           `json:"api_key_env"`
	APIKey                  *string           `json:"api_key"` // always null
	HasAPIKey               bool              `json:"has_api_key"`
	Capabilities            []string          `json:"capabilities"`
	EnabledModels           []Model           `json:"enabled_models"`
	Headers                 map[string]string `json:"headers_json"` // values redacted
	Extra                   map[string]any    `json:"extra_json"`
	IsEnabled               bool              `json:"is_enabled"`
	IsBuiltin               bool              `json:"is_builtin"`
	CredentialStatus        string            `json:"credential_status"`
	CreatedBy               *string           `json:"created_by"`
	UpdatedBy               *string           `json:"updated_by"`
	CreatedAt               *time.Time        `json:"created_at"`
	UpdatedAt               *time.Time        `json:"updated_at"`
}

// stored is a row with its secrets opened (never answered).
type stored struct {
	View
	apiKey  string
	headers map[string]string
}

// Store reads and writes model_providers and resolves specs. Safe for
// concurrent use.
type Store struct {
	pool       *pgxpool.Pool
	rdb        *redis.Client
	versionKey string
	env        *llm.Registry
	secrets    *secret.Keyring
	guard      *netguard.Guard
	guarded    *http.Client // every request to a stored provider
	plain      *http.Client // /models of environment providers
	// CheckEvery bounds how often the Redis version is read (default 1 s).
	CheckEvery time.Duration

	mu      sync.Mutex
	snap    *snapshot
	checked time.Time
}

type snapshot struct {
	version   int64
	providers map[string]stored
	clients   map[string]*llm.Client
}

// New returns the store. env is the environment's registry; guard is the
// outbound policy for stored providers (nil: no check — tests only).
func New(pool *pgxpool.Pool, rdb *redis.Client, prefix string, env *llm.Registry, secrets *secret.Keyring, guard *netguard.Guard) *Store {
	s := &Store{pool: pool, rdb: rdb, versionKey: prefix + "modelproviders:version", env: env, secrets: secrets, guard: guard,
		plain: &http.Client{Timeout: 40 * time.Second}, CheckEvery: time.Second}
	s.guarded = &http.Client{}
	if guard != nil {
		s.guarded = guard.Client()
	}
	return s
}

// Env is the environment's registry.
func (s *Store) Env() *llm.Registry { return s.env }

// DefaultModel is the environment's default model spec (YUXI_DEFAULT_MODEL),
// "" when unset.
func (s *Store) DefaultModel() string {
	if s.env == nil {
		return ""
	}
	return s.env.DefaultModel()
}

var providerIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{1,99}$`)

func keyAD(id string) string     { return "model_providers:" + id + ":api_key" }
func headersAD(id string) string { return "model_providers:" + id + ":headers" }

const cols = `id, provider_id, display_name, provider_type, default_protocol, base_url, embedding_base_url, rerank_base_url,
	models_endpoint, embedding_models_endpoint, rerank_models_endpoint, api_key_sealed, headers_sealed, capabilities,
	enabled_models, extra_json, is_enabled, created_by, updated_by, created_at, updated_at`

func (s *Store) scan(row pgx.Row) (stored, error) {
	var p stored
	var keySealed, headersSealed *string
	var caps, models, extra []byte
	var created, updated time.Time
	err := row.Scan(&p.ID, &p.ProviderID, &p.DisplayName, &p.ProviderType, &p.DefaultProtocol, &p.BaseURL, &p.EmbeddingBaseURL,
		&p.RerankBaseURL, &p.ModelsEndpoint, &p.EmbeddingModelsEndpoint, &p.RerankModelsEndpoint, &keySealed, &headersSealed,
		&caps, &models, &extra, &p.IsEnabled, &p.CreatedBy, &p.UpdatedBy, &created, &updated)
	if err != nil {
		return p, err
	}
	p.CreatedAt, p.UpdatedAt = &created, &updated
	_ = json.Unmarshal(caps, &p.Capabilities)
	_ = json.Unmarshal(models, &p.EnabledModels)
	_ = json.Unmarshal(extra, &p.Extra)
	if keySealed != nil {
		if p.apiKey, err = s.secrets.Open(*keySealed, keyAD(p.ProviderID)); err != nil {
			return p, fmt.Errorf("open the API key of provider %s: %w", p.ProviderID, err)
		}
	}
	p.headers = map[string]string{}
	if headersSealed != nil {
		plain, err := s.secrets.Open(*headersSealed, headersAD(p.ProviderID))
		if err != nil {
			return p, fmt.Errorf("open the headers of provider %s: %w", p.ProviderID, err)
		}
		_ = json.Unmarshal([]byte(plain), &p.headers)
	}
	p.finish()
	return p, nil
}

// finish fills the answered, secret-free fields.
func (p *stored) finish() {
	p.HasAPIKey = p.apiKey != ""
	p.APIKey = nil
	p.Headers = make(map[string]string, len(p.headers))
	for k := range p.headers {
		p.Headers[k] = redacted
	}
	if p.Capabilities == nil {
		p.Capabilities = []string{}
	}
	if p.EnabledModels == nil {
		p.EnabledModels = []Model{}
	}
	if p.Extra == nil {
		p.Extra = map[string]any{}
	}
	p.CredentialStatus = "ok"
	if p.IsEnabled && !p.HasAPIKey {
		p.CredentialStatus = "warning"
	}
}

// builtinView shows an environment provider as the original shows its
// built-in ones.
func builtinView(p llm.Provider) View {
	v := View{ProviderID: p.ID, DisplayName: p.DisplayName, ProviderType: "openai", BaseURL: p.BaseURL, HasAPIKey: p.HasAPIKey(),
		Capabilities: append([]string{}, p.Capabilities...), EnabledModels: []Model{}, Headers: map[string]string{},
		Extra: map[string]any{}, IsEnabled: true, IsBuiltin: true, CredentialStatus: "ok"}
	if p.APIKeyEnv != "" {
		env := p.APIKeyEnv
		v.APIKeyEnv = &env
	}
	if !p.HasAPIKey() {
		v.CredentialStatus = "warning"
	}
	return v
}

// List answers the environment's providers (is_builtin) and the stored ones.
func (s *Store) List(ctx context.Context) ([]View, error) {
	out := []View{}
	if s.env != nil {
		for _, p := range s.env.Providers() {
			out = append(out, builtinView(p))
		}
	}
	snap, err := s.current(ctx, true)
	if err != nil {
		return nil, err
	}
	for _, id := range sortedIDs(snap.providers) {
		out = append(out, snap.providers[id].View)
	}
	return out, nil
}

// Get answers one provider, built-in or stored.
func (s *Store) Get(ctx context.Context, id string) (View, error) {
	if p, ok := s.builtin(id); ok {
		return builtinView(p), nil
	}
	p, err := s.load(ctx, s.pool, id)
	if err != nil {
		return View{}, err
	}
	return p.View, nil
}

func (s *Store) builtin(id string) (llm.Provider, bool) {
	if s.env == nil {
		return llm.Provider{}, false
	}
	return s.env.Provider(id)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) load(ctx context.Context, q querier, id string) (stored, error) {
	if !validText(id) {
		return stored{}, ErrNotFound
	}
	p, err := s.scan(q.QueryRow(ctx, `SELECT `+cols+` FROM model_providers WHERE provider_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return stored{}, ErrNotFound
	}
	return p, err
}

func validText(v string) bool { return !strings.ContainsRune(v, 0) && len(v) <= 4096 }

// Create stores a provider.
func (s *Store) Create(ctx context.Context, by string, in Input) (View, error) {
	if in.ProviderID == nil || !providerIDRe.MatchString(strings.TrimSpace(*in.ProviderID)) {
		return View{}, failure.Invalid("invalid_provider_id", "provider_id must be 2-100 lower-case letters, digits, '_' or '-', starting with a letter or digit")
	}
	id := strings.TrimSpace(*in.ProviderID)
	if _, ok := s.builtin(id); ok {
		return View{}, failure.Conflict("provider_exists", "provider %q is configured by the environment", id)
	}
	p := stored{View: View{ProviderID: id, ProviderType: "openai", Capabilities: []string{llm.CapChat}, IsEnabled: true}, headers: map[string]string{}}
	if err := s.apply(ctx, &p, in); err != nil {
		return View{}, err
	}
	if p.BaseURL == "" {
		return View{}, failure.Invalid("invalid_base_url", "base_url is required")
	}
	keySealed, headersSealed, err := s.seal(p)
	if err != nil {
		return View{}, err
	}
	caps, _ := json.Marshal(p.Capabilities)
	models, _ := json.Marshal(p.EnabledModels)
	extra, _ := json.Marshal(p.Extra)
	_, err = s.pool.Exec(ctx, `INSERT INTO model_providers (provider_id, display_name, provider_type, default_protocol, base_url,
		embedding_base_url, rerank_base_url, models_endpoint, embedding_models_endpoint, rerank_models_endpoint, api_key_sealed,
		headers_sealed, capabilities, enabled_models, extra_json, is_enabled, created_by, updated_by)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$17)`,
		id, p.DisplayName, p.ProviderType, p.DefaultProtocol, p.BaseURL, p.EmbeddingBaseURL, p.RerankBaseURL, p.ModelsEndpoint,
		p.EmbeddingModelsEndpoint, p.RerankModelsEndpoint, keySealed, headersSealed, caps, models, extra, p.IsEnabled, by)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return View{}, failure.Conflict("provider_exists", "provider %q exists", id)
	}
	if err != nil {
		return View{}, fmt.Errorf("insert model provider: %w", err)
	}
	s.bump(ctx)
	return s.Get(ctx, id)
}

// Update changes a stored provider (built-in ones answer 409).
func (s *Store) Update(ctx context.Context, by, id string, in Input) (View, error) {
	if _, ok := s.builtin(id); ok {
		return View{}, ErrBuiltin
	}
	if in.ProviderID != nil && strings.TrimSpace(*in.ProviderID) != id {
		return View{}, failure.Invalid("provider_id_immutable", "provider_id cannot be changed")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return View{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit: no-op
	if !validText(id) {
		return View{}, ErrNotFound
	}
	p, err := s.scan(tx.QueryRow(ctx, `SELECT `+cols+` FROM model_providers WHERE provider_id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return View{}, ErrNotFound
	}
	if err != nil {
		return View{}, err
	}
	if err := s.apply(ctx, &p, in); err != nil {
		return View{}, err
	}
	keySealed, headersSealed, err := s.seal(p)
	if err != nil {
		return View{}, err
	}
	caps, _ := json.Marshal(p.Capabilities)
	models, _ := json.Marshal(p.EnabledModels)
	extra, _ := json.Marshal(p.Extra)
	if _, err := tx.Exec(ctx, `UPDATE model_providers SET display_name=$2, provider_type=$3, default_protocol=$4, base_url=$5,
		embedding_base_url=$6, rerank_base_url=$7, models_endpoint=$8, embedding_models_endpoint=$9, rerank_models_endpoint=$10,
		api_key_sealed=$11, headers_sealed=$12, capabilities=$13, enabled_models=$14, extra_json=$15, is_enabled=$16,
		updated_by=$17, updated_at=now() WHERE provider_id=$1`,
		id, p.DisplayName, p.ProviderType, p.DefaultProtocol, p.BaseURL, p.EmbeddingBaseURL, p.RerankBaseURL, p.ModelsEndpoint,
		p.EmbeddingModelsEndpoint, p.RerankModelsEndpoint, keySealed, headersSealed, caps, models, extra, p.IsEnabled, by); err != nil {
		return View{}, fmt.Errorf("update model provider: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return View{}, err
	}
	s.bump(ctx)
	return s.Get(ctx, id)
}

// Delete removes a stored provider.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, ok := s.builtin(id); ok {
		return ErrBuiltin
	}
	if !validText(id) {
		return ErrNotFound
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM model_providers WHERE provider_id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete model provider: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	s.bump(ctx)
	return nil
}

// ResealSecrets seals again, under the current key, the providers' API keys
// and headers that a previous key sealed (after a key rotation); failed
// names the providers whose values do not open with any configured key.
// The opened values do not change, so no cache is invalidated.
func (s *Store) ResealSecrets(ctx context.Context) (resealed int, failed []string, err error) {
	if _, err := s.secrets.Seal("", "probe"); err != nil {
		return 0, nil, err // no key configured: nothing can be sealed
	}
	bad := map[string]bool{}
	for _, c := range []struct {
		column string
		ad     func(string) string
	}{{"api_key_sealed", keyAD}, {"headers_sealed", headersAD}} {
		n, f, err := postgres.ResealColumn(ctx, s.pool, postgres.SealedColumn{Table: "model_providers", Key: "provider_id", Column: c.column},
			func(id, sealed string) (string, bool, error) { return s.secrets.Reseal(sealed, c.ad(id)) })
		resealed += n
		for _, id := range f {
			bad[id] = true
		}
		if err != nil {
			return resealed, nil, err
		}
	}
	for id := range bad {
		failed = append(failed, id)
	}
	sort.Strings(failed)
	return resealed, failed, nil
}

func (s *Store) seal(p stored) (key, headers *string, err error) {
	if p.apiKey != "" {
		v, err := s.secrets.Seal(p.apiKey, keyAD(p.ProviderID))
		if err != nil {
			return nil, nil, err
		}
		key = &v
	}
	if len(p.headers) > 0 {
		raw, _ := json.Marshal(p.headers)
		v, err := s.secrets.Seal(string(raw), headersAD(p.ProviderID))
		if err != nil {
			return nil, nil, err
		}
		headers = &v
	}
	return key, headers, nil
}

// apply merges in into p and validates the result.
func (s *Store) apply(ctx context.Context, p *stored, in Input) error {
	if in.APIKeyEnv != nil && strings.TrimSpace(*in.APIKeyEnv) != "" {
		return failure.Unprocessable("api_key_env_not_allowed",
			"api_key_env is not accepted through the API (it would send a process variable to a URL of the caller's choice); set api_key, or configure the provider with YUXI_PROVIDER_<ID>_* variables")
	}
	if in.IsBuiltin != nil && *in.IsBuiltin {
		return failure.Unprocessable("builtin_not_settable", "built-in providers come from the environment")
	}
	for _, v := range []*string{in.DisplayName, in.ProviderType, in.DefaultProtocol, in.BaseURL, in.EmbeddingBaseURL, in.RerankBaseURL,
		in.ModelsEndpoint, in.EmbeddingModelsEndpoint, in.RerankModelsEndpoint, in.APIKey} {
		if v != nil && !validText(*v) {
			return failure.Invalid("invalid_provider", "text fields must hold no NUL and at most 4096 bytes")
		}
	}
	if in.DisplayName != nil {
		p.DisplayName = strings.TrimSpace(*in.DisplayName)
	}
	if p.DisplayName == "" {
		p.DisplayName = p.ProviderID
	}
	if in.ProviderType != nil && strings.TrimSpace(*in.ProviderType) != "" {
		p.ProviderType = strings.TrimSpace(*in.ProviderType)
	}
	if p.ProviderType != "openai" {
		return failure.Unprocessable("unsupported_provider_type", "provider_type %q is not supported: only OpenAI-compatible providers (openai)", p.ProviderType)
	}
	opt := func(dst **string, v *string) {
		if v == nil {
			return
		}
		if t := strings.TrimSpace(*v); t != "" {
			*dst = &t
		} else {
			*dst = nil
		}
	}
	opt(&p.DefaultProtocol, in.DefaultProtocol)
	opt(&p.ModelsEndpoint, in.ModelsEndpoint)
	opt(&p.EmbeddingModelsEndpoint, in.EmbeddingModelsEndpoint)
	opt(&p.RerankModelsEndpoint, in.RerankModelsEndpoint)
	if in.BaseURL != nil {
		p.BaseURL = strings.TrimRight(strings.TrimSpace(*in.BaseURL), "/")
	}
	opt(&p.EmbeddingBaseURL, in.EmbeddingBaseURL)
	opt(&p.RerankBaseURL, in.RerankBaseURL)
	urls := []string{p.BaseURL}
	for _, u := range []*string{p.EmbeddingBaseURL, p.RerankBaseURL} {
		if u != nil {
			urls = append(urls, *u)
		}
	}
	// Endpoints given as absolute URLs are requested as such: check them too.
	for _, e := range []*string{p.ModelsEndpoint, p.EmbeddingModelsEndpoint, p.RerankModelsEndpoint} {
		if e != nil && (strings.HasPrefix(*e, "http://") || strings.HasPrefix(*e, "https://")) {
			urls = append(urls, *e)
		}
	}
	for _, raw := range urls {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return failure.Invalid("invalid_base_url", "%q must be an absolute http(s) URL", raw)
		}
		if u.User != nil {
			return failure.Invalid("invalid_base_url", "URLs must not carry credentials; set api_key")
		}
		if s.guard != nil {
			if err := s.guard.CheckURL(ctx, u); err != nil {
				return failure.Unprocessable("outbound_denied", "%v", err)
			}
		}
	}
	if in.APIKey != nil {
		p.apiKey = strings.TrimSpace(*in.APIKey)
	}
	if in.Headers != nil {
		next := make(map[string]string, len(in.Headers))
		for k, v := range in.Headers {
			if k == "" || strings.ContainsAny(k, " \r\n:\x00") || strings.ContainsAny(v, "\r\n\x00") {
				return failure.Invalid("invalid_headers", "header %q is not valid", k)
			}
			if v == redacted {
				old, ok := p.headers[k]
				if !ok {
					continue
				}
				v = old
			}
			next[k] = v
		}
		p.headers = next
	}
	if in.Extra != nil {
		p.Extra = in.Extra
	}
	if in.IsEnabled != nil {
		p.IsEnabled = *in.IsEnabled
	}
	if in.Capabilities != nil {
		p.Capabilities = []string{}
		seen := map[string]bool{}
		for _, c := range in.Capabilities {
			if c != TypeChat && c != TypeEmbedding && c != TypeRerank {
				return failure.Invalid("invalid_capabilities", "capability %q must be chat, embedding or rerank", c)
			}
			if !seen[c] {
				seen[c] = true
				p.Capabilities = append(p.Capabilities, c)
			}
		}
	}
	if in.EnabledModels != nil {
		p.EnabledModels = []Model{}
		seen := map[string]bool{}
		for _, m := range in.EnabledModels {
			m.ID = strings.TrimSpace(m.ID)
			if m.ID == "" || !validText(m.ID) || !validText(m.DisplayName) {
				return failure.Invalid("invalid_enabled_models", "every enabled model needs an id")
			}
			if m.Type == "" {
				m.Type = "unknown"
			}
			if m.Type != TypeChat && m.Type != TypeEmbedding && m.Type != TypeRerank {
				return failure.Invalid("invalid_enabled_models", "model %s: type must be chat, embedding or rerank", m.ID)
			}
			if m.Source == "" {
				m.Source = "remote"
			}
			if m.Source != "remote" && m.Source != "manual" {
				return failure.Invalid("invalid_enabled_models", "model %s: source must be manual or remote", m.ID)
			}
			if m.DisplayName == "" {
				m.DisplayName = m.ID
			}
			if m.Extra == nil {
				m.Extra = map[string]any{}
			}
			if seen[m.ID] {
				return failure.Invalid("invalid_enabled_models", "model id %s is repeated", m.ID)
			}
			seen[m.ID] = true
			p.EnabledModels = append(p.EnabledModels, m)
		}
	}
	for _, m := range p.EnabledModels {
		if !contains(p.Capabilities, m.Type) {
			return failure.Invalid("invalid_enabled_models", "model %s has type %s, not among the provider's capabilities %v", m.ID, m.Type, p.Capabilities)
		}
	}
	p.finish()
	return nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// bump moves the version so that every process reloads; a Redis failure
// leaves the other processes on their Postgres fallback (CheckEvery).
func (s *Store) bump(ctx context.Context) {
	_ = s.rdb.Incr(ctx, s.versionKey).Err()
	s.mu.Lock()
	s.snap = nil // this process reloads at once
	s.mu.Unlock()
}

// Refresh reloads the providers in every process (the original's model cache
// refresh) and answers the number of model specs known.
func (s *Store) Refresh(ctx context.Context) (int, error) {
	s.bump(ctx)
	snap, err := s.current(ctx, true)
	if err != nil {
		return 0, err
	}
	n := 0
	if s.env != nil && s.env.DefaultModel() != "" {
		n++
	}
	for _, p := range snap.providers {
		if p.IsEnabled {
			n += len(p.EnabledModels)
		}
	}
	return n, nil
}

// current answers the snapshot, reloading it when the version moved (at
// most once per CheckEvery unless force).
func (s *Store) current(ctx context.Context, force bool) (*snapshot, error) {
	s.mu.Lock()
	if s.snap != nil && !force && time.Since(s.checked) < s.CheckEvery {
		snap := s.snap
		s.mu.Unlock()
		return snap, nil
	}
	s.mu.Unlock()
	ver, err := s.rdb.Get(ctx, s.versionKey).Int64()
	if errors.Is(err, redis.Nil) {
		ver, err = 0, nil
	}
	s.mu.Lock()
	if err == nil && s.snap != nil && s.snap.version == ver {
		s.checked = time.Now()
		snap := s.snap
		s.mu.Unlock()
		return snap, nil
	}
	s.mu.Unlock()
	// The version is read before the rows: a save committed after this read
	// moves it again, so the next check reloads.
	rows, qerr := s.pool.Query(ctx, `SELECT `+cols+` FROM model_providers`)
	if qerr != nil {
		return nil, fmt.Errorf("load model providers: %w", qerr)
	}
	snap := &snapshot{version: ver, providers: map[string]stored{}, clients: map[string]*llm.Client{}}
	for rows.Next() {
		p, err := s.scan(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		snap.providers[p.ProviderID] = p
		snap.clients[p.ProviderID] = llm.NewClient(llm.Provider{ID: p.ProviderID, DisplayName: p.DisplayName, BaseURL: p.BaseURL,
			APIKey: p.apiKey, Capabilities: p.Capabilities}, s.guarded)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load model providers: %w", err)
	}
	s.mu.Lock()
	s.snap, s.checked = snap, time.Now()
	s.mu.Unlock()
	return snap, nil
}

// resolveTimeout bounds the snapshot check of ChatModel, which has no context.
const resolveTimeout = 3 * time.Second

// ParseSpec splits a spec of an environment or stored provider, in either
// form (provider:model or provider/model; see llm.Registry.ParseSpec).
func (s *Store) ParseSpec(spec string) (provider, model string, err error) {
	provider, model, _, err = s.resolve(spec)
	return provider, model, err
}

// resolve is ParseSpec that also answers the snapshot it used (nil for an
// environment provider).
func (s *Store) resolve(spec string) (provider, model string, snap *snapshot, err error) {
	if s.env != nil {
		provider, model, err = s.env.ParseSpec(spec)
		if err == nil {
			return provider, model, nil, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	snap, serr := s.current(ctx, false)
	if serr != nil {
		return "", "", nil, fmt.Errorf("model providers: %w", serr)
	}
	for _, sep := range separators(spec) {
		p, m := spec[:sep], spec[sep+1:]
		if sp, ok := snap.providers[p]; ok && m != "" {
			if !sp.IsEnabled {
				return "", "", nil, failure.Unprocessable("model_not_available", "provider %q is disabled", p)
			}
			return p, m, snap, nil
		}
	}
	if err == nil {
		err = failure.Unprocessable("model_not_available", "model %q: unknown provider", spec)
	}
	return "", "", nil, err
}

// separators are the candidate split points: the first separator, then the other.
func separators(spec string) []int {
	colon, slash := strings.IndexByte(spec, ':'), strings.IndexByte(spec, '/')
	var out []int
	for _, k := range []int{colon, slash} {
		if k > 0 {
			out = append(out, k)
		}
	}
	if len(out) == 2 && out[1] < out[0] {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// NormalizeSpec answers spec in the current form, provider:model.
func (s *Store) NormalizeSpec(spec string) (string, error) {
	p, m, err := s.ParseSpec(spec)
	if err != nil {
		return "", err
	}
	return p + ":" + m, nil
}

// ChatModel resolves spec: environment providers first, then the stored,
// enabled ones, whose model must be an enabled chat model.
func (s *Store) ChatModel(spec string) (llm.ChatModel, string, error) {
	p, m, snap, err := s.resolve(spec)
	if err != nil {
		return nil, "", err
	}
	if snap == nil {
		return s.env.ChatModel(spec)
	}
	sp, ok := snap.providers[p]
	if !ok {
		return nil, "", failure.Unprocessable("model_not_available", "model %q: unknown provider", spec)
	}
	if !hasModel(sp.EnabledModels, m, TypeChat) {
		return nil, "", failure.Unprocessable("model_not_available", "model %q is not an enabled chat model of provider %q", m, p)
	}
	return bound{c: snap.clients[p], model: m}, m, nil
}

func hasModel(ms []Model, id, typ string) bool {
	for _, m := range ms {
		if m.ID == id && m.Type == typ {
			return true
		}
	}
	return false
}

type bound struct {
	c     *llm.Client
	model string
}

func (b bound) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta) error) (llm.Response, error) {
	if req.Model == "" {
		req.Model = b.model
	}
	return b.c.Stream(ctx, req, onDelta)
}

// RemoteModel is one entry of a provider's /models (the original's
// normalized remote model, trimmed).
type RemoteModel struct {
	ID          string `json:"id"`
	Object      string `json:"object,omitempty"`
	Created     int64  `json:"created,omitempty"`
	OwnedBy     string `json:"owned_by,omitempty"`
	Type        string `json:"type"`
	DisplayName string `json:"display_name"`
}

// maxModelsBody bounds a /models answer.
const maxModelsBody = 8 << 20

// RemoteModels fetches the provider's model list now (not stored): chat from
// models_endpoint (default /models), embedding from
// embedding_models_endpoint when the provider has that capability, rerank
// only from a configured endpoint.
func (s *Store) RemoteModels(ctx context.Context, id string) ([]RemoteModel, error) {
	var base, key string
	var headers map[string]string
	var caps []string
	var chatEP, embEP, rerankEP *string
	hc := s.guarded
	if bp, ok := s.builtin(id); ok {
		base, key, caps, hc = bp.BaseURL, bp.APIKey, bp.Capabilities, s.plain
	} else {
		p, err := s.load(ctx, s.pool, id)
		if err != nil {
			return nil, err
		}
		base, key, headers, caps = p.BaseURL, p.apiKey, p.headers, p.Capabilities
		chatEP, embEP, rerankEP = p.ModelsEndpoint, p.EmbeddingModelsEndpoint, p.RerankModelsEndpoint
	}
	type ep struct {
		path *string
		typ  string
	}
	def := "/models"
	if chatEP == nil {
		chatEP = &def
	}
	eps := []ep{{chatEP, TypeChat}}
	if contains(caps, TypeEmbedding) && embEP != nil {
		eps = append(eps, ep{embEP, TypeEmbedding})
	}
	if contains(caps, TypeRerank) && rerankEP != nil {
		eps = append(eps, ep{rerankEP, TypeRerank})
	}
	out := []RemoteModel{}
	seen := map[string]bool{}
	for _, e := range eps {
		ms, err := fetchModels(ctx, hc, modelsURL(base, *e.path), key, headers, e.typ)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if k := m.ID + "\x00" + m.Type; !seen[k] {
				seen[k] = true
				out = append(out, m)
			}
		}
	}
	return out, nil
}

func modelsURL(base, endpoint string) string {
	if strings.HasPrefix(endpoint, "http://") || strings.HasPrefix(endpoint, "https://") {
		return endpoint
	}
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(endpoint, "/")
}

func fetchModels(ctx context.Context, hc *http.Client, u, key string, headers map[string]string, typ string) ([]RemoteModel, error) {
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, failure.Invalid("invalid_base_url", "models URL %q: %v", u, err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if key != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := hc.Do(req)
	if errors.Is(err, netguard.ErrDenied) {
		return nil, failure.Unprocessable("outbound_denied", "%v", err)
	}
	if err != nil {
		return nil, failure.New(failure.KindUnprocessable, "remote_models_failed", "fetch models: %v", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxModelsBody))
	if err != nil {
		return nil, failure.Unprocessable("remote_models_failed", "read models: %v", err)
	}
	if res.StatusCode == http.StatusUnauthorized {
		// As the original: not passed through, so the client does not take it
		// for its own session ending.
		return nil, failure.New(failure.KindUnprocessable, "remote_auth_failed", "the provider refused the API key (401)")
	}
	if res.StatusCode/100 != 2 {
		return nil, failure.Unprocessable("remote_models_failed", "models request answered %d", res.StatusCode)
	}
	var raw []map[string]any
	var wrapped struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &wrapped); err == nil && wrapped.Data != nil {
		raw = wrapped.Data
	} else if err := json.Unmarshal(body, &raw); err != nil {
		return nil, failure.Unprocessable("remote_models_failed", "models answer must be a list or hold a data list")
	}
	out := make([]RemoteModel, 0, len(raw))
	for _, m := range raw {
		id, _ := m["id"].(string)
		if strings.TrimSpace(id) == "" {
			continue
		}
		rm := RemoteModel{ID: id, Type: typ, DisplayName: id}
		rm.Object, _ = m["object"].(string)
		rm.OwnedBy, _ = m["owned_by"].(string)
		if c, ok := m["created"].(float64); ok {
			rm.Created = int64(c)
		}
		if t, _ := m["type"].(string); t == TypeChat || t == TypeEmbedding || t == TypeRerank {
			rm.Type = t
		}
		if n, _ := m["name"].(string); n != "" {
			rm.DisplayName = n
		}
		out = append(out, rm)
	}
	return out, nil
}

// GroupModel is one model of the grouped v2 list.
type GroupModel struct {
	Spec        string `json:"spec"`
	ModelID     string `json:"model_id"`
	DisplayName string `json:"display_name"`
	Dimension   *int   `json:"dimension"`
	BatchSize   *int   `json:"batch_size"`
}

// Group is one provider of the grouped v2 list.
type Group struct {
	ProviderID          string       `json:"provider_id"`
	ProviderDisplayName string       `json:"provider_display_name"`
	Models              []GroupModel `json:"models"`
}

// Grouped answers the models of modelType (chat, embedding, rerank) by
// provider, specs in the current form: the environment's default model,
// then the enabled models of the enabled stored providers.
func (s *Store) Grouped(ctx context.Context, modelType string) (map[string]Group, error) {
	if modelType == "" {
		modelType = TypeChat
	}
	if modelType != TypeChat && modelType != TypeEmbedding && modelType != TypeRerank {
		return nil, failure.Invalid("invalid_model_type", "model_type must be chat, embedding or rerank")
	}
	out := map[string]Group{}
	if s.env != nil && modelType == TypeChat && s.env.DefaultModel() != "" {
		if p, m, err := s.env.ParseSpec(s.env.DefaultModel()); err == nil {
			bp, _ := s.env.Provider(p)
			out[p] = Group{ProviderID: p, ProviderDisplayName: bp.DisplayName,
				Models: []GroupModel{{Spec: p + ":" + m, ModelID: m, DisplayName: m}}}
		}
	}
	snap, err := s.current(ctx, false)
	if err != nil {
		return nil, err
	}
	for _, id := range sortedIDs(snap.providers) {
		p := snap.providers[id]
		if !p.IsEnabled {
			continue
		}
		g := Group{ProviderID: id, ProviderDisplayName: p.DisplayName, Models: []GroupModel{}}
		for _, m := range p.EnabledModels {
			if m.Type == modelType {
				g.Models = append(g.Models, GroupModel{Spec: id + ":" + m.ID, ModelID: m.ID, DisplayName: m.DisplayName, Dimension: m.Dimension, BatchSize: m.BatchSize})
			}
		}
		if len(g.Models) > 0 {
			out[id] = g
		}
	}
	return out, nil
}

// Status is the answer of a model status check.
type Status struct {
	Spec      string `json:"spec"`
	Status    string `json:"status"` // available, unavailable, error
	Message   string `json:"message"`
	ModelType string `json:"model_type,omitempty"`
}

// CheckStatus asks the model of spec for a one-word reply (chat models;
// embedding and rerank specs of stored providers answer "error" with a
// message saying they are not checked here).
func (s *Store) CheckStatus(ctx context.Context, spec string) Status {
	st := Status{Spec: spec, ModelType: TypeChat}
	model, _, err := s.ChatModel(spec)
	if err != nil {
		st.Status, st.Message, st.ModelType = "error", err.Error(), ""
		if p, m, perr := s.ParseSpec(spec); perr == nil {
			if snap, serr := s.current(ctx, false); serr == nil {
				if sp, ok := snap.providers[p]; ok {
					for _, em := range sp.EnabledModels {
						if em.ID == m {
							st.ModelType = em.Type
						}
					}
				}
			}
		}
		return st
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := model.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: "Say 1"}}}, func(llm.Delta) error { return nil })
	switch {
	case err != nil:
		st.Status, st.Message = "error", err.Error()
	case strings.TrimSpace(resp.Content) == "":
		st.Status, st.Message = "unavailable", "empty answer"
	default:
		st.Status, st.Message = "available", "ok"
	}
	return st
}
