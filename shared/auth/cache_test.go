package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// forward is Invalidations delivered to other processes' services (what the
// Redis channel does between processes).
type forward struct{ to []*auth.Service }

func (f *forward) Publish(_ context.Context, m string) error {
	for _, s := range f.to {
		s.Evict(m)
	}
	return nil
}

// With the principal cache on, revoking or disabling an API key stops it in
// this process and in every other one at once, not after the TTL.
func TestCachedAPIKeyRevocationIsImmediateEverywhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	alice := f.user(t, admin, "alice")
	bus := &forward{}
	mk := func() *auth.Service {
		s, err := auth.NewService(f.pool, auth.Config{JWTSecret: testJWTSecret, APIKeySecret: testAPIKeySecret, Now: f.clock.Now,
			CacheTTL: time.Hour, Invalidations: bus})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := mk(), mk()
	bus.to = []*auth.Service{a, b}
	created, err := a.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "cache-test-1", Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	hdr := "Bearer " + created.Secret
	for _, s := range []*auth.Service{a, b} {
		if p, err := s.Authenticate(ctx, hdr); err != nil || p.UID != "alice" {
			t.Fatalf("fresh key: %+v %v", p, err)
		}
	}
	// The key is now cached in both; a revocation in one process evicts both.
	if err := a.RevokeAPIKey(ctx, alice, created.APIKey.ID); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*auth.Service{a, b} {
		_, err := s.Authenticate(ctx, hdr)
		wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")
	}
	// An expired key is refused from the cache too.
	exp := f.clock.Now().Add(time.Minute)
	short, err := a.CreateAPIKey(ctx, alice, auth.NewAPIKey{RequestID: "cache-test-2", Name: "short", ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(ctx, "Bearer "+short.Secret); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	_, err = b.Authenticate(ctx, "Bearer "+short.Secret)
	wantCode(t, err, failure.KindUnauthorized, "invalid_api_key")

	// A JWT subject is evicted by InvalidateUser (role change, deletion).
	tok, err := a.Login(ctx, "alice", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := b.Authenticate(ctx, "Bearer "+tok.AccessToken); err != nil || p.Role != auth.RoleUser {
		t.Fatalf("jwt: %+v %v", p, err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE users SET role = 'admin' WHERE uid = 'alice'`); err != nil {
		t.Fatal(err)
	}
	if p, _ := b.Authenticate(ctx, "Bearer "+tok.AccessToken); p.Role != auth.RoleUser {
		t.Fatalf("without an invalidation the cache should still answer the old role (TTL bound), got %s", p.Role)
	}
	a.InvalidateUser(ctx, alice.UserID)
	if p, err := b.Authenticate(ctx, "Bearer "+tok.AccessToken); err != nil || p.Role != auth.RoleAdmin {
		t.Fatalf("after InvalidateUser: %+v %v", p, err)
	}
}
