package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
)

// chatAPI is the intake API with real agent, thread, queue and run stores over
// a fresh database, and logged-in accounts:
// root (superadmin), adm (admin), alice, bob and carol (users).
type chatAPI struct {
	t   *testing.T
	f   *runtest.Fixture
	srv *httptest.Server
	svc *auth.Service
	tok map[string]string
}

const chatAPIPassword = "correct horse battery"

func newChatAPI(t *testing.T) chatAPI {
	t.Helper()
	f := runtest.New(t)
	svc, err := auth.NewService(f.Pool, auth.Config{
		JWTSecret:    bytes.Repeat([]byte("j"), 32),
		APIKeySecret: bytes.Repeat([]byte("k"), 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(intake.New(intake.Deps{Auth: svc, Agents: f.Agents, Threads: f.Threads,
		Queue: f.Queue, Runs: f.Runs, Tools: f.Tools}).Handler())
	t.Cleanup(srv.Close)

	ctx := context.Background()
	a := chatAPI{t: t, f: f, srv: srv, svc: svc, tok: map[string]string{}}
	root, err := svc.Initialize(ctx, "root", chatAPIPassword, "Root")
	if err != nil {
		t.Fatal(err)
	}
	a.tok["root"] = root.AccessToken
	rootP, err := svc.Authenticate(ctx, "Bearer "+root.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	for uid, role := range map[string]string{"adm": auth.RoleAdmin, "alice": auth.RoleUser, "bob": auth.RoleUser, "carol": auth.RoleUser} {
		if _, err := svc.CreateUser(ctx, rootP, auth.NewUser{UID: uid, Password: chatAPIPassword, Role: role}); err != nil {
			t.Fatal(err)
		}
		tok, err := svc.Login(ctx, uid, chatAPIPassword)
		if err != nil {
			t.Fatal(err)
		}
		a.tok[uid] = tok.AccessToken
	}
	return a
}

// subject is the access subject of a logged-in account (for the queue).
func (a chatAPI) subject(uid string) access.Subject {
	a.t.Helper()
	p, err := a.svc.Authenticate(context.Background(), "Bearer "+a.tok[uid])
	if err != nil {
		a.t.Fatal(err)
	}
	return access.Subject{UID: p.UID, Role: p.Role, DepartmentID: p.DepartmentID}
}

type chatResp struct {
	status int
	raw    string
	body   map[string]any
}

func (r chatResp) errorCode() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// list decodes a top-level JSON array, or the array under key.
func (r chatResp) list(key string) []map[string]any {
	var out []map[string]any
	if key == "" {
		_ = json.Unmarshal([]byte(r.raw), &out)
		return out
	}
	items, _ := r.body[key].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

func (r chatResp) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

// call sends a request as uid ("" = anonymous) with a JSON body (when not empty).
func (a chatAPI) call(method, path, uid, body string) chatResp {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if uid != "" {
		req.Header.Set("Authorization", "Bearer "+a.tok[uid])
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := chatResp{status: res.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

// want fails the test unless r has the status (and, when given, the error code).
func (a chatAPI) want(r chatResp, status int, code string, what string) {
	a.t.Helper()
	if r.status != status || (code != "" && r.errorCode() != code) {
		a.t.Fatalf("%s: got %d %s, want %d %s", what, r.status, r.raw, status, code)
	}
}
