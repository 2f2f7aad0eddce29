package auth_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestConcurrentInitializeHasOneWinner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if first, err := f.svc.FirstRun(ctx); err != nil || !first {
		t.Fatalf("FirstRun on empty instance = %v, %v", first, err)
	}

	const n = 8
	toks := make([]auth.TokenResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			toks[i], errs[i] = f.svc.Initialize(ctx, "admin"+string(rune('a'+i)), testPassword, "")
		})
	}
	wg.Wait()

	winners := 0
	var winner auth.TokenResponse
	for i := range n {
		if errs[i] == nil {
			winners++
			winner = toks[i]
			continue
		}
		wantCode(t, errs[i], failure.KindConflict, "already_initialized")
	}
	if winners != 1 {
		t.Fatalf("%d winners, want exactly 1", winners)
	}
	if got := f.count(t, `SELECT count(*) FROM users`); got != 1 {
		t.Fatalf("%d users after concurrent initialize, want 1", got)
	}
	if got := f.count(t, `SELECT count(*) FROM users WHERE role = 'superadmin' AND department_id = (SELECT id FROM departments WHERE name = 'default')`); got != 1 {
		t.Fatal("the first user is not a superadmin in the default department")
	}
	if winner.Role != auth.RoleSuperadmin || winner.Username != winner.UID || winner.AccessToken == "" {
		t.Fatalf("winner token response = %+v", winner)
	}
	if p, err := f.svc.Authenticate(ctx, "Bearer "+winner.AccessToken); err != nil || !p.IsSuperadmin() {
		t.Fatalf("winner token: %+v %v", p, err)
	}
	if first, _ := f.svc.FirstRun(ctx); first {
		t.Fatal("FirstRun still true after initialization")
	}
	// Later calls are refused too.
	_, err := f.svc.Initialize(ctx, "late", testPassword, "")
	wantCode(t, err, failure.KindConflict, "already_initialized")
}

func TestInitializeRejectsBadInputWithoutRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	cases := []struct {
		uid, password, username string
		code                    string
	}{
		{"", testPassword, "", "invalid_uid"},
		{"has space", testPassword, "", "invalid_uid"},
		{"x/../y", testPassword, "", "invalid_uid"},
		{strings.Repeat("a", 65), testPassword, "", "invalid_uid"},
		{"root", "short", "", "weak_password"},
		{"root", strings.Repeat("p", 129), "", "weak_password"},
	}
	for _, tc := range cases {
		_, err := f.svc.Initialize(ctx, tc.uid, tc.password, tc.username)
		wantCode(t, err, failure.KindUnprocessable, tc.code)
	}
	if n := f.count(t, `SELECT count(*) FROM users`) + f.count(t, `SELECT count(*) FROM instance_state`); n != 0 {
		t.Fatalf("rejected initialize left %d rows", n)
	}
	// The instance can still be initialized afterwards.
	if _, err := f.svc.Initialize(ctx, "root", testPassword, "The Root"); err != nil {
		t.Fatalf("Initialize after rejections: %v", err)
	}
}
