package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
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

func TestLoginLocksAfterThresholdAndExpiredLockResets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	f.user(t, admin, "alice") // logs in once
	firstLogin := f.loginState(t, "alice").lastLogin

	for i := 1; i < auth.DefaultLockThreshold; i++ {
		_, err := f.svc.Login(ctx, "alice", "wrong password")
		wantCode(t, err, failure.KindUnauthorized, "invalid_credentials")
		if got := f.loginState(t, "alice"); got.failed != i || got.lockedUntil != nil {
			t.Fatalf("after %d failures: count=%d locked=%v", i, got.failed, got.lockedUntil)
		}
	}
	// The failure that reaches the threshold locks the account.
	_, err := f.svc.Login(ctx, "alice", "wrong password")
	fe := wantCode(t, err, failure.KindLocked, "account_locked")
	if fe.Details["retry_after_seconds"] != "300" {
		t.Fatalf("retry_after_seconds = %v, want \"300\"", fe.Details["retry_after_seconds"])
	}
	st := f.loginState(t, "alice")
	if st.failed != auth.DefaultLockThreshold || st.lockedUntil == nil || !st.lockedUntil.Equal(f.clock.Now().Add(auth.DefaultLockDuration)) {
		t.Fatalf("locked state: count=%d until=%v", st.failed, st.lockedUntil)
	}

	// While locked, even the right password is refused, and tokens too.
	f.clock.Advance(100 * time.Second)
	_, err = f.svc.Login(ctx, "alice", testPassword)
	fe = wantCode(t, err, failure.KindLocked, "account_locked")
	if fe.Details["retry_after_seconds"] != "200" {
		t.Fatalf("retry_after_seconds = %v, want \"200\"", fe.Details["retry_after_seconds"])
	}
	if got := f.loginState(t, "alice").lastLogin; got == nil || !got.Equal(*firstLogin) {
		t.Fatalf("a login while locked moved last_login to %v", got)
	}

	// After the lock expires the counter starts over: one failure is 1, not 6.
	f.clock.Advance(201 * time.Second)
	_, err = f.svc.Login(ctx, "alice", "wrong password")
	wantCode(t, err, failure.KindUnauthorized, "invalid_credentials")
	if st := f.loginState(t, "alice"); st.failed != 1 || st.lockedUntil != nil {
		t.Fatalf("after expiry + one failure: count=%d until=%v", st.failed, st.lockedUntil)
	}

	// Success resets the counter and records last_login.
	tok, err := f.svc.Login(ctx, "alice", testPassword)
	if err != nil {
		t.Fatalf("login after expiry: %v", err)
	}
	st = f.loginState(t, "alice")
	if st.failed != 0 || st.lastLogin == nil || !st.lastLogin.Equal(f.clock.Now()) {
		t.Fatalf("after success: count=%d last_login=%v", st.failed, st.lastLogin)
	}
	if tok.TokenType != "bearer" || tok.UID != "alice" || tok.Role != auth.RoleUser || tok.DepartmentName == nil || *tok.DepartmentName != "default" {
		t.Fatalf("token response = %+v", tok)
	}
}

func TestLockedUserTokenIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	f.user(t, admin, "bob")
	tok, err := f.svc.Login(ctx, "bob", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	for range auth.DefaultLockThreshold {
		_, _ = f.svc.Login(ctx, "bob", "wrong password")
	}
	_, err = f.svc.Authenticate(ctx, "Bearer "+tok.AccessToken)
	wantCode(t, err, failure.KindLocked, "account_locked")

	f.clock.Advance(auth.DefaultLockDuration + time.Second)
	if p, err := f.svc.Authenticate(ctx, "Bearer "+tok.AccessToken); err != nil || p.UID != "bob" {
		t.Fatalf("token after lock expiry: %+v %v", p, err)
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
