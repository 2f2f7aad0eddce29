package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults from the original product (models_business.py, auth_utils.py).
const (
	DefaultTokenTTL      = 7 * 24 * time.Hour
	DefaultLockThreshold = 5
	DefaultLockDuration  = 300 * time.Second

	// MinSecretBytes is the shortest accepted signing or derivation secret.
	MinSecretBytes = 32
)

// Config is what the Service needs; main builds it (from the environment or
// LoadOrCreateSecrets) and passes it in.
type Config struct {
	// JWTSecret signs access tokens (HS256).
	JWTSecret []byte
	// APIKeySecret derives API key secrets from (user id, request id).
	// Rotating it makes every existing key unusable and unreplayable.
	APIKeySecret []byte
	// TokenTTL is the access token lifetime (default 7 days).
	TokenTTL time.Duration
	// LockThreshold is how many wrong passwords for one login from one client
	// address lock that pair (default 5).
	LockThreshold int
	// LockDuration is the first lock of a pair (default 300 s); each further
	// failure doubles it, up to MaxLockDuration.
	LockDuration time.Duration
	// LoginLimiter bounds login attempts per client address (nil: no limit
	// beyond the per-(login, address) lock).
	LoginLimiter LoginLimiter
	// CacheTTL: how long a resolved JWT subject or API key is answered from
	// memory (0: never; see cache.go for the staleness bound).
	CacheTTL time.Duration
	// Invalidations carries cache evictions to the other processes (nil:
	// this process only; fine when CacheTTL is 0 or for one process).
	Invalidations Invalidations
	// Now is the clock (default time.Now); tests control it.
	Now func() time.Time
}

func (c *Config) applyDefaults() {
	if c.TokenTTL <= 0 {
		c.TokenTTL = DefaultTokenTTL
	}
	if c.LockThreshold <= 0 {
		c.LockThreshold = DefaultLockThreshold
	}
	if c.LockDuration <= 0 {
		c.LockDuration = DefaultLockDuration
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// validate checks the secrets: each at least MinSecretBytes long, and
// distinct, so that a leak of one does not forge the other.
func (c Config) validate() error {
	if len(c.JWTSecret) < MinSecretBytes {
		return fmt.Errorf("auth config: JWT secret must be at least %d bytes, got %d", MinSecretBytes, len(c.JWTSecret))
	}
	if len(c.APIKeySecret) < MinSecretBytes {
		return fmt.Errorf("auth config: API key derivation secret must be at least %d bytes, got %d", MinSecretBytes, len(c.APIKeySecret))
	}
	if subtle.ConstantTimeCompare(c.JWTSecret, c.APIKeySecret) == 1 {
		return errors.New("auth config: JWT secret and API key derivation secret must differ")
	}
	return nil
}

// Names of the generated secrets in instance_secrets.
const (
	secretNameJWT    = "jwt"
	secretNameAPIKey = "api_key_derivation"
)

// LoadOrCreateSecrets returns the instance's generated secrets, creating them
// on first use. It is for local runs where no secrets are configured: every
// process that calls it, concurrently or later, gets the same values, because
// the first writer wins (INSERT … ON CONFLICT DO NOTHING) and everyone reads
// back what was committed.
func LoadOrCreateSecrets(ctx context.Context, pool *pgxpool.Pool) (jwtSecret, apiKeySecret []byte, err error) {
	candJWT, err := randomBytes(MinSecretBytes * 2)
	if err != nil {
		return nil, nil, err
	}
	candKey, err := randomBytes(MinSecretBytes * 2)
	if err != nil {
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, `INSERT INTO instance_secrets (name, value) VALUES ($1, $2), ($3, $4)
		ON CONFLICT (name) DO NOTHING`, secretNameJWT, candJWT, secretNameAPIKey, candKey); err != nil {
		return nil, nil, fmt.Errorf("store generated secrets: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT name, value FROM instance_secrets WHERE name IN ($1, $2)`, secretNameJWT, secretNameAPIKey)
	if err != nil {
		return nil, nil, fmt.Errorf("read secrets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var value []byte
		if err := rows.Scan(&name, &value); err != nil {
			return nil, nil, fmt.Errorf("read secrets: %w", err)
		}
		switch name {
		case secretNameJWT:
			jwtSecret = value
		case secretNameAPIKey:
			apiKeySecret = value
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read secrets: %w", err)
	}
	if err := (Config{JWTSecret: jwtSecret, APIKeySecret: apiKeySecret}).validate(); err != nil {
		return nil, nil, fmt.Errorf("stored secrets: %w", err)
	}
	return jwtSecret, apiKeySecret, nil
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate random bytes: %w", err)
	}
	return b, nil
}
