package intake_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/modelprovider"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/redistest"
	"github.com/yuxi-serverless/yuxi/shared/secret"
	"github.com/yuxi-serverless/yuxi/shared/secret/secrettest"
)

// POST /api/system/secrets/reseal: the superadmin re-seals every stored
// secret after a key rotation and is told which values no key opens; anyone
// else is refused; without a key the route says so.
func TestResealSecretsRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	rdb, prefix := redistest.New(t)
	svc, err := auth.NewService(pool, auth.Config{JWTSecret: bytes.Repeat([]byte("j"), 32), APIKeySecret: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	ring := func(current string, previous ...string) *secret.Keyring {
		return secrettest.Ring(t, current, previous...)
	}
	oldKey, newKey := strings.Repeat("o", 40), strings.Repeat("n", 40)
	guard := netguard.New(netguard.Options{Allow: netguard.MustParseAllow("127.0.0.1:9")})
	old := modelprovider.New(pool, rdb, prefix, nil, ring(oldKey), guard)
	for _, id := range []string{"alpha", "beta"} {
		id := id
		if _, err := old.Create(ctx, "root", modelprovider.Input{ProviderID: &id, BaseURL: ptrTo("http://127.0.0.1:9/v1"), APIKey: ptrTo("sk-" + id)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE model_providers SET api_key_sealed = 'v1.garbage.value' WHERE provider_id = 'beta'`); err != nil {
		t.Fatal(err)
	}
	serve := func(keys *secret.Keyring) authAPI {
		srv := httptest.NewServer(intake.New(intake.Deps{Auth: svc, Providers: modelprovider.New(pool, rdb, prefix, nil, keys, guard),
			MCP: mcp.Open(pool, keys, guard, nil)}).Handler())
		t.Cleanup(srv.Close)
		return authAPI{t: t, srv: srv, svc: svc, pool: pool}
	}
	a := serve(ring(newKey, oldKey))
	root := a.initRoot()
	user := a.addUser(root, "plain")
	if r := a.call("POST", "/api/system/secrets/reseal", user, "", ""); r.status != 403 || r.errorCode() == "" {
		t.Fatalf("a user: %d %s", r.status, r.raw)
	}
	r := a.call("POST", "/api/system/secrets/reseal", root, "", "")
	if r.status != 200 || r.body["resealed"] != float64(1) || !strings.Contains(r.raw, `"failed":["model_providers:beta"]`) {
		t.Fatalf("reseal: %d %s", r.status, r.raw)
	}
	if r := a.call("POST", "/api/system/secrets/reseal", root, "", ""); r.status != 200 || r.body["resealed"] != float64(0) {
		t.Fatalf("second reseal: %d %s", r.status, r.raw)
	}
	var sealed string
	if err := pool.QueryRow(ctx, `SELECT api_key_sealed FROM model_providers WHERE provider_id = 'alpha'`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if plain, err := ring(newKey).Open(sealed, "model_providers:alpha:api_key"); err != nil || plain != "sk-alpha" {
		t.Fatalf("alpha's key under the new key alone: %q %v", plain, err)
	}
	if r := serve(nil).call("POST", "/api/system/secrets/reseal", root, "", ""); r.status != 503 || r.errorCode() != "encryption_key_missing" {
		t.Fatalf("without a key: %d %s", r.status, r.raw)
	}
}

func ptrTo(s string) *string { return &s }
