package auth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestDeriveAPIKeySecretIsDeterministic(t *testing.T) {
	t.Parallel()
	a := auth.DeriveAPIKeySecret(testAPIKeySecret, 7, "req-00000001")
	if a != auth.DeriveAPIKeySecret(testAPIKeySecret, 7, "req-00000001") {
		t.Fatal("derivation is not deterministic")
	}
	// The contract from the original product, computed independently.
	m := hmac.New(sha256.New, testAPIKeySecret)
	m.Write([]byte("yuxi-api-key-v1:7:user-request:req-00000001"))
	if want := "yxkey_" + hex.EncodeToString(m.Sum(nil))[:48]; a != want {
		t.Fatalf("derived %q, want %q", a, want)
	}
	for _, other := range []string{
		auth.DeriveAPIKeySecret(testAPIKeySecret, 8, "req-00000001"),
		auth.DeriveAPIKeySecret(testAPIKeySecret, 7, "req-00000002"),
		auth.DeriveAPIKeySecret(testJWTSecret, 7, "req-00000001"),
	} {
		if other == a {
			t.Fatal("different inputs derived the same secret")
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestCreateAPIKeyStoresOnlyTheHashAndReplays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)
	alice := f.user(t, root, "alice")
	bob := f.user(t, root, "bob")

	exp := f.clock.Now().Add(24 * time.Hour)
	in := auth.NewAPIKey{RequestID: "req-alice-0001", Name: "ci", ExpiresAt: &exp}
	created, err := f.svc.CreateAPIKey(ctx, alice, in)
	if err != nil {
		t.Fatal(err)
	}
	if created.Secret != auth.DeriveAPIKeySecret(testAPIKeySecret, alice.UserID, in.RequestID) {
		t.Fatal("secret is not the derived one")
	}
	k := created.APIKey
	if k.UserID != alice.UserID || k.KeyPrefix != created.Secret[:12] || !k.IsEnabled || k.RevokedAt != nil ||
		k.RequestID != in.RequestID || k.CreatedBy != "alice" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(exp) {
		t.Fatalf("created key = %+v", k)
	}
	var storedHash string
	if err := f.pool.QueryRow(ctx, `SELECT key_hash FROM api_keys WHERE id = $1`, k.ID).Scan(&storedHash); err != nil {
		t.Fatal(err)
	}
	if storedHash != sha256Hex(created.Secret) {
		t.Fatal("key_hash is not sha256(secret)")
	}
	if n := f.count(t, `SELECT count(*) FROM api_keys WHERE row_to_json(api_keys)::text LIKE '%' || $1 || '%'`, created.Secret); n != 0 {
		t.Fatal("the secret is stored in clear")
	}
	p, err := f.svc.Authenticate(ctx, "Bearer "+created.Secret)
	if err != nil || p.UserID != alice.UserID || p.APIKeyID == nil || *p.APIKeyID != k.ID {
		t.Fatalf("authenticate with key: %+v %v", p, err)
	}

	// Replay after a mutable-field edit still returns the original key and secret.
	newName := "renamed"
	if _, err := f.svc.UpdateAPIKey(ctx, alice, k.ID, auth.APIKeyUpdate{Name: &newName}); err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.CreateAPIKey(ctx, alice, in)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if again.APIKey.ID != k.ID || again.Secret != created.Secret || again.APIKey.Name != newName {
		t.Fatalf("replay returned %+v", again.APIKey)
	}

	// Same request id, different intent: conflict, nothing written.
	for name, other := range map[string]auth.NewAPIKey{
		"other name":   {RequestID: in.RequestID, Name: "other", ExpiresAt: &exp},
		"other expiry": {RequestID: in.RequestID, Name: "ci"},
	} {
		_, err := f.svc.CreateAPIKey(ctx, alice, other)
		if fe, ok := failure.As(err); !ok || fe.Code != "request_id_conflict" || fe.Kind != failure.KindConflict {
			t.Fatalf("%s: err = %v, want request_id_conflict", name, err)
		}
	}
	// Another user reusing the request id gets a key of their own (request
	// ids are per user, issue 9: a 409 told bob that alice used the id),
	// never alice's.
	bobs, err := f.svc.CreateAPIKey(ctx, bob, in)
	if err != nil {
		t.Fatalf("bob's key with alice's request id: %v", err)
	}
	if bobs.APIKey.UserID != bob.UserID || bobs.APIKey.ID == k.ID || bobs.Secret == created.Secret {
		t.Fatalf("bob got %+v", bobs.APIKey)
	}
	if n := f.count(t, `SELECT count(*) FROM api_keys`); n != 2 {
		t.Fatalf("%d api_keys rows, want 2", n)
	}
}

func TestConcurrentIdenticalCreatesCommitOneRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)
	alice := f.user(t, root, "alice")

	const n = 10
	res := make([]auth.CreatedAPIKey, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = f.svc.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "burst:request-1", Name: "burst"})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if res[i].APIKey.ID != res[0].APIKey.ID || res[i].Secret != res[0].Secret {
			t.Fatalf("create %d returned another key", i)
		}
	}
	if got := f.count(t, `SELECT count(*) FROM api_keys WHERE request_id = 'burst:request-1'`); got != 1 {
		t.Fatalf("%d rows committed, want 1", got)
	}
}

func TestRevokedKeyCannotBeResurrected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)
	alice := f.user(t, root, "alice")
	in := auth.NewAPIKey{RequestID: "req-revoke-01", Name: "temp"}
	created, err := f.svc.CreateAPIKey(ctx, alice, in)
	if err != nil {
		t.Fatal(err)
	}
	id := created.APIKey.ID
	if err := f.svc.RevokeAPIKey(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	var enabled bool
	var revokedAt *time.Time
	if err := f.pool.QueryRow(ctx, `SELECT is_enabled, revoked_at FROM api_keys WHERE id = $1`, id).Scan(&enabled, &revokedAt); err != nil {
		t.Fatal(err)
	}
	if enabled || revokedAt == nil || !revokedAt.Equal(f.clock.Now()) {
		t.Fatalf("tombstone: enabled=%v revoked_at=%v", enabled, revokedAt)
	}
	_, err = f.svc.Authenticate(ctx, "Bearer "+created.Secret)
	wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")

	// Replay returns the tombstone, still revoked.
	replay, err := f.svc.CreateAPIKey(ctx, alice, in)
	if err != nil {
		t.Fatalf("replay of revoked key: %v", err)
	}
	if replay.APIKey.ID != id || replay.APIKey.IsEnabled || replay.APIKey.RevokedAt == nil {
		t.Fatalf("replay = %+v", replay.APIKey)
	}
	_, err = f.svc.Authenticate(ctx, "Bearer "+replay.Secret)
	wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")

	// A revoked key is gone from every owner operation.
	on := true
	_, err = f.svc.UpdateAPIKey(ctx, alice, id, auth.APIKeyUpdate{IsEnabled: &on})
	wantCode(t, err, failure.KindNotFound, "api_key_not_found")
	_, err = f.svc.GetAPIKey(ctx, alice, id)
	wantCode(t, err, failure.KindNotFound, "api_key_not_found")
	wantCode(t, f.svc.RevokeAPIKey(ctx, alice, id), failure.KindNotFound, "api_key_not_found")
	if keys, total, err := f.svc.ListAPIKeys(ctx, alice, 0, 100); err != nil || total != 0 || len(keys) != 0 {
		t.Fatalf("list after revoke: %d keys, total %d, %v", len(keys), total, err)
	}
	if n := f.count(t, `SELECT count(*) FROM api_keys WHERE is_enabled OR revoked_at IS NULL`); n != 0 {
		t.Fatal("the revoked key came back")
	}
}

func TestAPIKeyRejectedWhenDisabledExpiredOrUserDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)
	alice := f.user(t, root, "alice")

	exp := f.clock.Now().Add(time.Hour)
	expiring, err := f.svc.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "req-expiring", Name: "expiring", ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := f.svc.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "req-plain-01", Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Authenticate(ctx, "Bearer "+expiring.Secret); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	f.clock.Advance(time.Hour + time.Second)
	_, err = f.svc.Authenticate(ctx, "Bearer "+expiring.Secret)
	wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")

	off, on := false, true
	if _, err := f.svc.UpdateAPIKey(ctx, alice, plain.APIKey.ID, auth.APIKeyUpdate{IsEnabled: &off}); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Authenticate(ctx, "Bearer "+plain.Secret)
	wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")
	if _, err := f.svc.UpdateAPIKey(ctx, alice, plain.APIKey.ID, auth.APIKeyUpdate{IsEnabled: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Authenticate(ctx, "Bearer "+plain.Secret); err != nil {
		t.Fatalf("re-enabled key: %v", err)
	}

	if _, err := f.pool.Exec(ctx, `UPDATE users SET is_deleted = true WHERE id = $1`, alice.UserID); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Authenticate(ctx, "Bearer "+plain.Secret)
	wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")

	for _, bad := range []string{"yxkey_", "yxkey_short", "yxkey_" + strings.Repeat("A", 48), "yxkey_" + strings.Repeat("0", 48)} {
		_, err := f.svc.Authenticate(ctx, "Bearer "+bad)
		wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")
	}
}

func TestAPIKeyLastUsedAtIsThrottled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)
	alice := f.user(t, root, "alice")
	created, err := f.svc.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "req-usage-01", Name: "usage"})
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() *time.Time {
		var ts *time.Time
		if err := f.pool.QueryRow(ctx, `SELECT last_used_at FROM api_keys WHERE id = $1`, created.APIKey.ID).Scan(&ts); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	if lastUsed() != nil {
		t.Fatal("a new key has last_used_at")
	}
	use := func() {
		if _, err := f.svc.Authenticate(ctx, "Bearer "+created.Secret); err != nil {
			t.Fatal(err)
		}
	}
	t0 := f.clock.Now()
	use()
	if got := lastUsed(); got == nil || !got.Equal(t0) {
		t.Fatalf("after first use last_used_at = %v, want %v", got, t0)
	}
	f.clock.Advance(30 * time.Second)
	use()
	use()
	if got := lastUsed(); !got.Equal(t0) {
		t.Fatalf("within a minute last_used_at moved to %v", got)
	}
	f.clock.Advance(31 * time.Second)
	use()
	if got := lastUsed(); !got.Equal(t0.Add(61 * time.Second)) {
		t.Fatalf("after a minute last_used_at = %v, want %v", got, t0.Add(61*time.Second))
	}
}

func TestAPIKeysAreInvisibleToOtherUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)
	alice := f.user(t, root, "alice")
	bob := f.user(t, root, "bob")

	created, err := f.svc.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "req-private-1", Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.APIKey.ID
	name, off := "stolen", false
	_, err = f.svc.GetAPIKey(ctx, bob, id)
	wantCode(t, err, failure.KindNotFound, "api_key_not_found")
	_, err = f.svc.UpdateAPIKey(ctx, bob, id, auth.APIKeyUpdate{Name: &name, IsEnabled: &off})
	wantCode(t, err, failure.KindNotFound, "api_key_not_found")
	wantCode(t, f.svc.RevokeAPIKey(ctx, bob, id), failure.KindNotFound, "api_key_not_found")
	if keys, total, _ := f.svc.ListAPIKeys(ctx, bob, 0, 100); total != 0 || len(keys) != 0 {
		t.Fatalf("bob lists %d keys (total %d)", len(keys), total)
	}
	k, err := f.svc.GetAPIKey(ctx, alice, id)
	if err != nil || k.Name != "mine" || !k.IsEnabled || k.RevokedAt != nil {
		t.Fatalf("alice's key after bob's attempts: %+v %v", k, err)
	}
	if _, err := f.svc.Authenticate(ctx, "Bearer "+created.Secret); err != nil {
		t.Fatalf("alice's key after bob's attempts: %v", err)
	}

	// Only a superadmin creates keys for someone else.
	_, err = f.svc.CreateAPIKey(ctx, bob, auth.NewAPIKey{RequestID: "req-for-alice", Name: "x", UserID: &alice.UserID})
	wantCode(t, err, failure.KindForbidden, "api_key_forbidden")
	issued, err := f.svc.CreateAPIKey(ctx, root, auth.NewAPIKey{RequestID: "req-for-alice", Name: "issued", UserID: &alice.UserID})
	if err != nil {
		t.Fatal(err)
	}
	if issued.APIKey.UserID != alice.UserID || issued.APIKey.CreatedBy != "root" {
		t.Fatalf("issued key = %+v", issued.APIKey)
	}
	if p, err := f.svc.Authenticate(ctx, "Bearer "+issued.Secret); err != nil || p.UserID != alice.UserID {
		t.Fatalf("issued key authenticates as %+v, %v", p, err)
	}
	if _, total, _ := f.svc.ListAPIKeys(ctx, alice, 0, 100); total != 2 {
		t.Fatalf("alice lists %d keys, want 2", total)
	}
	if _, total, _ := f.svc.ListAPIKeys(ctx, root, 0, 100); total != 2 {
		t.Fatalf("superadmin lists %d keys, want 2", total)
	}
}

func TestCreateAPIKeyValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)
	alice := f.user(t, root, "alice")
	other := int64(987654)
	ghost := int64(987654)
	cases := []struct {
		in   auth.NewAPIKey
		kind failure.Kind
		code string
	}{
		{auth.NewAPIKey{RequestID: "short", Name: "x"}, failure.KindUnprocessable, "invalid_request_id"},
		{auth.NewAPIKey{RequestID: strings.Repeat("r", 65), Name: "x"}, failure.KindUnprocessable, "invalid_request_id"},
		{auth.NewAPIKey{RequestID: "has spaces in it", Name: "x"}, failure.KindUnprocessable, "invalid_request_id"},
		{auth.NewAPIKey{RequestID: "req-noname-1", Name: "   "}, failure.KindUnprocessable, "invalid_name"},
		{auth.NewAPIKey{RequestID: "req-dept-001", Name: "x", DepartmentID: &other}, failure.KindUnprocessable, "department_mismatch"},
	}
	for _, tc := range cases {
		_, err := f.svc.CreateAPIKey(ctx, alice, tc.in)
		wantCode(t, err, tc.kind, tc.code)
	}
	_, err := f.svc.CreateAPIKey(ctx, root, auth.NewAPIKey{RequestID: "req-ghost-01", Name: "x", UserID: &ghost})
	wantCode(t, err, failure.KindNotFound, "user_not_found")
	if n := f.count(t, `SELECT count(*) FROM api_keys`); n != 0 {
		t.Fatalf("refused creates left %d rows", n)
	}
	// Matching department is accepted.
	if _, err := f.svc.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "req-dept-002", Name: "x", DepartmentID: alice.DepartmentID}); err != nil {
		t.Fatal(err)
	}
}
