package mcp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/secret"
	"github.com/yuxi-serverless/yuxi/shared/secret/secrettest"
	"github.com/yuxi-serverless/yuxi/tests/mcpfixture"
)

// After a key rotation ResealSecrets seals the servers' headers again under
// the new key: the server then reads with the new key alone.
func TestResealSecretsAfterKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	ring := func(current string, previous ...string) *secret.Keyring {
		return secrettest.Ring(t, current, previous...)
	}
	oldKey, newKey := strings.Repeat("o", 40), strings.Repeat("n", 40)
	name, transport, u := "fx", "streamable_http", "http://mcp.example.test/mcp"
	for _, n := range []string{"fx", "plain"} {
		in := mcp.Input{Name: &n, Transport: &transport, URL: &u}
		if n == name {
			in.Headers = map[string]string{"Authorization": "Bearer fx-token"}
		}
		if _, err := mcp.NewStore(pool, ring(oldKey), mcpfixture.OpenGuard{}).Create(ctx, in, "adm"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mcp.NewStore(pool, ring(newKey), mcpfixture.OpenGuard{}).Get(ctx, name); err == nil {
		t.Fatal("the new key alone opened headers sealed with the old one")
	}
	n, failed, err := mcp.NewStore(pool, ring(newKey, oldKey), mcpfixture.OpenGuard{}).ResealSecrets(ctx)
	if err != nil || n != 1 || len(failed) != 0 {
		t.Fatalf("reseal: %d %v %v, want the one server with headers", n, failed, err)
	}
	s, err := mcp.NewStore(pool, ring(newKey), mcpfixture.OpenGuard{}).Get(ctx, name)
	if err != nil || s.Headers["Authorization"] != "Bearer fx-token" {
		t.Fatalf("after the reseal, with the new key alone: %v %+v", err, s.Headers)
	}
	if _, _, err := mcp.NewStore(pool, (*secret.Keyring)(nil), mcpfixture.OpenGuard{}).ResealSecrets(ctx); err == nil {
		t.Fatal("resealed without a key")
	}
}
