package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/clientaddr"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// authAPI is the intake API over a fresh database, for the auth and API key
// route tests.
type authAPI struct {
	t    *testing.T
	srv  *httptest.Server
	svc  *auth.Service
	pool *pgxpool.Pool
}

const authAPIPassword = "correct horse battery"

func newAuthAPI(t *testing.T) authAPI {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	svc, err := auth.NewService(pool, auth.Config{
		JWTSecret:    bytes.Repeat([]byte("j"), 32),
		APIKeySecret: bytes.Repeat([]byte("k"), 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(intake.New(intake.Deps{Auth: svc}).Handler())
	t.Cleanup(srv.Close)
	return authAPI{t: t, srv: srv, svc: svc, pool: pool}
}

type authAPIResp struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// errorCode is the machine-readable code of an error response.
func (r authAPIResp) errorCode() string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// call sends a request; body is sent as is with contentType (JSON when empty).
func (a authAPI) call(method, path, token, contentType, body string) authAPIResp {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := authAPIResp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func (a authAPI) login(username, password string) authAPIResp {
	a.t.Helper()
	form := url.Values{"username": {username}, "password": {password}}
	return a.call(http.MethodPost, "/api/auth/token", "", "application/x-www-form-urlencoded", form.Encode())
}

// initRoot makes the first superadmin through the service and returns its token.
func (a authAPI) initRoot() string {
	a.t.Helper()
	tok, err := a.svc.Initialize(context.Background(), "root", authAPIPassword, "Root")
	if err != nil {
		a.t.Fatal(err)
	}
	return tok.AccessToken
}

// addUser creates a plain user through the service and returns its token.
func (a authAPI) addUser(rootToken, uid string) string {
	a.t.Helper()
	ctx := context.Background()
	root, err := a.svc.Authenticate(ctx, "Bearer "+rootToken)
	if err != nil {
		a.t.Fatal(err)
	}
	if _, err := a.svc.CreateUser(ctx, root, auth.NewUser{UID: uid, Password: authAPIPassword}); err != nil {
		a.t.Fatal(err)
	}
	tok, err := a.svc.Login(ctx, uid, authAPIPassword)
	if err != nil {
		a.t.Fatal(err)
	}
	return tok.AccessToken
}

func TestAuthRoutesFirstRunInitializeLoginMe(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)

	if r := a.call("GET", "/api/auth/check-first-run", "", "", ""); r.status != 200 || r.body["first_run"] != true {
		t.Fatalf("check-first-run on empty instance: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/initialize", "", "", `{"uid": "root",`); r.status != 400 || r.errorCode() != "invalid_json" {
		t.Fatalf("malformed JSON: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/initialize", "", "", `{"uid": "root", "password": "short"}`); r.status != 422 || r.errorCode() != "weak_password" {
		t.Fatalf("weak password: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/initialize", "", "", `{"uid": "no spaces", "password": "long enough pw"}`); r.status != 422 || r.errorCode() != "invalid_uid" {
		t.Fatalf("bad uid: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/check-first-run", "", "", ""); r.body["first_run"] != true {
		t.Fatal("a rejected initialize ended the first run")
	}

	r := a.call("POST", "/api/auth/initialize", "", "", `{"uid": "root", "password": "`+authAPIPassword+`", "username": "Root"}`)
	if r.status != 200 || r.body["access_token"] == "" || r.body["token_type"] != "bearer" || r.body["role"] != "superadmin" ||
		r.body["uid"] != "root" || r.body["username"] != "Root" || r.body["department_name"] != "default" {
		t.Fatalf("initialize: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/check-first-run", "", "", ""); r.body["first_run"] != false {
		t.Fatal("first_run still true after initialize")
	}
	if r := a.call("POST", "/api/auth/initialize", "", "", `{"uid": "again", "password": "`+authAPIPassword+`"}`); r.status != 409 || r.errorCode() != "already_initialized" {
		t.Fatalf("second initialize: %d %s", r.status, r.raw)
	}
	var users int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM users`).Scan(&users); err != nil || users != 1 {
		t.Fatalf("users = %d (%v), want 1", users, err)
	}

	login := a.login("root", authAPIPassword)
	if login.status != 200 || login.body["user_id"] == nil || login.body["role"] != "superadmin" {
		t.Fatalf("login: %d %s", login.status, login.raw)
	}
	token, _ := login.body["access_token"].(string)
	me := a.call("GET", "/api/auth/me", token, "", "")
	if me.status != 200 || me.body["uid"] != "root" || me.body["department_name"] != "default" || me.body["last_login"] == nil {
		t.Fatalf("me: %d %s", me.status, me.raw)
	}
	if strings.Contains(me.raw, "password") || strings.Contains(me.raw, "argon2") {
		t.Fatalf("profile leaks the password hash: %s", me.raw)
	}
	noAuth := a.call("GET", "/api/auth/me", "", "", "")
	if noAuth.status != 401 || noAuth.errorCode() != "not_authenticated" || noAuth.header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("me without token: %d %s", noAuth.status, noAuth.raw)
	}
	if r := a.call("GET", "/api/auth/me", "not-a-jwt", "", ""); r.status != 401 || r.errorCode() != "invalid_token" {
		t.Fatalf("me with garbage token: %d %s", r.status, r.raw)
	}
}

func TestAuthRoutesLoginFailuresAndLock(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	a.addUser(root, "alice")

	if r := a.call("POST", "/api/auth/token", "", "application/x-www-form-urlencoded", ""); r.status != 422 || r.errorCode() != "missing_credentials" {
		t.Fatalf("empty form: %d %s", r.status, r.raw)
	}
	unknown := a.login("nobody", authAPIPassword)
	if unknown.status != 401 || unknown.errorCode() != "invalid_credentials" {
		t.Fatalf("unknown user: %d %s", unknown.status, unknown.raw)
	}
	for i := 1; i < auth.DefaultLockThreshold; i++ {
		r := a.login("alice", "wrong password")
		if r.status != 401 || r.errorCode() != "invalid_credentials" || r.body["detail"] != unknown.body["detail"] {
			t.Fatalf("wrong password #%d: %d %s", i, r.status, r.raw)
		}
	}
	locked := a.login("alice", "wrong password")
	if locked.status != 423 || locked.errorCode() != "account_locked" ||
		locked.header.Get("X-Lock-Remaining") != "300" || locked.header.Get("Retry-After") != "300" {
		t.Fatalf("fifth failure: %d %v %s", locked.status, locked.header, locked.raw)
	}
	right := a.login("alice", authAPIPassword)
	if right.status != 423 || right.header.Get("X-Lock-Remaining") == "" {
		t.Fatalf("right password while locked: %d %s", right.status, right.raw)
	}
	// An unknown login from the same address answers exactly alike once it
	// has failed as often (issue 9, finding 2: no account oracle).
	var ghost authAPIResp
	for range auth.DefaultLockThreshold {
		ghost = a.login("nobody", "wrong password")
	}
	// Alike up to the seconds that passed between the two answers (a loaded
	// machine can cross a second boundary): same status, code, message shape
	// and a Retry-After within a second of the real account's.
	digits := regexp.MustCompile(`[0-9]+`)
	sameShape := func(a, b any) bool {
		return digits.ReplaceAllString(fmt.Sprint(a), "N") == digits.ReplaceAllString(fmt.Sprint(b), "N")
	}
	ghostAfter, _ := strconv.Atoi(ghost.header.Get("Retry-After"))
	lockedAfter, _ := strconv.Atoi(locked.header.Get("Retry-After"))
	if ghost.status != locked.status || ghost.errorCode() != locked.errorCode() || !sameShape(ghost.body["detail"], locked.body["detail"]) ||
		ghostAfter < lockedAfter-1 || ghostAfter > lockedAfter {
		t.Fatalf("unknown account: %d %v %s; locked one: %d %s", ghost.status, ghost.header, ghost.raw, locked.status, locked.raw)
	}
	// The lock is the (login, address) pair's, not the account's.
	var lockedUntilSet bool
	if err := a.pool.QueryRow(context.Background(), `SELECT login_locked_until IS NOT NULL FROM users WHERE uid = 'alice'`).
		Scan(&lockedUntilSet); err != nil {
		t.Fatal(err)
	}
	if lockedUntilSet {
		t.Fatal("the account itself was locked")
	}
}

// Behind a trusted proxy the client is the proxy's X-Forwarded-For hop: a
// stranger's failures lock the stranger's address only, alice still logs in
// from hers, and her existing session keeps working (on main it answered
// 423 too). Hops from an untrusted peer are ignored.
func TestAuthRoutesLockIsPerClientAddress(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	aliceTok := a.addUser(root, "alice")
	trusted, err := clientaddr.Parse("127.0.0.0/8, ::1")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(intake.New(intake.Deps{Auth: a.svc, ClientAddr: trusted}).Handler())
	t.Cleanup(srv.Close)
	loginFrom := func(xff, password string) *http.Response {
		t.Helper()
		form := url.Values{"username": {"alice"}, "password": {password}}
		req, _ := http.NewRequest("POST", srv.URL+"/api/auth/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", xff)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	var last *http.Response
	for range auth.DefaultLockThreshold {
		last = loginFrom("203.0.113.9", "wrong password")
	}
	if last.StatusCode != 423 || last.Header.Get("Retry-After") != "300" {
		t.Fatalf("stranger's fifth failure: %d %v", last.StatusCode, last.Header)
	}
	if r := loginFrom("198.51.100.7", authAPIPassword); r.StatusCode != 200 {
		t.Fatalf("alice from her own address: %d", r.StatusCode)
	}
	if r := a.call("GET", "/api/auth/me", aliceTok, "", ""); r.status != 200 {
		t.Fatalf("alice's session after the stranger's lock: %d %s", r.status, r.raw)
	}
	// Without trust (the default), X-Forwarded-For is the client's claim and
	// ignored: the stranger cannot rotate it to escape the lock.
	for i := range auth.DefaultLockThreshold {
		req, _ := http.NewRequest("POST", a.srv.URL+"/api/auth/token", strings.NewReader(url.Values{"username": {"alice"}, "password": {"wrong"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i+1))
		res, err := a.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		last = res
	}
	if last.StatusCode != 423 {
		t.Fatalf("rotating X-Forwarded-For without a trusted proxy escaped the lock: %d", last.StatusCode)
	}
}

func TestAuthRoutesUserAdministration(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()

	created := a.call("POST", "/api/auth/users", root, "", `{"uid": "alice", "username": "Alice", "password": "`+authAPIPassword+`", "phone_number": "13800000001"}`)
	if created.status != 200 || created.body["uid"] != "alice" || created.body["role"] != "user" || created.body["department_name"] != "default" {
		t.Fatalf("create user: %d %s", created.status, created.raw)
	}
	var hash string
	if err := a.pool.QueryRow(context.Background(), `SELECT password_hash FROM users WHERE uid = 'alice'`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$") || strings.Contains(created.raw, hash) {
		t.Fatalf("stored hash %q (or leaked in response)", hash)
	}
	if r := a.login("13800000001", authAPIPassword); r.status != 200 || r.body["uid"] != "alice" {
		t.Fatalf("new user logs in by phone: %d %s", r.status, r.raw)
	}

	if r := a.call("POST", "/api/auth/users", root, "", `{"uid": "alice", "password": "`+authAPIPassword+`"}`); r.status != 409 || r.errorCode() != "uid_taken" {
		t.Fatalf("duplicate uid: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/users", root, "", `{"uid": "x"`); r.status != 400 || r.errorCode() != "invalid_json" {
		t.Fatalf("malformed JSON: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/users", root, "", `{"uid": 5, "password": "`+authAPIPassword+`"}`); r.status != 422 {
		t.Fatalf("wrong type: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/users", root, "", `{"uid": "bob", "password": "short"}`); r.status != 422 || r.errorCode() != "weak_password" {
		t.Fatalf("weak password: %d %s", r.status, r.raw)
	}

	alice, _ := a.login("alice", authAPIPassword).body["access_token"].(string)
	for _, r := range []authAPIResp{
		a.call("POST", "/api/auth/users", alice, "", `{"uid": "mallory", "password": "`+authAPIPassword+`"}`),
		a.call("GET", "/api/auth/users", alice, "", ""),
	} {
		if r.status != 403 || r.errorCode() != "admin_required" {
			t.Fatalf("plain user on admin route: %d %s", r.status, r.raw)
		}
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM users WHERE uid IN ('bob', 'mallory', 'x')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused creates left %d users (%v)", n, err)
	}

	list := a.call("GET", "/api/auth/users?skip=0&limit=10", root, "", "")
	var users []map[string]any
	if err := json.Unmarshal([]byte(list.raw), &users); err != nil || list.status != 200 {
		t.Fatalf("list users: %d %s", list.status, list.raw)
	}
	if len(users) != 2 || users[0]["uid"] != "root" || users[1]["uid"] != "alice" {
		t.Fatalf("users = %v", users)
	}
	if r := a.call("GET", "/api/auth/users?limit=abc", root, "", ""); r.status != 422 || r.errorCode() != "invalid_pagination" {
		t.Fatalf("bad limit: %d %s", r.status, r.raw)
	}
}
