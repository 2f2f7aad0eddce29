package auth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Service is identity: it logs users in, issues and checks access tokens,
// manages users and API keys. It is safe for concurrent use; all state is in
// PostgreSQL.
type Service struct {
	pool *pgxpool.Pool
	cfg  Config
	// dummy is verified against when a login names no user, so that the
	// response time does not reveal whether an account exists. It is computed
	// on first use: an argon2id hash costs tens of milliseconds and 19 MiB,
	// which a cold start should not pay.
	dummy     sync.Once
	dummyHash string
	cache     principalCache
}

// dummyPasswordHash returns the hash used for logins of unknown users.
func (s *Service) dummyPasswordHash() string {
	s.dummy.Do(func() {
		b, err := randomBytes(24)
		if err == nil {
			s.dummyHash, _ = HashPassword(string(b))
		}
	})
	return s.dummyHash
}

// NewService validates cfg (after defaults) and returns the service.
func NewService(pool *pgxpool.Pool, cfg Config) (*Service, error) {
	if pool == nil {
		return nil, errors.New("auth: nil pool")
	}
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Service{pool: pool, cfg: cfg}, nil
}

func (s *Service) now() time.Time { return s.cfg.Now() }

// Authentication errors.
var (
	ErrNotAuthenticated = failure.Unauthorized("not_authenticated", "missing or malformed Authorization header; expected \"Bearer <token>\"")
	ErrInvalidToken     = failure.Unauthorized("invalid_token", "the access token is invalid or expired")
	ErrInvalidAPIKey    = failure.Unauthorized("invalid_api_key", "the API key is invalid, disabled, revoked or expired")
)

// Authenticate turns an Authorization header value into a Principal.
// "Bearer yxkey_…" is an API key; any other bearer token is a JWT.
func (s *Service) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Principal{}, ErrNotAuthenticated
	}
	if strings.HasPrefix(token, APIKeyPrefix) {
		return s.authenticateAPIKey(ctx, token)
	}
	claims, err := s.parseToken(token)
	if err != nil {
		return Principal{}, err
	}
	now := s.now()
	if s.cfg.CacheTTL > 0 {
		if p, ok := s.cache.getUser(claims.userID, claims.Version, now); ok {
			return withActor(p, claims), nil
		}
	}
	u, err := s.loadUser(ctx, s.pool, claims.userID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (u.IsDeleted || u.TokenVersion != claims.Version)) {
		return Principal{}, ErrInvalidToken
	}
	if err != nil {
		return Principal{}, err
	}
	// Failed logins by anyone never lock out a session (throttle.go).
	if s.cfg.CacheTTL > 0 {
		s.cache.putUser(claims.userID, u.TokenVersion, u.principal(), now.Add(s.cfg.CacheTTL))
	}
	return withActor(u.principal(), claims), nil
}

// withActor marks p as acting through an impersonation when the token says so.
func withActor(p Principal, claims tokenClaims) Principal {
	if claims.Actor != nil {
		id := claims.Actor.UserID
		p.ImpersonatorID = &id
	}
	return p
}

// tokenClaims are an access token's claims: the user in "sub", the user's
// token version in "ver" (a token of an older version is revoked), and for
// an impersonation the superadmin in "act" (RFC 8693's actor claim).
type tokenClaims struct {
	jwt.RegisteredClaims
	Version int         `json:"ver"`
	Actor   *tokenActor `json:"act,omitempty"`
	userID  int64
}

// tokenActor names who acts through an impersonation token.
type tokenActor struct {
	Subject string `json:"sub"`
	UID     string `json:"uid"`
	UserID  int64  `json:"-"`
}

// IssueToken returns a signed HS256 access token for userID at the user's
// current token version, valid for TokenTTL.
func (s *Service) IssueToken(ctx context.Context, userID int64) (string, error) {
	u, err := s.loadUser(ctx, s.pool, userID)
	if err != nil {
		return "", fmt.Errorf("load user %d for a token: %w", userID, err)
	}
	return s.issueToken(u, nil, "")
}

// issueToken signs a token for u; actor and tokenID are set for an impersonation.
func (s *Service) issueToken(u userRow, actor *tokenActor, tokenID string) (string, error) {
	return s.issueTokenTTL(u, actor, tokenID, s.cfg.TokenTTL)
}

func (s *Service) issueTokenTTL(u userRow, actor *tokenActor, tokenID string, ttl time.Duration) (string, error) {
	now := s.now()
	claims := tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.FormatInt(u.ID, 10),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			ID:        tokenID,
		},
		Version: u.TokenVersion,
		Actor:   actor,
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.cfg.JWTSecret)
	if err != nil {
		return "", fmt.Errorf("sign access token: %w", err)
	}
	return signed, nil
}

// parseToken verifies signature (HMAC, compared in constant time by the
// library) and expiry, and returns the claims with the user id of "sub".
func (s *Service) parseToken(token string) (tokenClaims, error) {
	var claims tokenClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return s.cfg.JWTSecret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.cfg.Now),
	)
	if err != nil {
		return claims, ErrInvalidToken
	}
	id, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || id <= 0 {
		return claims, ErrInvalidToken
	}
	claims.userID = id
	if claims.Actor != nil {
		actorID, err := strconv.ParseInt(claims.Actor.Subject, 10, 64)
		if err != nil || actorID <= 0 {
			return claims, ErrInvalidToken
		}
		claims.Actor.UserID = actorID
	}
	return claims, nil
}
