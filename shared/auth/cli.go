package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// CLI device login (RFC 8628's shape, the original's routes): the CLI
// creates a session and shows its user code; the user opens the
// verification page signed in and approves it; the CLI, polling with its
// device code, receives a new API key once. A session lives CLISessionTTL.
const (
	CLISessionTTL      = 10 * time.Minute
	CLIPollInterval    = 5 // seconds
	CLIVerificationURI = "/auth/cli/authorize"
	defaultCLIKeyName  = "yuxi-cli"
	userCodeAlphabet   = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789" // no 0/O, 1/I
)

// CLISessionCreated is what the CLI gets: it keeps device_code secret and
// shows user_code.
type CLISessionCreated struct {
	DeviceCode      string `json:"device_code"`
	UserCode        string `json:"user_code"`
	VerificationURI string `json:"verification_uri"`
	ExpiresIn       int    `json:"expires_in"`
	Interval        int    `json:"interval"`
}

// CLISession is a session as the approving browser sees it.
type CLISession struct {
	UserCode   string     `json:"user_code"`
	Status     string     `json:"status"`
	KeyName    string     `json:"key_name"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	ApprovedAt *time.Time `json:"approved_at"`
}

// CLIToken is the exchange's answer: a new API key, its secret, its user.
type CLIToken struct {
	APIKey APIKey `json:"api_key"`
	Secret string `json:"secret"`
	User   User   `json:"user"`
}

// Device-flow errors, coded as RFC 8628 names them.
var (
	ErrCLISessionNotFound   = failure.NotFound("cli_session_not_found", "CLI login session not found")
	ErrAuthorizationPending = failure.Invalid("authorization_pending", "the CLI login is not approved yet")
	ErrCLIExpired           = failure.Invalid("expired_token", "the CLI login session has expired; start again")
	ErrCLIUsed              = failure.Invalid("invalid_grant", "the device code is unknown or already used")
)

func hashCode(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func newUserCode() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, userCodeAlphabet[int(c)%len(userCodeAlphabet)])
	}
	return string(out), nil
}

// CreateCLISessionFrom is CreateCLISession for a request from client (the
// client address): creations are limited per address like login attempts
// (Config.LoginLimiter, its own window under "cli-session:"), 429
// too_many_cli_sessions past it — anyone may create sessions, so without a
// limit one address could fill cli_auth_sessions.
func (s *Service) CreateCLISessionFrom(ctx context.Context, keyName *string, client string) (CLISessionCreated, error) {
	if s.cfg.LoginLimiter != nil {
		ok, retry, err := s.cfg.LoginLimiter.Allow(ctx, "cli-session:"+client)
		if err == nil && !ok { // a failing limiter (Redis down) lets the call through
			secs := max(int64((retry+time.Second-1)/time.Second), 1)
			return CLISessionCreated{}, failure.New(failure.KindTooMany, "too_many_cli_sessions",
				"too many CLI login sessions from this address; retry in %d seconds", secs).
				With(map[string]any{"retry_after_seconds": strconv.FormatInt(secs, 10)})
		}
	}
	return s.CreateCLISession(ctx, keyName)
}

// CreateCLISession starts a device login.
func (s *Service) CreateCLISession(ctx context.Context, keyName *string) (CLISessionCreated, error) {
	name := defaultCLIKeyName
	if keyName != nil && strings.TrimSpace(*keyName) != "" {
		name = strings.TrimSpace(*keyName)
		if utf8.RuneCountInString(name) > maxAPIKeyName || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
			return CLISessionCreated{}, failure.Unprocessable("invalid_name", "key_name must be 1 to %d characters", maxAPIKeyName)
		}
	}
	dc, err := randomBytes(32)
	if err != nil {
		return CLISessionCreated{}, err
	}
	device := hex.EncodeToString(dc)
	now := s.now()
	for range 5 { // a user code collision is retried with a new code
		code, err := newUserCode()
		if err != nil {
			return CLISessionCreated{}, err
		}
		_, err = s.pool.Exec(ctx, `INSERT INTO cli_auth_sessions (device_code_hash, user_code, key_name, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5)`, hashCode(device), code, name, now, now.Add(CLISessionTTL))
		if postgres.IsUniqueViolation(err, "cli_auth_sessions_user_code_key") {
			continue
		}
		if err != nil {
			return CLISessionCreated{}, fmt.Errorf("create cli session: %w", err)
		}
		// Sessions long past expiry are only clutter; drop a few on the way.
		_, _ = s.pool.Exec(ctx, `DELETE FROM cli_auth_sessions WHERE id IN
			(SELECT id FROM cli_auth_sessions WHERE expires_at < $1 LIMIT 100)`, now.Add(-24*time.Hour))
		return CLISessionCreated{DeviceCode: device, UserCode: code, VerificationURI: CLIVerificationURI,
			ExpiresIn: int(CLISessionTTL / time.Second), Interval: CLIPollInterval}, nil
	}
	return CLISessionCreated{}, errors.New("create cli session: no free user code")
}

// normalizeUserCode upper-cases a user code; anything that cannot be one
// becomes "" (found nowhere).
func normalizeUserCode(code string) string {
	code = strings.ToUpper(strings.TrimSpace(code))
	if len(code) != 9 || code[4] != '-' {
		return ""
	}
	for i := range len(code) {
		if i != 4 && !strings.ContainsRune(userCodeAlphabet, rune(code[i])) {
			return ""
		}
	}
	return code
}

type cliRow struct {
	id             int64
	status         string
	keyName        string
	approvedUserID *int64
	created        time.Time
	expires        time.Time
	approved       *time.Time
}

func (r cliRow) view(code string, now time.Time) CLISession {
	status := r.status
	if status != "consumed" && !now.Before(r.expires) {
		status = "expired"
	}
	return CLISession{UserCode: code, Status: status, KeyName: r.keyName, CreatedAt: r.created.UTC(), ExpiresAt: r.expires.UTC(), ApprovedAt: utcPtr(r.approved)}
}

const cliSelect = `SELECT id, status, key_name, approved_user_id, created_at, expires_at, approved_at FROM cli_auth_sessions `

func scanCLI(row pgx.Row) (cliRow, error) {
	var r cliRow
	err := row.Scan(&r.id, &r.status, &r.keyName, &r.approvedUserID, &r.created, &r.expires, &r.approved)
	return r, err
}

// GetCLISession shows a session to a signed-in user about to approve it.
// A session approved by someone else is not found for the caller.
func (s *Service) GetCLISession(ctx context.Context, p Principal, userCode string) (CLISession, error) {
	code := normalizeUserCode(userCode)
	r, err := scanCLI(s.pool.QueryRow(ctx, cliSelect+`WHERE user_code = $1`, code))
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && r.approvedUserID != nil && *r.approvedUserID != p.UserID) {
		return CLISession{}, ErrCLISessionNotFound
	}
	if err != nil {
		return CLISession{}, fmt.Errorf("get cli session: %w", err)
	}
	return r.view(code, s.now()), nil
}

// ApproveCLISession lets the caller's account back the CLI's new API key.
// Only a pending, unexpired session can be approved, by a signed-in person:
// an API key or an impersonation token cannot approve.
func (s *Service) ApproveCLISession(ctx context.Context, p Principal, userCode string) (CLISession, error) {
	if p.APIKeyID != nil || p.ImpersonatorID != nil {
		return CLISession{}, failure.Forbidden("cli_approval_forbidden", "approve a CLI login signed in with your password or SSO")
	}
	code := normalizeUserCode(userCode)
	var out CLISession
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := scanCLI(tx.QueryRow(ctx, cliSelect+`WHERE user_code = $1 FOR UPDATE`, code))
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && r.approvedUserID != nil && *r.approvedUserID != p.UserID) {
			return ErrCLISessionNotFound
		}
		if err != nil {
			return err
		}
		now := s.now()
		if !now.Before(r.expires) {
			return ErrCLIExpired
		}
		switch r.status {
		case "approved":
			out = r.view(code, now) // approving twice is a no-op
			return nil
		case "consumed":
			return ErrCLIUsed
		}
		if _, err := tx.Exec(ctx, `UPDATE cli_auth_sessions SET status = 'approved', approved_user_id = $2, approved_at = $3
			WHERE id = $1`, r.id, p.UserID, now); err != nil {
			return err
		}
		r.status, r.approved = "approved", &now
		out = r.view(code, now)
		return nil
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return CLISession{}, err
		}
		return CLISession{}, fmt.Errorf("approve cli session: %w", err)
	}
	return out, nil
}

// ExchangeCLISession gives the CLI its API key, once. The key's request id
// is derived from the session, so a crash between creating the key and
// marking the session consumed is retried safely; of concurrent exchanges
// only the one that marks the session consumed gets the secret.
func (s *Service) ExchangeCLISession(ctx context.Context, deviceCode string) (CLIToken, error) {
	if len(deviceCode) != 64 || !isLowerHex(deviceCode) {
		return CLIToken{}, ErrCLIUsed
	}
	r, err := scanCLI(s.pool.QueryRow(ctx, cliSelect+`WHERE device_code_hash = $1`, hashCode(deviceCode)))
	if errors.Is(err, pgx.ErrNoRows) {
		return CLIToken{}, ErrCLIUsed
	}
	if err != nil {
		return CLIToken{}, fmt.Errorf("exchange cli session: %w", err)
	}
	now := s.now()
	switch {
	case r.status == "consumed":
		return CLIToken{}, ErrCLIUsed
	case !now.Before(r.expires):
		return CLIToken{}, ErrCLIExpired
	case r.status == "pending" || r.approvedUserID == nil:
		return CLIToken{}, ErrAuthorizationPending
	}
	u, err := s.loadUser(ctx, s.pool, *r.approvedUserID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && u.IsDeleted) {
		return CLIToken{}, ErrCLIUsed
	}
	if err != nil {
		return CLIToken{}, fmt.Errorf("load approving user: %w", err)
	}
	key, err := s.CreateAPIKey(ctx, u.principal(), NewAPIKey{RequestID: "cli-session-" + strconv.FormatInt(r.id, 10), Name: r.keyName})
	if err != nil {
		return CLIToken{}, err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE cli_auth_sessions SET status = 'consumed', consumed_at = $2, api_key_id = $3
		WHERE id = $1 AND status = 'approved' AND expires_at > $2`, r.id, now, key.APIKey.ID)
	if err != nil {
		return CLIToken{}, fmt.Errorf("consume cli session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return CLIToken{}, ErrCLIUsed
	}
	return CLIToken{APIKey: key.APIKey, Secret: key.Secret, User: u.User}, nil
}
