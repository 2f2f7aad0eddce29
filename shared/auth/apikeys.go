package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// API key format: APIKeyPrefix followed by 48 lowercase hex characters.
const (
	APIKeyPrefix    = "yxkey_"
	apiKeyHexLen    = 48
	apiKeyPrefixLen = 12
	maxAPIKeyName   = 100
	// lastUsedEvery bounds how often authentication writes last_used_at per
	// key, so that a busy key does not cost a write on every request.
	lastUsedEvery = time.Minute
)

// APIKey is an API key's metadata. The secret is never stored (only its
// sha256), and the hash is never returned.
type APIKey struct {
	ID           int64      `json:"id"`
	Name         string     `json:"name"`
	KeyPrefix    string     `json:"key_prefix"`
	UserID       int64      `json:"user_id"`
	DepartmentID *int64     `json:"department_id"`
	ExpiresAt    *time.Time `json:"expires_at"`
	IsEnabled    bool       `json:"is_enabled"`
	RevokedAt    *time.Time `json:"revoked_at"`
	LastUsedAt   *time.Time `json:"last_used_at"`
	CreatedAt    time.Time  `json:"created_at"`
	RequestID    string     `json:"request_id"`
	CreatedBy    string     `json:"created_by"`
}

// CreatedAPIKey is the answer to a create (or its replay): the key and its secret.
type CreatedAPIKey struct {
	APIKey APIKey `json:"api_key"`
	Secret string `json:"secret"`
}

// NewAPIKey is a create request. RequestID is the idempotency key; UserID
// defaults to the caller; DepartmentID, when set, must be the subject's.
type NewAPIKey struct {
	RequestID    string
	Name         string
	UserID       *int64
	DepartmentID *int64
	ExpiresAt    *time.Time
}

// APIKeyUpdate changes the mutable fields; nil leaves a field unchanged.
// ClearExpiry removes the expiry (ExpiresAt is then ignored).
type APIKeyUpdate struct {
	Name        *string
	ExpiresAt   *time.Time
	ClearExpiry bool
	IsEnabled   *bool
}

// ErrAPIKeyNotFound is the answer for a key that does not exist, is revoked,
// or belongs to someone else: the caller cannot tell these apart.
var ErrAPIKeyNotFound = failure.NotFound("api_key_not_found", "API key not found")

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{8,64}$`)

// DeriveAPIKeySecret is the deterministic API key secret for (userID,
// requestID): "yxkey_" + the first 48 hex characters of
// HMAC-SHA256(derivationSecret, "yuxi-api-key-v1:{userID}:user-request:{requestID}").
// Determinism is what makes a create replayable without storing the secret.
func DeriveAPIKeySecret(derivationSecret []byte, userID int64, requestID string) string {
	m := hmac.New(sha256.New, derivationSecret)
	fmt.Fprintf(m, "yuxi-api-key-v1:%d:user-request:%s", userID, requestID)
	return APIKeyPrefix + hex.EncodeToString(m.Sum(nil))[:apiKeyHexLen]
}

func hashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// intentHash fingerprints the original create intent. Keys are sorted
// (struct field order) and the expiry is normalised to UTC microseconds, the
// precision the database keeps, so a replay hashes identically.
func intentHash(userID int64, name string, departmentID *int64, expiresAt *time.Time) string {
	var exp *string
	if expiresAt != nil {
		s := expiresAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
		exp = &s
	}
	canonical, _ := json.Marshal(struct {
		DepartmentID *int64  `json:"department_id"`
		ExpiresAt    *string `json:"expires_at"`
		Name         string  `json:"name"`
		UserID       int64   `json:"user_id"`
	}{departmentID, exp, name, userID})
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

const apiKeyColumns = `id, name, key_prefix, user_id, department_id, expires_at, is_enabled, revoked_at,
	last_used_at, created_at, request_id, created_by`

func scanAPIKey(row pgx.Row, extra ...any) (APIKey, error) {
	var k APIKey
	dest := append([]any{&k.ID, &k.Name, &k.KeyPrefix, &k.UserID, &k.DepartmentID, &k.ExpiresAt, &k.IsEnabled,
		&k.RevokedAt, &k.LastUsedAt, &k.CreatedAt, &k.RequestID, &k.CreatedBy}, extra...)
	if err := row.Scan(dest...); err != nil {
		return k, err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	k.ExpiresAt, k.RevokedAt, k.LastUsedAt = utcPtr(k.ExpiresAt), utcPtr(k.RevokedAt), utcPtr(k.LastUsedAt)
	return k, nil
}

// utcPtr normalises a scanned timestamp to UTC, so that answers do not
// depend on the process's time zone.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// CreateAPIKey creates a key, or replays an earlier create with the same
// request id: same intent → the same row and the same secret (also when the
// key was revoked since: it stays revoked); different intent → 409
// request_id_conflict. Concurrent identical creates commit one row.
// Only a superadmin may create a key for another user.
func (s *Service) CreateAPIKey(ctx context.Context, actor Principal, in NewAPIKey) (CreatedAPIKey, error) {
	if !requestIDPattern.MatchString(in.RequestID) {
		return CreatedAPIKey{}, failure.Unprocessable("invalid_request_id", "request_id must be 8 to 64 characters of letters, digits, '.', '_', ':' or '-'")
	}
	name := strings.TrimSpace(in.Name)
	if name == "" || utf8.RuneCountInString(name) > maxAPIKeyName || !utf8.ValidString(name) {
		return CreatedAPIKey{}, failure.Unprocessable("invalid_name", "name must be 1 to %d characters", maxAPIKeyName)
	}
	subject := actor.UserID
	if in.UserID != nil && *in.UserID != actor.UserID {
		if !actor.IsSuperadmin() {
			return CreatedAPIKey{}, failure.Forbidden("api_key_forbidden", "only a superadmin may create API keys for other users")
		}
		subject = *in.UserID
	}
	var expiresAt *time.Time
	if in.ExpiresAt != nil {
		t := in.ExpiresAt.UTC().Truncate(time.Microsecond)
		expiresAt = &t
	}
	secret := DeriveAPIKeySecret(s.cfg.APIKeySecret, subject, in.RequestID)
	keyHash := hashAPIKey(secret)
	intent := intentHash(subject, name, in.DepartmentID, expiresAt)

	var key APIKey
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		// FOR SHARE: a concurrent user deletion (which revokes keys) waits for us.
		var userDept *int64
		var deleted bool
		err := tx.QueryRow(ctx, `SELECT department_id, is_deleted FROM users WHERE id = $1 FOR SHARE`, subject).Scan(&userDept, &deleted)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && deleted) {
			return failure.NotFound("user_not_found", "user %d not found", subject)
		}
		if err != nil {
			return fmt.Errorf("load key subject: %w", err)
		}
		if in.DepartmentID != nil && (userDept == nil || *userDept != *in.DepartmentID) {
			return failure.Unprocessable("department_mismatch", "an API key's department must be its user's department")
		}
		key, err = scanAPIKey(tx.QueryRow(ctx, `INSERT INTO api_keys
			(key_hash, key_prefix, request_id, intent_hash, name, user_id, department_id, expires_at, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT DO NOTHING RETURNING `+apiKeyColumns,
			keyHash, secret[:apiKeyPrefixLen], in.RequestID, intent, name, subject, in.DepartmentID, expiresAt, actor.UID))
		if err == nil || !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Conflict: the INSERT waited for any concurrent creator to commit,
		// so the existing row is visible to this statement.
		var storedIntent, storedHash string
		key, err = scanAPIKey(tx.QueryRow(ctx, `SELECT `+apiKeyColumns+`, intent_hash, key_hash
			FROM api_keys WHERE user_id = $2 AND request_id = $1`, in.RequestID, subject), &storedIntent, &storedHash)
		if errors.Is(err, pgx.ErrNoRows) {
			return errors.New("api key conflict on key_hash without a matching request_id")
		}
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare([]byte(storedIntent), []byte(intent)) != 1 ||
			subtle.ConstantTimeCompare([]byte(storedHash), []byte(keyHash)) != 1 {
			return failure.Conflict("request_id_conflict", "request_id was already used for a different API key")
		}
		return nil
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return CreatedAPIKey{}, err
		}
		return CreatedAPIKey{}, fmt.Errorf("create api key %s: %w", in.RequestID, err)
	}
	return CreatedAPIKey{APIKey: key, Secret: secret}, nil
}

// ListAPIKeys lists the caller's live (not revoked) keys, newest first; a
// superadmin sees every user's. It returns one page and the total.
func (s *Service) ListAPIKeys(ctx context.Context, actor Principal, skip, limit int) ([]APIKey, int, error) {
	if skip < 0 || limit < 1 || limit > 500 {
		return nil, 0, failure.Unprocessable("invalid_pagination", "skip must be >= 0 and limit between 1 and 500")
	}
	const visible = `revoked_at IS NULL AND ($1 OR user_id = $2)`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE `+visible, actor.IsSuperadmin(), actor.UserID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count api keys: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE `+visible+`
		ORDER BY created_at DESC, id DESC OFFSET $3 LIMIT $4`, actor.IsSuperadmin(), actor.UserID, skip, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	out := []APIKey{}
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list api keys: %w", err)
	}
	return out, total, nil
}

// visibleKey is the WHERE clause for one key the actor may see: not revoked,
// and owned by the actor unless the actor is a superadmin.
const visibleKey = `id = $1 AND revoked_at IS NULL AND ($2 OR user_id = $3)`

// GetAPIKey returns one of the caller's live keys (404 for anyone else's).
func (s *Service) GetAPIKey(ctx context.Context, actor Principal, id int64) (APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE `+visibleKey,
		id, actor.IsSuperadmin(), actor.UserID))
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, ErrAPIKeyNotFound
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("get api key %d: %w", id, err)
	}
	return k, nil
}

// UpdateAPIKey changes name, expiry or enabled flag of one of the caller's
// live keys. A revoked key is gone: it cannot be updated or re-enabled.
func (s *Service) UpdateAPIKey(ctx context.Context, actor Principal, id int64, in APIKeyUpdate) (APIKey, error) {
	var name *string
	if in.Name != nil {
		n := strings.TrimSpace(*in.Name)
		if n == "" || utf8.RuneCountInString(n) > maxAPIKeyName || !utf8.ValidString(n) {
			return APIKey{}, failure.Unprocessable("invalid_name", "name must be 1 to %d characters", maxAPIKeyName)
		}
		name = &n
	}
	var exp *time.Time
	if in.ExpiresAt != nil && !in.ClearExpiry {
		t := in.ExpiresAt.UTC().Truncate(time.Microsecond)
		exp = &t
	}
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `UPDATE api_keys SET
			name = COALESCE($4, name),
			expires_at = CASE WHEN $5 THEN NULL ELSE COALESCE($6, expires_at) END,
			is_enabled = COALESCE($7, is_enabled),
			updated_at = now()
		WHERE `+visibleKey+` RETURNING `+apiKeyColumns,
		id, actor.IsSuperadmin(), actor.UserID, name, in.ClearExpiry, exp, in.IsEnabled))
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, ErrAPIKeyNotFound
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("update api key %d: %w", id, err)
	}
	s.InvalidateAPIKey(ctx, id) // a disabled or shortened key stops working everywhere
	return k, nil
}

// RevokeAPIKey disables one of the caller's live keys for good, leaving a
// tombstone (is_enabled=false, revoked_at) so that a replayed create returns
// it revoked instead of resurrecting it.
func (s *Service) RevokeAPIKey(ctx context.Context, actor Principal, id int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET is_enabled = false, revoked_at = $4, updated_at = now()
		WHERE `+visibleKey, id, actor.IsSuperadmin(), actor.UserID, s.now())
	if err != nil {
		return fmt.Errorf("revoke api key %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrAPIKeyNotFound
	}
	s.InvalidateAPIKey(ctx, id)
	return nil
}

// authenticateAPIKey resolves a "yxkey_…" secret. Disabled, revoked and
// expired keys and keys of deleted users are all 401 invalid_api_key.
func (s *Service) authenticateAPIKey(ctx context.Context, secret string) (Principal, error) {
	if len(secret) != len(APIKeyPrefix)+apiKeyHexLen || !isLowerHex(secret[len(APIKeyPrefix):]) {
		return Principal{}, ErrInvalidAPIKey
	}
	keyHash := hashAPIKey(secret)
	now := s.now()
	if s.cfg.CacheTTL > 0 {
		if e, ok := s.cache.getKey(keyHash, now); ok {
			if e.used == nil || now.Sub(*e.used) >= lastUsedEvery {
				if err := s.touchAPIKey(ctx, *e.p.APIKeyID, now); err != nil {
					return Principal{}, err
				}
				e.used = &now
				s.cache.putKey(keyHash, e)
			}
			return e.p, nil
		}
	}
	var (
		keyID                          int64
		storedHash                     string
		enabled, deleted               bool
		revokedAt, expiresAt, lastUsed *time.Time
		p                              Principal
	)
	err := s.pool.QueryRow(ctx, `SELECT k.id, k.key_hash, k.is_enabled, k.revoked_at, k.expires_at, k.last_used_at,
			u.id, u.uid, u.username, u.role, u.department_id, u.is_deleted
		FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = $1`, keyHash).
		Scan(&keyID, &storedHash, &enabled, &revokedAt, &expiresAt, &lastUsed,
			&p.UserID, &p.UID, &p.Username, &p.Role, &p.DepartmentID, &deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrInvalidAPIKey
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up api key: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(storedHash), []byte(keyHash)) != 1 ||
		!enabled || revokedAt != nil || deleted || (expiresAt != nil && expiresAt.Before(now)) {
		return Principal{}, ErrInvalidAPIKey
	}
	if lastUsed == nil || now.Sub(*lastUsed) >= lastUsedEvery {
		if err := s.touchAPIKey(ctx, keyID, now); err != nil {
			return Principal{}, err
		}
		lastUsed = &now
	}
	p.APIKeyID = &keyID
	if s.cfg.CacheTTL > 0 {
		s.cache.putKey(keyHash, cachedPrincipal{p: p, until: now.Add(s.cfg.CacheTTL), expires: expiresAt, used: lastUsed})
	}
	return p, nil
}

// touchAPIKey records a use of key id at most once per lastUsedEvery: the
// condition re-checks under the row lock, so concurrent requests write once.
func (s *Service) touchAPIKey(ctx context.Context, keyID int64, now time.Time) error {
	if _, err := s.pool.Exec(ctx, `UPDATE api_keys SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`, keyID, now, now.Add(-lastUsedEvery)); err != nil {
		return fmt.Errorf("record api key %d use: %w", keyID, err)
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
