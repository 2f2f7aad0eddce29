package auth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Login throttling (issue 9, finding 2). Failed logins are counted per
// (login as typed, client address) in login_throttle: LockThreshold failures
// lock that pair for LockDuration, and each further failure after a lock
// doubles it (up to MaxLockDuration). A lock never touches the account
// itself: its owner logs in from another address, and existing sessions and
// API keys keep working. Unknown logins are counted and locked the same way
// and answer the same error, so the answers reveal nothing about which
// accounts exist. A per-address limit on login attempts (any login) sits in
// front: Config.LoginLimiter, a Redis window in production.

// MaxLockDuration caps the backoff.
const MaxLockDuration = time.Hour

// throttleForget: a pair without a failure for this long starts over.
const throttleForget = 24 * time.Hour

// LoginLimiter bounds login attempts per client address across every login.
type LoginLimiter interface {
	// Allow counts one attempt by key; when the window's budget is spent it
	// answers false and how long until the next attempt may pass.
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
}

// ErrLoginLocked builds the one answer for a locked (login, address) pair,
// whether or not the account exists.
func loginLockedError(remaining time.Duration) error {
	secs := max(int64((remaining+time.Second-1)/time.Second), 1)
	return failure.New(failure.KindLocked, "account_locked", "too many failed logins; retry in %d seconds", secs).
		With(map[string]any{"retry_after_seconds": strconv.FormatInt(secs, 10)})
}

func throttleKey(login string) string { return strings.ToLower(strings.TrimSpace(login)) }

// throttleState reads the pair's lock, locking its row when it exists.
func throttleState(ctx context.Context, tx pgx.Tx, login, client string, now time.Time) (lockedFor time.Duration, err error) {
	var until *time.Time
	err = tx.QueryRow(ctx, `SELECT locked_until FROM login_throttle WHERE login = $1 AND client = $2 FOR UPDATE`,
		login, client).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read login throttle: %w", err)
	}
	if until != nil && until.After(now) {
		return until.Sub(now), nil
	}
	return 0, nil
}

// throttleFail counts a failure of the pair and returns the lock it earns
// (0: none yet).
func (s *Service) throttleFail(ctx context.Context, tx pgx.Tx, login, client string, now time.Time) (time.Duration, error) {
	var n int
	err := tx.QueryRow(ctx, `INSERT INTO login_throttle AS t (login, client, failed_count, updated_at) VALUES ($1, $2, 1, $3)
		ON CONFLICT (login, client) DO UPDATE SET
			failed_count = CASE WHEN t.updated_at < $3 - $4::interval THEN 1 ELSE t.failed_count + 1 END,
			updated_at = $3
		RETURNING failed_count`, login, client, now, throttleForget.String()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count failed login: %w", err)
	}
	if n < s.cfg.LockThreshold {
		return 0, nil
	}
	d := s.cfg.LockDuration
	for i := s.cfg.LockThreshold; i < n && d < MaxLockDuration; i++ {
		d *= 2
	}
	d = min(d, MaxLockDuration)
	if _, err := tx.Exec(ctx, `UPDATE login_throttle SET locked_until = $3 WHERE login = $1 AND client = $2`,
		login, client, now.Add(d)); err != nil {
		return 0, fmt.Errorf("lock login: %w", err)
	}
	return d, nil
}

// throttleSucceed forgets the pair's failures.
func throttleSucceed(ctx context.Context, tx pgx.Tx, login, client string) error {
	_, err := tx.Exec(ctx, `DELETE FROM login_throttle WHERE login = $1 AND client = $2`, login, client)
	return err
}

// limitAddress applies the per-address attempt limit. A limiter that fails
// (Redis down) lets the attempt through: the per-pair lock still holds.
func (s *Service) limitAddress(ctx context.Context, client string) error {
	if s.cfg.LoginLimiter == nil {
		return nil
	}
	ok, retry, err := s.cfg.LoginLimiter.Allow(ctx, "login:"+client)
	if err != nil || ok {
		return nil
	}
	secs := max(int64((retry+time.Second-1)/time.Second), 1)
	return failure.New(failure.KindTooMany, "too_many_login_attempts", "too many login attempts from this address; retry in %d seconds", secs).
		With(map[string]any{"retry_after_seconds": strconv.FormatInt(secs, 10)})
}
