package oidc_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/oidc"
	"github.com/yuxi-serverless/yuxi/shared/oidc/oidctest"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

type env struct {
	pool *pgxpool.Pool
	auth *auth.Service
	idp  *oidctest.Provider
	svc  *oidc.Service
}

func newEnv(t *testing.T, pol auth.ExternalPolicy) env {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	a, err := auth.NewService(pool, auth.Config{JWTSecret: bytes.Repeat([]byte("j"), 32), APIKeySecret: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	idp := oidctest.Start(t, "yuxi-client", "yuxi-secret")
	cfg := oidc.Config{Enabled: true, ProviderName: "Test SSO", IssuerURL: idp.URL, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
		RedirectURI: "http://yuxi.test/api/auth/oidc/callback", Policy: pol}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return env{pool: pool, auth: a, idp: idp, svc: oidc.New(cfg, pool, a, oidc.Options{})}
}

// login runs one browser round: login URL → provider → callback, and
// returns the URL the callback sends the browser to.
func (e env) login(t *testing.T, person oidctest.Person) *url.URL {
	t.Helper()
	ctx := context.Background()
	e.idp.SignIn(person)
	loginURL, err := e.svc.LoginURL(ctx, "/chat")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(loginURL, e.idp.URL+"/authorize?") || !strings.Contains(loginURL, "nonce=") {
		t.Fatalf("login url %s", loginURL)
	}
	back := e.idp.Authorize(t, loginURL)
	u, err := url.Parse(e.svc.Callback(ctx, back.Get("code"), back.Get("state"), back.Get("error")))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (e env) exchange(t *testing.T, u *url.URL) auth.TokenResponse {
	t.Helper()
	if u.Path != oidc.FrontendCallbackPath || u.Query().Get("code") == "" {
		t.Fatalf("callback sent the browser to %s, want %s?code=…", u, oidc.FrontendCallbackPath)
	}
	tok, err := e.svc.ExchangeCode(context.Background(), u.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (e env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOIDCLoginCreatesUserOnceAndCodesAreSingleUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, auth.ExternalPolicy{AutoCreateUser: true, DefaultDepartment: "SSO users"})
	ctx := context.Background()
	alice := oidctest.Person{Subject: "sub-alice", Claims: map[string]any{"preferred_username": "alice", "name": "Alice A."}}

	u := e.login(t, alice)
	tok := e.exchange(t, u)
	if tok.Username != "Alice A." || tok.Role != auth.RoleUser || tok.DepartmentName == nil || *tok.DepartmentName != "SSO users" {
		t.Fatalf("token response %+v", tok)
	}
	p, err := e.auth.Authenticate(ctx, "Bearer "+tok.AccessToken)
	if err != nil || p.UserID != tok.UserID {
		t.Fatalf("the issued token does not authenticate: %v %+v", err, p)
	}
	// The login code is single use.
	if _, err := e.svc.ExchangeCode(ctx, u.Query().Get("code")); err == nil {
		t.Fatal("a login code was exchanged twice")
	}
	// The same subject signs in as the same user.
	if again := e.exchange(t, e.login(t, alice)); again.UserID != tok.UserID {
		t.Fatalf("second login: user %d, want %d", again.UserID, tok.UserID)
	}
	if n := e.count(t, `SELECT count(*) FROM users WHERE uid LIKE 'oidc-%'`); n != 1 {
		t.Fatalf("%d oidc users, want 1", n)
	}
	// A state is single use too: replaying the provider's redirect fails.
	e.idp.SignIn(alice)
	loginURL, _ := e.svc.LoginURL(ctx, "/")
	back := e.idp.Authorize(t, loginURL)
	first := e.svc.Callback(ctx, back.Get("code"), back.Get("state"), "")
	second := e.svc.Callback(ctx, back.Get("code"), back.Get("state"), "")
	if !strings.HasPrefix(first, oidc.FrontendCallbackPath) || !strings.HasPrefix(second, oidc.FrontendLoginPath+"?oidc_error=") {
		t.Fatalf("replayed callback: first %s, second %s", first, second)
	}
}

func TestOIDCRefusesTamperedIDTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, auth.ExternalPolicy{AutoCreateUser: true})
	mallory := oidctest.Person{Subject: "sub-mallory", Claims: map[string]any{"preferred_username": "mallory"}}
	for _, c := range []struct {
		name string
		t    oidctest.Tamper
	}{
		{"wrong audience", oidctest.Tamper{Audience: "another-client"}},
		{"wrong nonce", oidctest.Tamper{Nonce: "not-the-nonce"}},
		{"expired", oidctest.Tamper{ExpiresIn: -time.Minute}},
		{"wrong issuer", oidctest.Tamper{Issuer: "https://evil.example"}},
		{"unknown signing key", oidctest.Tamper{Resign: true}},
	} {
		e.idp.TamperNext(c.t)
		u := e.login(t, mallory)
		if u.Path != oidc.FrontendLoginPath || u.Query().Get("oidc_error") == "" {
			t.Errorf("%s: callback sent the browser to %s, want the login page with an error", c.name, u)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM users`); n != 0 {
		t.Fatalf("%d users created from refused tokens", n)
	}
	if n := e.count(t, `SELECT count(*) FROM oidc_login_codes`); n != 0 {
		t.Fatalf("%d login codes issued for refused tokens", n)
	}
	// The same flow untampered succeeds: the refusals were the tampering.
	e.idp.TamperNext(oidctest.Tamper{})
	e.exchange(t, e.login(t, mallory))
}

func TestOIDCRawUsernameBindsOnceAndDepartmentsFollowClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t, auth.ExternalPolicy{UseRawUsername: true, AutoCreateUser: true, FetchDepartment: true, DefaultDepartment: "SSO users"})
	ctx := context.Background()
	root, err := e.auth.Initialize(ctx, "root", "correct horse battery", "")
	if err != nil {
		t.Fatal(err)
	}
	rootP, _ := e.auth.Authenticate(ctx, "Bearer "+root.AccessToken)
	carol, err := e.auth.CreateUser(ctx, rootP, auth.NewUser{UID: "carol", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	// The first subject naming carol is bound to her account.
	tok := e.exchange(t, e.login(t, oidctest.Person{Subject: "sub-carol", Claims: map[string]any{"preferred_username": "carol"}}))
	if tok.UserID != carol.ID {
		t.Fatalf("raw username login: user %d, want carol %d", tok.UserID, carol.ID)
	}
	// Another subject claiming the same username is refused.
	u := e.login(t, oidctest.Person{Subject: "sub-impostor", Claims: map[string]any{"preferred_username": "carol"}})
	if u.Path != oidc.FrontendLoginPath {
		t.Fatalf("an impostor subject signed in as carol: %s", u)
	}
	// carol's subject cannot come back under another username.
	u = e.login(t, oidctest.Person{Subject: "sub-carol", Claims: map[string]any{"preferred_username": "root"}})
	if u.Path != oidc.FrontendLoginPath {
		t.Fatalf("a bound subject switched accounts: %s", u)
	}
	// A new person lands in the department the claims name, created once.
	dave := e.exchange(t, e.login(t, oidctest.Person{Subject: "sub-dave", Claims: map[string]any{"preferred_username": "dave",
		"department": "  Research  ", "department_description": "R&D"}}))
	if dave.DepartmentName == nil || *dave.DepartmentName != "Research" {
		t.Fatalf("dave's department %+v", dave.DepartmentName)
	}
	erin := e.exchange(t, e.login(t, oidctest.Person{Subject: "sub-erin", Claims: map[string]any{"preferred_username": "erin", "department": "Research"}}))
	if *erin.DepartmentID != *dave.DepartmentID {
		t.Fatal("a second Research department was created")
	}
	// Without a department claim: the default department.
	frank := e.exchange(t, e.login(t, oidctest.Person{Subject: "sub-frank", Claims: map[string]any{"preferred_username": "frank"}}))
	if frank.DepartmentName == nil || *frank.DepartmentName != "SSO users" {
		t.Fatalf("frank's department %+v", frank.DepartmentName)
	}
}

func TestOIDCWithoutAutoCreateRefusesStrangers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, auth.ExternalPolicy{AutoCreateUser: false})
	u := e.login(t, oidctest.Person{Subject: "sub-x", Claims: map[string]any{"preferred_username": "x"}})
	if u.Path != oidc.FrontendLoginPath || !strings.Contains(u.Query().Get("oidc_error"), "no account") {
		t.Fatalf("stranger: %s", u)
	}
}
