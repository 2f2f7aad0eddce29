// Package oidc is single sign-on through an OpenID Connect provider: the
// authorization URL (state and nonce kept in PostgreSQL, so any process can
// take the callback), the code exchange, ID-token verification (signature
// against the provider's JWKS, issuer, audience, expiry, nonce), and the
// one-time login codes the callback hands the browser. Who a verified
// identity is, is shared/auth's decision (LoginExternal).
//
// Imported by: functions/intake, shared/bootstrap/identity.
// May import: shared/auth, shared/failure, pgx, go-oidc, x/oauth2.
package oidc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Lifetimes, as the original: an authorization request may take 5 minutes,
// the browser has 1 minute to exchange its login code.
const (
	StateTTL     = 5 * time.Minute
	LoginCodeTTL = time.Minute
	// Where the callback sends the browser (the web app's routes).
	FrontendCallbackPath = "/auth/oidc/callback"
	FrontendLoginPath    = "/login"
	DefaultCallbackPath  = "/api/auth/oidc/callback"
)

// Config is the OIDC_* configuration (main reads it from the environment).
type Config struct {
	Enabled      bool
	ProviderName string
	IssuerURL    string
	ClientID     string
	ClientSecret string
	RedirectURI  string
	// Explicit endpoints replace discovery when AuthorizationEndpoint is set;
	// then TokenEndpoint and JWKSURI are required too.
	AuthorizationEndpoint string
	TokenEndpoint         string
	UserinfoEndpoint      string
	JWKSURI               string
	Scopes                []string
	ForcePromptLogin      bool
	UsernameClaim         string
	NameClaim             string
	DepartmentClaim       string
	Policy                auth.ExternalPolicy
}

// Validate checks an enabled configuration.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	if c.ClientID == "" || c.ClientSecret == "" || c.IssuerURL == "" {
		return errors.New("oidc: OIDC_ISSUER_URL, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are required when OIDC_ENABLED=true")
	}
	if c.AuthorizationEndpoint != "" && (c.TokenEndpoint == "" || c.JWKSURI == "") {
		return errors.New("oidc: OIDC_AUTHORIZATION_ENDPOINT needs OIDC_TOKEN_ENDPOINT and OIDC_JWKS_URI")
	}
	if r := c.Policy.DefaultRole; r != "" && r != auth.RoleUser && r != auth.RoleAdmin {
		return fmt.Errorf("oidc: OIDC_DEFAULT_ROLE must be user or admin, got %q", r)
	}
	return nil
}

// Users is what the login needs of identity.
type Users interface {
	LoginExternal(ctx context.Context, id auth.ExternalIdentity, pol auth.ExternalPolicy) (int64, error)
	TokenFor(ctx context.Context, userID int64) (auth.TokenResponse, error)
}

// Service runs OIDC logins. The provider's metadata is loaded on first use
// (not at start: a cold start must not depend on the provider being up).
type Service struct {
	cfg    Config
	pool   *pgxpool.Pool
	users  Users
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	mu       sync.Mutex
	provider *gooidc.Provider
}

// Options are the service's collaborators besides its configuration.
type Options struct {
	// HTTPClient reaches the provider (default: 30 s timeout). The provider
	// URLs are operator configuration, so they are trusted (not SSRF-guarded).
	HTTPClient *http.Client
	Now        func() time.Time
	Log        *slog.Logger
}

// New returns the service; cfg must have passed Validate.
func New(cfg Config, pool *pgxpool.Pool, users Users, o Options) *Service {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{gooidc.ScopeOpenID, "profile", "email"}
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = "preferred_username"
	}
	if cfg.NameClaim == "" {
		cfg.NameClaim = "name"
	}
	if cfg.DepartmentClaim == "" {
		cfg.DepartmentClaim = "department"
	}
	if cfg.ProviderName == "" {
		cfg.ProviderName = "OIDC"
	}
	if cfg.RedirectURI == "" {
		cfg.RedirectURI = DefaultCallbackPath
	}
	return &Service{cfg: cfg, pool: pool, users: users, client: o.HTTPClient, now: o.Now, log: o.Log}
}

// PublicConfig is what the login page needs.
type PublicConfig struct {
	Enabled      bool   `json:"enabled"`
	ProviderName string `json:"provider_name,omitempty"`
}

// PublicConfig answers GET /api/auth/oidc/config.
func (s *Service) PublicConfig() PublicConfig {
	if s == nil || !s.cfg.Enabled {
		return PublicConfig{Enabled: false}
	}
	return PublicConfig{Enabled: true, ProviderName: s.cfg.ProviderName}
}

// ErrDisabled answers the login routes when OIDC is off.
var ErrDisabled = failure.New(failure.KindUnavailable, "oidc_disabled", "OIDC login is not available; ask an administrator")

func (s *Service) enabled() bool { return s != nil && s.cfg.Enabled }

func (s *Service) ctx(ctx context.Context) context.Context {
	return gooidc.ClientContext(ctx, s.client)
}

// getProvider loads (once per process) the provider's metadata.
func (s *Service) getProvider(ctx context.Context) (*gooidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	var p *gooidc.Provider
	if s.cfg.AuthorizationEndpoint != "" {
		p = (&gooidc.ProviderConfig{IssuerURL: s.cfg.IssuerURL, AuthURL: s.cfg.AuthorizationEndpoint, TokenURL: s.cfg.TokenEndpoint,
			UserInfoURL: s.cfg.UserinfoEndpoint, JWKSURL: s.cfg.JWKSURI}).NewProvider(s.ctx(context.Background()))
	} else {
		var err error
		// The provider keeps the context's client for its key set.
		p, err = gooidc.NewProvider(s.ctx(ctx), s.cfg.IssuerURL)
		if err != nil {
			return nil, failure.New(failure.KindUnavailable, "oidc_discovery_failed", "the identity provider's metadata could not be loaded").
				With(map[string]any{"cause": err.Error()})
		}
	}
	s.provider = p
	return p, nil
}

func (s *Service) oauth(p *gooidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.cfg.RedirectURI, Scopes: s.cfg.Scopes}
}

func token() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// safeRedirectPath keeps redirect paths inside the web app: a path starting
// with one '/', no scheme, no host, no backslash or control characters.
func safeRedirectPath(p string) string {
	if p == "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || len(p) > 512 ||
		strings.ContainsAny(p, "\\\x00\r\n\t") {
		return "/"
	}
	return p
}

// LoginURL starts an authorization request: a fresh state (stored hashed)
// and nonce, valid StateTTL.
func (s *Service) LoginURL(ctx context.Context, redirectPath string) (string, error) {
	if !s.enabled() {
		return "", ErrDisabled
	}
	p, err := s.getProvider(ctx)
	if err != nil {
		return "", err
	}
	state, err := token()
	if err != nil {
		return "", err
	}
	nonce, err := token()
	if err != nil {
		return "", err
	}
	now := s.now()
	if _, err := s.pool.Exec(ctx, `INSERT INTO oidc_login_states (state_hash, nonce, redirect_path, expires_at) VALUES ($1, $2, $3, $4)`,
		hash(state), nonce, safeRedirectPath(redirectPath), now.Add(StateTTL)); err != nil {
		return "", fmt.Errorf("store oidc state: %w", err)
	}
	_, _ = s.pool.Exec(ctx, `DELETE FROM oidc_login_states WHERE state_hash IN
		(SELECT state_hash FROM oidc_login_states WHERE expires_at < $1 LIMIT 100)`, now)
	opts := []oauth2.AuthCodeOption{gooidc.Nonce(nonce)}
	if s.cfg.ForcePromptLogin {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"))
	}
	return s.oauth(p).AuthCodeURL(state, opts...), nil
}

// Callback completes an authorization: it consumes the state, exchanges the
// code, verifies the ID token (signature, issuer, audience, expiry, nonce),
// reads userinfo when the provider has it, signs the user in through Users
// and returns where to send the browser: the web app's callback page with a
// one-time login code, or its login page with an error message. Every
// failure is logged and answered with a message, never a token.
func (s *Service) Callback(ctx context.Context, code, state, providerError string) string {
	userID, err := s.callback(ctx, code, state, providerError)
	if err != nil {
		s.log.Warn("oidc callback refused", "error", err)
		msg := "OIDC login failed; please try again"
		if fe, ok := failure.As(err); ok {
			msg = fe.Message
		}
		return FrontendLoginPath + "?" + url.Values{"oidc_error": {msg}}.Encode()
	}
	lc, err := token()
	if err == nil {
		_, err = s.pool.Exec(ctx, `INSERT INTO oidc_login_codes (code_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
			hash(lc), userID, s.now().Add(LoginCodeTTL))
	}
	if err != nil {
		s.log.Error("oidc login code", "error", err)
		return FrontendLoginPath + "?" + url.Values{"oidc_error": {"OIDC login failed; please try again"}}.Encode()
	}
	return FrontendCallbackPath + "?" + url.Values{"code": {lc}}.Encode()
}

// Errors of the callback.
var (
	errState = failure.Unauthorized("oidc_state_invalid", "the login session has expired; go back to the login page and try again")
	errToken = failure.Unauthorized("oidc_token_invalid", "the identity provider's answer could not be verified")
)

func (s *Service) callback(ctx context.Context, code, state, providerError string) (int64, error) {
	if !s.enabled() {
		return 0, ErrDisabled
	}
	if state == "" || len(state) > 256 {
		return 0, errState
	}
	// The state is consumed first: whatever follows, it cannot be replayed.
	var nonce string
	err := s.pool.QueryRow(ctx, `DELETE FROM oidc_login_states WHERE state_hash = $1 AND expires_at > $2 RETURNING nonce`,
		hash(state), s.now()).Scan(&nonce)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errState
	}
	if err != nil {
		return 0, fmt.Errorf("consume oidc state: %w", err)
	}
	if providerError != "" {
		return 0, failure.Unauthorized("oidc_provider_error", "the identity provider refused the login")
	}
	if code == "" || len(code) > 4096 {
		return 0, errToken
	}
	p, err := s.getProvider(ctx)
	if err != nil {
		return 0, err
	}
	tok, err := s.oauth(p).Exchange(s.ctx(ctx), code)
	if err != nil {
		return 0, fmt.Errorf("%w (exchange: %v)", errToken, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return 0, fmt.Errorf("%w (no id_token)", errToken)
	}
	idt, err := p.VerifierContext(s.ctx(ctx), &gooidc.Config{ClientID: s.cfg.ClientID, Now: s.now}).Verify(s.ctx(ctx), raw)
	if err != nil {
		return 0, fmt.Errorf("%w (verify: %v)", errToken, err)
	}
	if idt.Nonce == "" || idt.Nonce != nonce {
		return 0, fmt.Errorf("%w (nonce mismatch)", errToken)
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return 0, fmt.Errorf("%w (claims: %v)", errToken, err)
	}
	if p.UserInfoEndpoint() != "" {
		ui, err := p.UserInfo(s.ctx(ctx), oauth2.StaticTokenSource(tok))
		if err != nil {
			return 0, fmt.Errorf("%w (userinfo: %v)", errToken, err)
		}
		if ui.Subject != idt.Subject {
			return 0, fmt.Errorf("%w (userinfo subject differs)", errToken)
		}
		extra := map[string]any{}
		if err := ui.Claims(&extra); err == nil {
			for k, v := range extra {
				claims[k] = v
			}
		}
	}
	str := func(k string) string { v, _ := claims[k].(string); return v }
	id := auth.ExternalIdentity{Issuer: idt.Issuer, Subject: idt.Subject, Username: str(s.cfg.UsernameClaim), Name: str(s.cfg.NameClaim)}
	if id.Username == "" {
		id.Username = str("preferred_username")
	}
	if id.Username == "" {
		id.Username, _, _ = strings.Cut(str("email"), "@")
	}
	if s.cfg.Policy.FetchDepartment {
		id.DepartmentName = str(s.cfg.DepartmentClaim)
		if id.DepartmentName == "" {
			id.DepartmentName = str("department")
		}
		id.DepartmentDescription = str("department_description")
	}
	return s.users.LoginExternal(ctx, id, s.cfg.Policy)
}

// ErrLoginCode answers an unknown, used or expired login code.
var ErrLoginCode = failure.Invalid("oidc_code_invalid", "the login code is invalid or expired; sign in again")

// ExchangeCode trades a one-time login code for the user's access token.
func (s *Service) ExchangeCode(ctx context.Context, code string) (auth.TokenResponse, error) {
	if !s.enabled() {
		return auth.TokenResponse{}, ErrDisabled
	}
	if code == "" || len(code) > 256 {
		return auth.TokenResponse{}, ErrLoginCode
	}
	var userID int64
	var live bool
	err := s.pool.QueryRow(ctx, `DELETE FROM oidc_login_codes WHERE code_hash = $1 RETURNING user_id, expires_at > $2`,
		hash(code), s.now()).Scan(&userID, &live)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
		return auth.TokenResponse{}, ErrLoginCode
	}
	if err != nil {
		return auth.TokenResponse{}, fmt.Errorf("consume oidc login code: %w", err)
	}
	_, _ = s.pool.Exec(ctx, `DELETE FROM oidc_login_codes WHERE code_hash IN
		(SELECT code_hash FROM oidc_login_codes WHERE expires_at < $1 LIMIT 100)`, s.now())
	return s.users.TokenFor(ctx, userID)
}
