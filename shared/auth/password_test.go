package auth_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

func TestPasswordHashRoundTrip(t *testing.T) {
	t.Parallel()
	h1, err := auth.HashPassword("s3cret-password")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h1, "$argon2id$v=19$m=") || strings.Count(h1, "$") != 5 {
		t.Fatalf("hash %q is not a PHC argon2id string", h1)
	}
	if ok, err := auth.VerifyPassword(h1, "s3cret-password"); err != nil || !ok {
		t.Fatalf("right password: ok=%v err=%v", ok, err)
	}
	if ok, err := auth.VerifyPassword(h1, "s3cret-passwore"); err != nil || ok {
		t.Fatalf("wrong password: ok=%v err=%v", ok, err)
	}
	h2, _ := auth.HashPassword("s3cret-password")
	if h1 == h2 {
		t.Fatal("two hashes of one password are equal: salt is not random")
	}
}

func TestVerifyPasswordReadsParametersFromTheHash(t *testing.T) {
	t.Parallel()
	// argon2-cffi's defaults (the original product's hashes): m=65536, t=3, p=4.
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte("legacy-password"), salt, 3, 65536, 4, 32)
	b64 := base64.RawStdEncoding
	legacy := fmt.Sprintf("$argon2id$v=19$m=65536,t=3,p=4$%s$%s", b64.EncodeToString(salt), b64.EncodeToString(key))
	if ok, err := auth.VerifyPassword(legacy, "legacy-password"); err != nil || !ok {
		t.Fatalf("legacy hash: ok=%v err=%v", ok, err)
	}
	if ok, _ := auth.VerifyPassword(legacy, "other-password"); ok {
		t.Fatal("legacy hash accepted a wrong password")
	}
}

func TestVerifyPasswordRejectsMalformedHashes(t *testing.T) {
	t.Parallel()
	for _, h := range []string{
		"",
		"plaintext",
		"$argon2i$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=16$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=999999999,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=65536,t=3,p=4$!!$aGFzaGhhc2hoYXNoaGFzaA",
	} {
		if ok, err := auth.VerifyPassword(h, "whatever"); err == nil || ok {
			t.Errorf("hash %q: ok=%v err=%v, want an error", h, ok, err)
		}
	}
}
