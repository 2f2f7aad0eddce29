package auth_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

func TestNewServiceValidatesSecrets(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	a, b := bytes.Repeat([]byte("a"), 32), bytes.Repeat([]byte("b"), 32)
	cases := []struct {
		name    string
		jwt, ak []byte
		ok      bool
	}{
		{"valid", a, b, true},
		{"short jwt secret", a[:31], b, false},
		{"short api key secret", a, b[:31], false},
		{"missing secrets", nil, nil, false},
		{"same secret twice", a, bytes.Clone(a), false},
	}
	for _, tc := range cases {
		_, err := auth.NewService(pool, auth.Config{JWTSecret: tc.jwt, APIKeySecret: tc.ak})
		if (err == nil) != tc.ok {
			t.Errorf("%s: NewService error = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestLoadOrCreateSecretsConcurrentProcessesAgree(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()

	const n = 12
	type pair struct{ jwt, ak []byte }
	got := make([]pair, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i].jwt, got[i].ak, errs[i] = auth.LoadOrCreateSecrets(ctx, pool)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if !bytes.Equal(got[i].jwt, got[0].jwt) || !bytes.Equal(got[i].ak, got[0].ak) {
			t.Fatalf("call %d returned different secrets than call 0", i)
		}
	}
	if len(got[0].jwt) < auth.MinSecretBytes || len(got[0].ak) < auth.MinSecretBytes || bytes.Equal(got[0].jwt, got[0].ak) {
		t.Fatalf("generated secrets are weak or equal: %d/%d bytes", len(got[0].jwt), len(got[0].ak))
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM instance_secrets`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("instance_secrets rows = %d (%v), want 2", rows, err)
	}
	// A later start reads the same values back, and they make a valid service.
	jwt, ak, err := auth.LoadOrCreateSecrets(ctx, pool)
	if err != nil || !bytes.Equal(jwt, got[0].jwt) || !bytes.Equal(ak, got[0].ak) {
		t.Fatalf("second start got different secrets (err %v)", err)
	}
	if _, err := auth.NewService(pool, auth.Config{JWTSecret: jwt, APIKeySecret: ak}); err != nil {
		t.Fatalf("NewService with generated secrets: %v", err)
	}
}
