package intake_test

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
	"github.com/yuxi-serverless/yuxi/shared/imagecheck/imagechecktest"
	"github.com/yuxi-serverless/yuxi/shared/oidc"
	"github.com/yuxi-serverless/yuxi/shared/oidc/oidctest"
	"github.com/yuxi-serverless/yuxi/shared/usersettings"
)

// identityAPI is the intake API with user settings, an object store and
// OIDC against a provider the test runs.
func identityAPI(t *testing.T, pol auth.ExternalPolicy) (authAPI, *oidctest.Provider) {
	t.Helper()
	a := newAuthAPI(t)
	objects, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	idp := oidctest.Start(t, "yuxi", "yuxi-client-secret")
	cfg := oidc.Config{Enabled: true, ProviderName: "Corp SSO", IssuerURL: idp.URL, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
		RedirectURI: "http://yuxi.test/api/auth/oidc/callback", ForcePromptLogin: true, Policy: pol}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(intake.New(intake.Deps{Auth: a.svc, Settings: usersettings.New(a.pool, objects),
		OIDC: oidc.New(cfg, a.pool, a.svc, oidc.Options{})}).Handler())
	t.Cleanup(srv.Close)
	a.srv = srv
	return a, idp
}

// noFollow GETs path without following a redirect and returns the Location.
func (a authAPI) noFollow(path string) (int, string) {
	a.t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(a.srv.URL + path)
	if err != nil {
		a.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}

func (a authAPI) upload(path, token, filename string, data []byte) authAPIResp {
	a.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", filename)
	_, _ = fw.Write(data)
	_ = mw.Close()
	return a.call("POST", path, token, mw.FormDataContentType(), buf.String())
}

func TestOIDCLoginEndToEndOverHTTP(t *testing.T) {
	t.Parallel()
	a, idp := identityAPI(t, auth.ExternalPolicy{AutoCreateUser: true, DefaultDepartment: "SSO"})
	if r := a.call("GET", "/api/auth/oidc/config", "", "", ""); r.status != 200 || r.body["enabled"] != true || r.body["provider_name"] != "Corp SSO" {
		t.Fatalf("config: %d %s", r.status, r.raw)
	}
	login := func(person oidctest.Person) *url.URL {
		t.Helper()
		idp.SignIn(person)
		r := a.call("GET", "/api/auth/oidc/login-url?redirect_path=/chat", "", "", "")
		loginURL, _ := r.body["login_url"].(string)
		if r.status != 200 || !strings.Contains(loginURL, "prompt=login") {
			t.Fatalf("login-url: %d %s", r.status, r.raw)
		}
		back := idp.Authorize(t, loginURL)
		status, loc := a.noFollow("/api/auth/oidc/callback?" + back.Encode())
		if status != http.StatusFound {
			t.Fatalf("callback: %d", status)
		}
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	u := login(oidctest.Person{Subject: "s-1", Claims: map[string]any{"preferred_username": "ann", "name": "Ann"}})
	if u.Path != "/auth/oidc/callback" {
		t.Fatalf("callback redirected to %s", u)
	}
	code := u.Query().Get("code")
	r := a.call("POST", "/api/auth/oidc/exchange-code", "", "", fmt.Sprintf(`{"code": %q}`, code))
	tok, _ := r.body["access_token"].(string)
	if r.status != 200 || tok == "" || r.body["username"] != "Ann" || r.body["department_name"] != "SSO" {
		t.Fatalf("exchange: %d %s", r.status, r.raw)
	}
	if me := a.call("GET", "/api/auth/me", tok, "", ""); me.status != 200 || me.body["username"] != "Ann" {
		t.Fatalf("me with the SSO token: %d %s", me.status, me.raw)
	}
	if again := a.call("POST", "/api/auth/oidc/exchange-code", "", "", fmt.Sprintf(`{"code": %q}`, code)); again.status != 400 || again.errorCode() != "oidc_code_invalid" {
		t.Fatalf("second exchange: %d %s", again.status, again.raw)
	}
	// A token for another client is refused at the callback: no code, no user.
	idp.TamperNext(oidctest.Tamper{Audience: "someone-else"})
	u = login(oidctest.Person{Subject: "s-2", Claims: map[string]any{"preferred_username": "eve"}})
	if u.Path != "/login" || u.Query().Get("oidc_error") == "" {
		t.Fatalf("wrong audience: redirected to %s", u)
	}
	var n int
	_ = a.pool.QueryRow(context.Background(), `SELECT count(*) FROM users WHERE username = 'eve'`).Scan(&n)
	if n != 0 {
		t.Fatal("a user was created from a token for another client")
	}
}

func TestOIDCRoutesWhenDisabled(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t) // no OIDC service at all
	if r := a.call("GET", "/api/auth/oidc/config", "", "", ""); r.status != 200 || r.body["enabled"] != false {
		t.Fatalf("config: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/oidc/login-url", "", "", ""); r.status != 503 || r.errorCode() != "oidc_disabled" {
		t.Fatalf("login-url: %d %s", r.status, r.raw)
	}
	if status, loc := a.noFollow("/api/auth/oidc/callback?code=x&state=y"); status != 302 || !strings.HasPrefix(loc, "/login?") {
		t.Fatalf("callback: %d %s", status, loc)
	}
	if r := a.call("POST", "/api/auth/oidc/exchange-code", "", "", `{"code":"x"}`); r.status != 503 {
		t.Fatalf("exchange: %d %s", r.status, r.raw)
	}
}

func TestCLIDeviceLoginOverHTTP(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	alice := a.addUser(root, "alice")
	bob := a.addUser(root, "bob")

	s := a.call("POST", "/api/auth/cli/sessions", "", "", `{"key_name": "laptop"}`)
	device, code := s.body["device_code"].(string), s.body["user_code"].(string)
	if s.status != 200 || s.body["expires_in"] != float64(600) || s.body["verification_uri"] != "/auth/cli/authorize" {
		t.Fatalf("create: %d %s", s.status, s.raw)
	}
	poll := func() authAPIResp {
		return a.call("POST", "/api/auth/cli/sessions/token", "", "", fmt.Sprintf(`{"device_code": %q}`, device))
	}
	if r := poll(); r.status != 400 || r.errorCode() != "authorization_pending" {
		t.Fatalf("poll before approval: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/cli/sessions/"+code, "", "", ""); r.status != 401 {
		t.Fatalf("anonymous read: %d", r.status)
	}
	if r := a.call("GET", "/api/auth/cli/sessions/"+code, alice, "", ""); r.status != 200 || r.body["status"] != "pending" || r.body["key_name"] != "laptop" {
		t.Fatalf("read: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/cli/sessions/"+code+"/approve", alice, "", ""); r.status != 200 || r.body["status"] != "approved" {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/auth/cli/sessions/"+code+"/approve", bob, "", ""); r.status != 404 {
		t.Fatalf("bob approves alice's session: %d %s", r.status, r.raw)
	}
	r := poll()
	secret, _ := r.body["secret"].(string)
	user, _ := r.body["user"].(map[string]any)
	if r.status != 200 || !strings.HasPrefix(secret, auth.APIKeyPrefix) || user["uid"] != "alice" {
		t.Fatalf("exchange: %d %s", r.status, r.raw)
	}
	if me := a.call("GET", "/api/auth/me", secret, "", ""); me.status != 200 || me.body["uid"] != "alice" {
		t.Fatalf("me with the CLI key: %d %s", me.status, me.raw)
	}
	if r := poll(); r.status != 400 || r.errorCode() != "invalid_grant" {
		t.Fatalf("second exchange: %d %s", r.status, r.raw)
	}
}

func TestUserSettingsAndImagesOverHTTP(t *testing.T) {
	t.Parallel()
	a, _ := identityAPI(t, auth.ExternalPolicy{})
	root := a.initRoot()
	alice := a.addUser(root, "alice")
	bob := a.addUser(root, "bob")

	if r := a.call("GET", "/api/user/config", alice, "", ""); r.status != 200 || r.body["enable_memory"] != false {
		t.Fatalf("config: %d %s", r.status, r.raw)
	}
	if r := a.call("PUT", "/api/user/config", alice, "", `{"enable_memory": true}`); r.status != 200 || r.body["enable_memory"] != true {
		t.Fatalf("put config: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/user/config", bob, "", ""); r.body["enable_memory"] != false {
		t.Fatalf("bob sees alice's config: %s", r.raw)
	}
	// Agent environment: the original's limits.
	if r := a.call("PUT", "/api/user/agent-env", alice, "", `{"env": {"API_TOKEN": "s3cret", " PATH_X ": "v"}}`); r.status != 200 {
		t.Fatalf("put env: %d %s", r.status, r.raw)
	}
	r := a.call("GET", "/api/user/agent-env", alice, "", "")
	env, _ := r.body["env"].(map[string]any)
	if env["API_TOKEN"] != "s3cret" || env["PATH_X"] != "v" || r.body["updated_at"] == nil {
		t.Fatalf("env: %s", r.raw)
	}
	if r := a.call("GET", "/api/user/agent-env", bob, "", ""); strings.Contains(r.raw, "s3cret") {
		t.Fatalf("bob sees alice's env: %s", r.raw)
	}
	many := map[string]string{}
	for i := range usersettings.MaxEnvCount + 1 {
		many[fmt.Sprintf("K%d", i)] = "v"
	}
	manyJSON := "{"
	for k, v := range many {
		manyJSON += fmt.Sprintf("%q: %q,", k, v)
	}
	manyJSON = `{"env": ` + strings.TrimSuffix(manyJSON, ",") + "}}"
	for _, c := range []struct{ body, code string }{
		{manyJSON, "too_many_env_vars"},
		{`{"env": {"1BAD": "v"}}`, "invalid_env_name"},
		{`{"env": {"A-B": "v"}}`, "invalid_env_name"},
		{`{"env": {"A": 1}}`, "invalid_env_value"},
		{fmt.Sprintf(`{"env": {"A": %q}}`, strings.Repeat("x", usersettings.MaxEnvValueLength+1)), "invalid_env_value"},
		{`{"env": {"A": "x\u0000y"}}`, "invalid_json"}, // the edge refuses NUL in any JSON body
	} {
		want := 422
		if c.code == "invalid_json" {
			want = 400
		}
		if r := a.call("PUT", "/api/user/agent-env", alice, "", c.body); r.status != want || r.errorCode() != c.code {
			t.Errorf("env %.40s…: %d %s, want %d %s", c.body, r.status, r.raw, want, c.code)
		}
	}
	if r := a.call("GET", "/api/user/agent-env", alice, "", ""); !strings.Contains(r.raw, "s3cret") {
		t.Fatalf("a refused update changed the env: %s", r.raw)
	}

	// Images: checked by content, not name; at most 5 MB; served back by key.
	png := docparsetest.PNG()
	r = a.upload("/api/user/upload-image", alice, "photo.png", png)
	imgURL, _ := r.body["image_url"].(string)
	if r.status != 200 || !strings.HasPrefix(imgURL, "/api/user/images/images/") || r.body["url"] != imgURL {
		t.Fatalf("upload image: %d %s", r.status, r.raw)
	}
	res, err := http.Get(a.srv.URL + imgURL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Equal(got, png) || res.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("serve image: %d %s", res.StatusCode, res.Header)
	}
	if r := a.upload("/api/user/upload-image", alice, "evil.png", []byte("<svg onload=alert(1)></svg>")); r.status != 415 || r.errorCode() != "unsupported_image" {
		t.Fatalf("svg named png: %d %s", r.status, r.raw)
	}
	// WebP, as the original accepts (a real lossless WebP built here), under
	// any name; a forged WebP header around other bytes is refused.
	webp := imagechecktest.SolidWebP(16, 9, color.NRGBA{R: 10, G: 200, B: 90, A: 255})
	r = a.upload("/api/user/upload-image", alice, "photo.bin", webp)
	webpURL, _ := r.body["image_url"].(string)
	if r.status != 200 || !strings.HasSuffix(webpURL, ".webp") {
		t.Fatalf("upload webp: %d %s", r.status, r.raw)
	}
	if res, err := http.Get(a.srv.URL + webpURL); err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/webp" {
		t.Fatalf("serve webp: %v %v", err, res)
	} else {
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !bytes.Equal(got, webp) {
			t.Fatal("the served WebP differs from the upload")
		}
	}
	forged := append(bytes.Clone(webp[:12]), []byte("VP8L\x10\x00\x00\x00<svg onload=alert(1)>")...)
	if r := a.upload("/api/user/upload-image", alice, "evil.webp", forged); r.status != 415 || r.errorCode() != "unsupported_image" {
		t.Fatalf("forged webp: %d %s", r.status, r.raw)
	}
	if r := a.upload("/api/auth/upload-avatar", alice, "me.webp", webp); r.status != 200 || !strings.HasSuffix(r.body["avatar_url"].(string), ".webp") {
		t.Fatalf("webp avatar: %d %s", r.status, r.raw)
	}
	big := append(bytes.Clone(png), make([]byte, usersettings.MaxImageBytes)...)
	if r := a.upload("/api/user/upload-image", alice, "big.png", big); r.status != 413 || r.errorCode() != "image_too_large" {
		t.Fatalf("6 MB image: %d %.200s", r.status, r.raw)
	}
	for _, bad := range []string{"/api/user/images/images/../../etc", "/api/user/images/images/zz.png", "/api/user/images/avatar/" + strings.Repeat("0", 32) + ".png"} {
		if res, err := http.Get(a.srv.URL + bad); err != nil || res.StatusCode != 404 {
			t.Errorf("GET %s: %v %v", bad, err, res.StatusCode)
		}
	}
	// Avatar: stored the same way, and shown in the profile.
	r = a.upload("/api/auth/upload-avatar", alice, "me.png", png)
	avatar, _ := r.body["avatar_url"].(string)
	if r.status != 200 || !strings.HasPrefix(avatar, "/api/user/images/avatar/") {
		t.Fatalf("avatar: %d %s", r.status, r.raw)
	}
	if me := a.call("GET", "/api/auth/me", alice, "", ""); me.body["avatar"] != avatar {
		t.Fatalf("me after avatar: %s", me.raw)
	}
	// Profile.
	if r := a.call("PUT", "/api/auth/profile", alice, "", `{"username": "Alice L.", "phone_number": "+15551234"}`); r.status != 200 || r.body["username"] != "Alice L." {
		t.Fatalf("profile: %d %s", r.status, r.raw)
	}
	if r := a.call("PUT", "/api/auth/profile", bob, "", `{"username": "Alice L."}`); r.status != 409 || r.errorCode() != "username_taken" {
		t.Fatalf("bob takes alice's name: %d %s", r.status, r.raw)
	}
}

func TestDepartmentAndUserRoutes(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	r := a.call("POST", "/api/departments", root, "", `{"name": "sales", "description": "EMEA", "admin_uid": "sales_admin", "admin_password": "long enough pw"}`)
	if r.status != 201 || r.body["user_count"] != float64(1) || r.body["name"] != "sales" {
		t.Fatalf("create department: %d %s", r.status, r.raw)
	}
	dept := fmt.Sprint(r.body["id"])
	admin := a.login("sales_admin", "long enough pw").body["access_token"].(string)
	if r := a.call("GET", "/api/departments", admin, "", ""); r.status != 200 || !strings.Contains(r.raw, `"sales"`) {
		t.Fatalf("list as admin: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/departments/"+dept, admin, "", ""); r.status != 403 || r.errorCode() != "superadmin_required" {
		t.Fatalf("get as admin: %d %s", r.status, r.raw)
	}
	if r := a.call("PUT", "/api/departments/"+dept, root, "", `{"description": "EMEA and APAC"}`); r.status != 200 || r.body["description"] != "EMEA and APAC" {
		t.Fatalf("update: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/departments/abc", root, "", ""); r.status != 404 || r.errorCode() != "department_not_found" {
		t.Fatalf("bad id: %d %s", r.status, r.raw)
	}
	// The department's admin creates a user there and manages it.
	r = a.call("POST", "/api/auth/users", admin, "", `{"uid": "clerk", "password": "long enough pw"}`)
	clerkID := fmt.Sprint(r.body["id"])
	if r.status != 200 || fmt.Sprint(r.body["department_id"]) != dept {
		t.Fatalf("create user: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/users/"+clerkID, admin, "", ""); r.status != 200 || r.body["uid"] != "clerk" {
		t.Fatalf("get user: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/users/access-options", admin, "", ""); r.status != 200 || strings.Contains(r.raw, `"root"`) || !strings.Contains(r.raw, `"clerk"`) {
		t.Fatalf("access options: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/check-uid/clerk", admin, "", ""); r.body["is_available"] != false {
		t.Fatalf("check-uid: %s", r.raw)
	}
	if r := a.call("POST", "/api/auth/validate-username", admin, "", `{"username": "Clerk"}`); r.status != 200 || r.body["uid"] != "clerk_2" {
		t.Fatalf("validate-username: %d %s", r.status, r.raw)
	}
	// Impersonation: superadmin only, visible in the token, audited.
	if r := a.call("POST", "/api/auth/impersonate/"+clerkID, admin, "", ""); r.status != 403 {
		t.Fatalf("admin impersonates: %d", r.status)
	}
	r = a.call("POST", "/api/auth/impersonate/"+clerkID, root, "", "")
	imp, _ := r.body["access_token"].(string)
	if r.status != 200 || r.body["uid"] != "clerk" {
		t.Fatalf("impersonate: %d %s", r.status, r.raw)
	}
	if me := a.call("GET", "/api/auth/me", imp, "", ""); me.body["uid"] != "clerk" {
		t.Fatalf("me as the impersonated user: %s", me.raw)
	}
	var audited int
	_ = a.pool.QueryRow(context.Background(), `SELECT count(*) FROM impersonation_audit WHERE target_user_id = $1::bigint AND client_address = '127.0.0.1'`, clerkID).Scan(&audited)
	if audited != 1 {
		t.Fatalf("%d audit rows", audited)
	}
	// Soft delete ends the impersonation session and the user's own.
	if r := a.call("DELETE", "/api/auth/users/"+clerkID, admin, "", ""); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	if me := a.call("GET", "/api/auth/me", imp, "", ""); me.status != 401 {
		t.Fatalf("impersonation token after deletion: %d", me.status)
	}
	// Bad input is a 4xx with a code, never a 500 (NUL cannot reach PostgreSQL).
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/api/auth/profile", `{"username": "a\u0000b"}`},
		{"GET", "/api/auth/check-uid/a%00b", ""},
		{"GET", "/api/auth/cli/sessions/AB%00C-DEFG", ""},
		{"POST", "/api/departments", `{"name": "x\u0000", "admin_uid": "xx_admin", "admin_password": "long enough pw"}`},
		{"PUT", "/api/departments/" + dept, `{"description": "\u0000"}`},
		{"GET", "/api/auth/users/%ff", ""},
	} {
		if r := a.call(c.method, c.path, root, "", c.body); r.status < 400 || r.status >= 500 || r.errorCode() == "" {
			t.Errorf("%s %s %s: %d %s, want a 4xx with a code", c.method, c.path, c.body, r.status, r.raw)
		}
	}
	// Deleting the department moves its users to the default one.
	if r := a.call("DELETE", "/api/departments/"+dept, root, "", ""); r.status != 200 || r.body["moved_users"] != float64(2) {
		t.Fatalf("delete department: %d %s", r.status, r.raw)
	}
}
