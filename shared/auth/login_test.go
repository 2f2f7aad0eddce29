package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

type loginState struct {
	failed      int
	lockedUntil *time.Time
	lastLogin   *time.Time
	lastFailed  *time.Time
}

func (f fixture) loginState(t *testing.T, uid string) loginState {
	t.Helper()
	var s loginState
	err := f.pool.QueryRow(context.Background(), `SELECT login_failed_count, login_locked_until, last_login, last_failed_login
		FROM users WHERE uid = $1`, uid).Scan(&s.failed, &s.lockedUntil, &s.lastLogin, &s.lastFailed)
	if err != nil {
		t.Fatalf("read login state of %s: %v", uid, err)
	}
	return s
}

func TestLoginLocksThePairWithBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	f.user(t, admin, "alice")
	const attacker, home = "203.0.113.9", "198.51.100.7"

	for i := 1; i < auth.DefaultLockThreshold; i++ {
		_, err := f.svc.LoginFrom(ctx, "alice", "wrong", attacker)
		wantCode(t, err, failure.KindUnauthorized, "invalid_credentials")
	}
	// The failure that reaches the threshold locks (alice, attacker).
	_, err := f.svc.LoginFrom(ctx, "alice", "wrong", attacker)
	fe := wantCode(t, err, failure.KindLocked, "account_locked")
	if fe.Details["retry_after_seconds"] != "300" {
		t.Fatalf("first lock: %v", fe.Details)
	}
	// Even the right password from that address is refused while locked.
	f.clock.Advance(100 * time.Second)
	_, err = f.svc.LoginFrom(ctx, "alice", testPassword, attacker)
	wantCode(t, err, failure.KindLocked, "account_locked")
	// Alice from her own address is not locked out, and the account is not locked.
	if _, err := f.svc.LoginFrom(ctx, "alice", testPassword, home); err != nil {
		t.Fatalf("alice from another address: %v", err)
	}
	if st := f.loginState(t, "alice"); st.lockedUntil != nil {
		t.Fatalf("the account itself was locked until %v", st.lockedUntil)
	}
	// Backoff: after the lock, each further failure doubles it.
	f.clock.Advance(201 * time.Second)
	_, err = f.svc.LoginFrom(ctx, "alice", "wrong", attacker)
	fe = wantCode(t, err, failure.KindLocked, "account_locked")
	if fe.Details["retry_after_seconds"] != "600" {
		t.Fatalf("second lock: %v, want 600 s", fe.Details)
	}
	f.clock.Advance(601 * time.Second)
	_, err = f.svc.LoginFrom(ctx, "alice", "wrong", attacker)
	fe = wantCode(t, err, failure.KindLocked, "account_locked")
	if fe.Details["retry_after_seconds"] != "1200" {
		t.Fatalf("third lock: %v, want 1200 s", fe.Details)
	}
	// A success from the address (after the lock) forgets its failures.
	f.clock.Advance(1201 * time.Second)
	if _, err := f.svc.LoginFrom(ctx, "alice", testPassword, attacker); err != nil {
		t.Fatalf("right password after the lock: %v", err)
	}
	_, err = f.svc.LoginFrom(ctx, "alice", "wrong", attacker)
	wantCode(t, err, failure.KindUnauthorized, "invalid_credentials")
}

// Finding 2 of issue 9: failed logins by others never lock out existing
// sessions (on main five wrong passwords made alice's token answer 423).
func TestFailedLoginsByOthersKeepSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	f.user(t, admin, "bob")
	tok, err := f.svc.Login(ctx, "bob", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	for range auth.DefaultLockThreshold + 2 {
		_, _ = f.svc.LoginFrom(ctx, "bob", "wrong password", "203.0.113.9")
	}
	if p, err := f.svc.Authenticate(ctx, "Bearer "+tok.AccessToken); err != nil || p.UID != "bob" {
		t.Fatalf("bob's session after strangers' failures: %+v %v", p, err)
	}
}

// Unknown and locked accounts answer alike: the same status, code, message
// and retry-after (on main only real accounts ever answered 423).
func TestLockedAndUnknownAnswerAlike(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	f.user(t, admin, "carol")
	var last [2]error
	for i := range auth.DefaultLockThreshold + 1 {
		_, e1 := f.svc.LoginFrom(ctx, "carol", "wrong", "203.0.113.9")
		_, e2 := f.svc.LoginFrom(ctx, "nobody-here", "wrong", "203.0.113.9")
		f1, _ := failure.As(e1)
		f2, _ := failure.As(e2)
		if f1 == nil || f2 == nil || f1.Kind != f2.Kind || f1.Code != f2.Code || f1.Message != f2.Message ||
			f1.Details["retry_after_seconds"] != f2.Details["retry_after_seconds"] {
			t.Fatalf("attempt %d: real account %v, unknown %v", i+1, e1, e2)
		}
		last = [2]error{e1, e2}
	}
	wantCode(t, last[1], failure.KindLocked, "account_locked")
}

type fakeLimiter struct{ n, limit int }

func (l *fakeLimiter) Allow(context.Context, string) (bool, time.Duration, error) {
	l.n++
	return l.n <= l.limit, 42 * time.Second, nil
}

func TestLoginAddressLimit(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	lim := &fakeLimiter{limit: 2}
	svc, err := auth.NewService(pool, auth.Config{JWTSecret: testJWTSecret, APIKeySecret: testAPIKeySecret, LoginLimiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		_, err := svc.LoginFrom(ctx, "x", "y", "203.0.113.9")
		wantCode(t, err, failure.KindUnauthorized, "invalid_credentials")
	}
	_, err = svc.LoginFrom(ctx, "x", "y", "203.0.113.9")
	fe := wantCode(t, err, failure.KindTooMany, "too_many_login_attempts")
	if fe.Details["retry_after_seconds"] != "42" {
		t.Fatalf("retry after: %v", fe.Details)
	}
}

func TestLoginUnknownUserLooksLikeWrongPassword(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	f.user(t, admin, "carol")

	_, errUnknown := f.svc.Login(ctx, "nobody", testPassword)
	_, errWrong := f.svc.Login(ctx, "carol", "wrong password")
	a := wantCode(t, errUnknown, failure.KindUnauthorized, "invalid_credentials")
	b := wantCode(t, errWrong, failure.KindUnauthorized, "invalid_credentials")
	if a.Message != b.Message {
		t.Fatalf("messages differ: %q vs %q", a.Message, b.Message)
	}
	_, err := f.svc.Login(ctx, "", "")
	wantCode(t, err, failure.KindUnprocessable, "missing_credentials")
}

func TestLoginByPhoneNumber(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	phone := "13800138000"
	if _, err := f.svc.CreateUser(ctx, admin, auth.NewUser{UID: "dave", Password: testPassword, PhoneNumber: &phone}); err != nil {
		t.Fatal(err)
	}
	tok, err := f.svc.Login(ctx, phone, testPassword)
	if err != nil {
		t.Fatalf("login by phone: %v", err)
	}
	if tok.UID != "dave" || tok.PhoneNumber == nil || *tok.PhoneNumber != phone {
		t.Fatalf("token response = %+v", tok)
	}
}

// keyedLimiter admits limit calls per key.
type keyedLimiter struct {
	limit int
	n     map[string]int
}

func (l *keyedLimiter) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	l.n[key]++
	return l.n[key] <= l.limit, 30 * time.Second, nil
}

// CLI session creation is public: it is limited per client address (issue 9).
func TestCLISessionCreationIsRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	lim := &keyedLimiter{limit: 2, n: map[string]int{}}
	svc, err := auth.NewService(pool, auth.Config{JWTSecret: testJWTSecret, APIKeySecret: testAPIKeySecret, LoginLimiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := svc.CreateCLISessionFrom(ctx, nil, "203.0.113.9"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = svc.CreateCLISessionFrom(ctx, nil, "203.0.113.9")
	fe := wantCode(t, err, failure.KindTooMany, "too_many_cli_sessions")
	if fe.Details["retry_after_seconds"] != "30" {
		t.Fatalf("retry after: %v", fe.Details)
	}
	if _, err := svc.CreateCLISessionFrom(ctx, nil, "198.51.100.7"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM cli_auth_sessions`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d sessions stored (%v), want 3", n, err)
	}
	// Logins from the limited address have their own budget.
	_, err = svc.LoginFrom(ctx, "x", "y", "203.0.113.9")
	wantCode(t, err, failure.KindUnauthorized, "invalid_credentials")
}
