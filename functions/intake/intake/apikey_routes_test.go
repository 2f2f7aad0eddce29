package intake_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// createKey posts a create and returns (key id, secret).
func (a authAPI) createKey(token, path, body string) (int64, string) {
	a.t.Helper()
	r := a.call("POST", path, token, "", body)
	if r.status != 200 {
		a.t.Fatalf("create key: %d %s", r.status, r.raw)
	}
	key, _ := r.body["api_key"].(map[string]any)
	id, _ := key["id"].(float64)
	secret, _ := r.body["secret"].(string)
	if id == 0 || !strings.HasPrefix(secret, "yxkey_") {
		a.t.Fatalf("create key answer: %s", r.raw)
	}
	return int64(id), secret
}

func TestAPIKeyRoutesTwoAccounts(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	alice := a.addUser(root, "alice")
	bob := a.addUser(root, "bob")

	id, secret := a.createKey(alice, "/api/user/apikey/", `{"request_id": "alice-key-0001", "name": "laptop"}`)
	keyPath := fmt.Sprintf("/api/user/apikey/%d", id)

	for _, r := range []authAPIResp{
		a.call("GET", keyPath, bob, "", ""),
		a.call("PUT", keyPath, bob, "", `{"name": "stolen", "is_enabled": false}`),
		a.call("DELETE", keyPath, bob, "", ""),
	} {
		if r.status != 404 || r.errorCode() != "api_key_not_found" {
			t.Fatalf("bob on alice's key: %d %s", r.status, r.raw)
		}
	}
	if r := a.call("GET", "/api/user/apikey/", bob, "", ""); r.status != 200 || r.body["total"] != float64(0) {
		t.Fatalf("bob's list: %d %s", r.status, r.raw)
	}
	// Bob's own key cannot reach alice's either.
	_, bobSecret := a.createKey(bob, "/api/user/apikey", `{"request_id": "bob-key-00001", "name": "bob"}`)
	if r := a.call("GET", keyPath, bobSecret, "", ""); r.status != 404 {
		t.Fatalf("bob's API key on alice's key: %d %s", r.status, r.raw)
	}
	// Bob replaying alice's request id gets a key of his own (request ids
	// are per user), never her secret.
	if r := a.call("POST", "/api/user/apikey/", bob, "", `{"request_id": "alice-key-0001", "name": "laptop"}`); r.status != 200 ||
		strings.Contains(r.raw, secret) {
		t.Fatalf("bob replays alice's request id: %d %s", r.status, r.raw)
	}

	// Alice's key is untouched and still works.
	var name string
	var enabled, revoked bool
	if err := a.pool.QueryRow(context.Background(), `SELECT name, is_enabled, revoked_at IS NOT NULL FROM api_keys WHERE id = $1`, id).
		Scan(&name, &enabled, &revoked); err != nil {
		t.Fatal(err)
	}
	if name != "laptop" || !enabled || revoked {
		t.Fatalf("alice's key after bob: name=%q enabled=%v revoked=%v", name, enabled, revoked)
	}
	if r := a.call("GET", "/api/auth/me", secret, "", ""); r.status != 200 || r.body["uid"] != "alice" {
		t.Fatalf("alice's key after bob: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", keyPath, alice, "", ""); r.status != 200 {
		t.Fatalf("alice reads her key: %d %s", r.status, r.raw)
	}
}

func TestAPIKeyRoutesLifecycle(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	alice := a.addUser(root, "alice")

	body := `{"request_id": "ci:deploy-2026.01", "name": "ci", "expires_at": "2099-01-02T03:04:05Z"}`
	create := a.call("POST", "/api/user/apikey/", alice, "", body)
	if create.status != 200 {
		t.Fatalf("create: %d %s", create.status, create.raw)
	}
	key, _ := create.body["api_key"].(map[string]any)
	secret, _ := create.body["secret"].(string)
	for _, field := range []string{"id", "name", "key_prefix", "user_id", "department_id", "expires_at", "is_enabled", "revoked_at", "last_used_at", "created_at", "request_id"} {
		if _, ok := key[field]; !ok {
			t.Fatalf("api_key lacks %q: %s", field, create.raw)
		}
	}
	if key["key_prefix"] != secret[:12] || key["expires_at"] != "2099-01-02T03:04:05Z" || key["request_id"] != "ci:deploy-2026.01" || key["is_enabled"] != true {
		t.Fatalf("api_key = %v", key)
	}
	if strings.Contains(create.raw, "key_hash") {
		t.Fatalf("create answer exposes key_hash: %s", create.raw)
	}
	id := int64(key["id"].(float64))
	keyPath := fmt.Sprintf("/api/user/apikey/%d", id)

	// Replay (without the trailing slash) returns the same key and secret.
	replay := a.call("POST", "/api/user/apikey", alice, "", body)
	if replay.status != 200 || replay.body["secret"] != secret || replay.body["api_key"].(map[string]any)["id"] != key["id"] {
		t.Fatalf("replay: %d %s", replay.status, replay.raw)
	}
	if r := a.call("POST", "/api/user/apikey/", alice, "", `{"request_id": "ci:deploy-2026.01", "name": "other"}`); r.status != 409 || r.errorCode() != "request_id_conflict" {
		t.Fatalf("different intent: %d %s", r.status, r.raw)
	}
	for _, p := range []string{"/api/user/apikey/", "/api/user/apikey", "/api/user/apikey/?skip=0&limit=5"} {
		r := a.call("GET", p, alice, "", "")
		keys, _ := r.body["api_keys"].([]any)
		if r.status != 200 || r.body["total"] != float64(1) || len(keys) != 1 || strings.Contains(r.raw, "key_hash") {
			t.Fatalf("list %s: %d %s", p, r.status, r.raw)
		}
	}

	// The key authenticates and records its use.
	if r := a.call("GET", "/api/auth/me", secret, "", ""); r.status != 200 || r.body["uid"] != "alice" {
		t.Fatalf("key auth: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", keyPath, alice, "", ""); r.body["api_key"].(map[string]any)["last_used_at"] == nil {
		t.Fatalf("last_used_at not recorded: %s", r.raw)
	}

	upd := a.call("PUT", keyPath, alice, "", `{"name": "ci-renamed", "expires_at": null}`)
	updKey, _ := upd.body["api_key"].(map[string]any)
	if upd.status != 200 || updKey["name"] != "ci-renamed" || updKey["expires_at"] != nil {
		t.Fatalf("update: %d %s", upd.status, upd.raw)
	}
	upd = a.call("PUT", keyPath, alice, "", `{"expires_at": "2098-05-06 07:08:09"}`)
	if updKey, _ = upd.body["api_key"].(map[string]any); upd.status != 200 || updKey["expires_at"] != "2098-05-06T07:08:09Z" || updKey["name"] != "ci-renamed" {
		t.Fatalf("update expiry: %d %s", upd.status, upd.raw)
	}

	if r := a.call("DELETE", keyPath, alice, "", ""); r.status != 200 || r.body["success"] != true {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", "/api/auth/me", secret, "", ""); r.status != 401 || r.errorCode() != "invalid_api_key" {
		t.Fatalf("revoked key auth: %d %s", r.status, r.raw)
	}
	if r := a.call("GET", keyPath, alice, "", ""); r.status != 404 {
		t.Fatalf("get revoked: %d %s", r.status, r.raw)
	}
	if r := a.call("PUT", keyPath, alice, "", `{"is_enabled": true}`); r.status != 404 {
		t.Fatalf("re-enable revoked: %d %s", r.status, r.raw)
	}
	again := a.call("POST", "/api/user/apikey/", alice, "", body)
	againKey, _ := again.body["api_key"].(map[string]any)
	if again.status != 200 || againKey["revoked_at"] == nil || againKey["is_enabled"] != false {
		t.Fatalf("replay after revoke: %d %s", again.status, again.raw)
	}
	if r := a.call("GET", "/api/auth/me", secret, "", ""); r.status != 401 {
		t.Fatalf("replay resurrected the key: %d %s", r.status, r.raw)
	}
}

func TestAPIKeyRoutesBadInput(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	alice := a.addUser(root, "alice")

	cases := []struct {
		method, path, token, body string
		status                    int
		code                      string
	}{
		{"GET", "/api/user/apikey/", "", "", 401, "not_authenticated"},
		{"POST", "/api/user/apikey/", "", `{"request_id": "req-noauth-1", "name": "x"}`, 401, "not_authenticated"},
		{"GET", "/api/user/apikey/", "yxkey_" + strings.Repeat("0", 48), "", 401, "invalid_api_key"},
		{"POST", "/api/user/apikey/", alice, `{"request_id": `, 400, "invalid_json"},
		{"POST", "/api/user/apikey/", alice, `{"request_id": "short", "name": "x"}`, 422, "invalid_request_id"},
		{"POST", "/api/user/apikey/", alice, `{"request_id": "req-type-001", "name": 5}`, 422, "invalid_request"},
		{"POST", "/api/user/apikey/", alice, `{"request_id": "req-name-001", "name": ""}`, 422, "invalid_name"},
		{"POST", "/api/user/apikey/", alice, `{"request_id": "req-exp-0001", "name": "x", "expires_at": "next tuesday"}`, 422, "invalid_expires_at"},
		{"POST", "/api/user/apikey/", alice, `{"request_id": "req-user-001", "name": "x", "user_id": 1}`, 403, "api_key_forbidden"},
		{"GET", "/api/user/apikey/?limit=0", alice, "", 422, "invalid_pagination"},
		{"GET", "/api/user/apikey/abc", alice, "", 404, "api_key_not_found"},
		{"PUT", "/api/user/apikey/999999", alice, `{"name": "x"}`, 404, "api_key_not_found"},
		{"PUT", "/api/user/apikey/1", alice, `{"name": `, 400, "invalid_json"},
		{"DELETE", "/api/user/apikey/999999", alice, "", 404, "api_key_not_found"},
	}
	for _, tc := range cases {
		r := a.call(tc.method, tc.path, tc.token, "", tc.body)
		if r.status != tc.status || r.errorCode() != tc.code {
			t.Errorf("%s %s %s: %d %s, want %d %s", tc.method, tc.path, tc.body, r.status, r.raw, tc.status, tc.code)
		}
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM api_keys`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad input left %d api_keys rows (%v)", n, err)
	}
}
