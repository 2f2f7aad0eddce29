package auth_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// testClock is a controllable clock for lockout, expiry and throttling.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Now().UTC().Truncate(time.Second)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var (
	testJWTSecret    = bytes.Repeat([]byte("j"), 32)
	testAPIKeySecret = bytes.Repeat([]byte("k"), 32)
)

type fixture struct {
	svc   *auth.Service
	pool  *pgxpool.Pool
	clock *testClock
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	clock := newTestClock()
	svc, err := auth.NewService(pool, auth.Config{JWTSecret: testJWTSecret, APIKeySecret: testAPIKeySecret, Now: clock.Now})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return fixture{svc: svc, pool: pool, clock: clock}
}

const testPassword = "correct horse battery"

// superadmin initializes the instance and returns the superadmin principal.
func (f fixture) superadmin(t *testing.T) auth.Principal {
	t.Helper()
	ctx := context.Background()
	tok, err := f.svc.Initialize(ctx, "root", testPassword, "Root")
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	p, err := f.svc.Authenticate(ctx, "Bearer "+tok.AccessToken)
	if err != nil {
		t.Fatalf("Authenticate superadmin: %v", err)
	}
	return p
}

// user creates a plain user as admin and returns its principal.
func (f fixture) user(t *testing.T, admin auth.Principal, uid string) auth.Principal {
	t.Helper()
	ctx := context.Background()
	if _, err := f.svc.CreateUser(ctx, admin, auth.NewUser{UID: uid, Password: testPassword}); err != nil {
		t.Fatalf("CreateUser %s: %v", uid, err)
	}
	return f.loginPrincipal(t, uid)
}

// loginPrincipal logs uid in with testPassword and authenticates the token.
func (f fixture) loginPrincipal(t *testing.T, uid string) auth.Principal {
	t.Helper()
	ctx := context.Background()
	tok, err := f.svc.Login(ctx, uid, testPassword)
	if err != nil {
		t.Fatalf("login %s: %v", uid, err)
	}
	p, err := f.svc.Authenticate(ctx, "Bearer "+tok.AccessToken)
	if err != nil {
		t.Fatalf("authenticate %s: %v", uid, err)
	}
	return p
}

func (f fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// wantCode fails unless err is a coded failure with this kind and code.
func wantCode(t *testing.T, err error, kind failure.Kind, code string) *failure.Error {
	t.Helper()
	fe, ok := failure.As(err)
	if !ok {
		t.Fatalf("want %s, got uncoded error %v", code, err)
	}
	if fe.Kind != kind || fe.Code != code {
		t.Fatalf("want kind %d code %s, got kind %d code %s (%s)", kind, code, fe.Kind, fe.Code, fe.Message)
	}
	return fe
}
