package auth_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestTokenAuthenticatesUntilExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	alice := f.user(t, admin, "alice")

	tok, err := f.svc.IssueToken(context.Background(), alice.UserID)
	if err != nil {
		t.Fatal(err)
	}
	// The payload is {"sub": "<id>", "exp", "iat"}, HS256.
	var claims jwt.MapClaims
	parsed, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return testJWTSecret, nil },
		jwt.WithTimeFunc(f.clock.Now))
	if err != nil || parsed.Method.Alg() != "HS256" {
		t.Fatalf("parse issued token: %v", err)
	}
	if sub, _ := claims.GetSubject(); sub == "" || claims["exp"] == nil || claims["iat"] == nil {
		t.Fatalf("claims = %v", claims)
	}

	p, err := f.svc.Authenticate(ctx, "Bearer "+tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != alice.UserID || p.UID != "alice" || p.Role != auth.RoleUser || p.DepartmentID == nil || p.APIKeyID != nil {
		t.Fatalf("principal = %+v", p)
	}

	f.clock.Advance(auth.DefaultTokenTTL - time.Second)
	if _, err := f.svc.Authenticate(ctx, "Bearer "+tok); err != nil {
		t.Fatalf("token just before expiry: %v", err)
	}
	f.clock.Advance(2 * time.Second)
	_, err = f.svc.Authenticate(ctx, "Bearer "+tok)
	wantCode(t, err, failure.KindUnauthorized, "invalid_token")
}

func TestTokenRejectsForgeries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	claims := jwt.RegisteredClaims{
		Subject:   "1",
		ExpiresAt: jwt.NewNumericDate(f.clock.Now().Add(time.Hour)),
	}
	otherKey, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(bytes.Repeat([]byte("x"), 32))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "1"}).SignedString(testJWTSecret)
	badSub, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "root", ExpiresAt: claims.ExpiresAt}).SignedString(testJWTSecret)
	missingUser, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "999999", ExpiresAt: claims.ExpiresAt}).SignedString(testJWTSecret)
	good, _ := f.svc.IssueToken(context.Background(), admin.UserID)
	tampered := good[:len(good)-2] + flip(good[len(good)-2:])

	for name, tok := range map[string]string{
		"other key": otherKey, "alg none": none, "no exp": noExp, "non-numeric sub": badSub,
		"missing user": missingUser, "tampered signature": tampered, "garbage": "not-a-jwt",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.svc.Authenticate(ctx, "Bearer "+tok)
			wantCode(t, err, failure.KindUnauthorized, "invalid_token")
		})
	}
	for _, header := range []string{"", "Bearer", "Bearer ", "Basic " + good, good, "Token " + good} {
		_, err := f.svc.Authenticate(ctx, header)
		wantCode(t, err, failure.KindUnauthorized, "not_authenticated")
	}
}

func TestTokenOfDeletedUserIsRejected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.superadmin(t)
	alice := f.user(t, admin, "alice")
	tok, _ := f.svc.IssueToken(context.Background(), alice.UserID)
	if _, err := f.pool.Exec(ctx, `UPDATE users SET is_deleted = true, deleted_at = now() WHERE id = $1`, alice.UserID); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Authenticate(ctx, "Bearer "+tok)
	wantCode(t, err, failure.KindUnauthorized, "invalid_token")
	_, err = f.svc.Login(ctx, "alice", testPassword)
	wantCode(t, err, failure.KindUnauthorized, "invalid_credentials")
}

func flip(s string) string {
	if strings.HasPrefix(s, "A") {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}
