package secret_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/secret"
)

var (
	keyA = strings.Repeat("a", 32)
	keyB = strings.Repeat("b", 40)
	keyC = strings.Repeat("c", 33)
)

func ring(t *testing.T, cur string, prev ...string) *secret.Keyring {
	t.Helper()
	k, err := secret.New(cur, prev...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := ring(t, keyA)
	for _, plain := range []string{"", "sk-live-123", strings.Repeat("é", 5000), "nul\x00inside"} {
		s1, err := k.Seal(plain, "model_provider:1:api_key")
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := k.Seal(plain, "model_provider:1:api_key")
		if s1 == s2 {
			t.Fatal("two seals of one value are equal: the nonce is not fresh")
		}
		if strings.Contains(s1, plain) && plain != "" {
			t.Fatalf("sealed value contains the plaintext: %s", s1)
		}
		got, err := k.Open(s1, "model_provider:1:api_key")
		if err != nil || got != plain {
			t.Fatalf("Open = %q, %v; want %q", got, err, plain)
		}
		if !secret.IsSealed(s1) {
			t.Fatalf("IsSealed(%q) = false", s1)
		}
	}
}

func TestOpenRefusesOtherAssociatedDataAndTampering(t *testing.T) {
	k := ring(t, keyA)
	s, _ := k.Seal("token", "mcp_server:7:headers")
	if _, err := k.Open(s, "mcp_server:8:headers"); !errors.Is(err, secret.ErrCorrupt) {
		t.Fatalf("Open with another row's associated data: %v, want ErrCorrupt", err)
	}
	// Flip one character of the body.
	b := []byte(s)
	i := len(b) - 3
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	if _, err := k.Open(string(b), "mcp_server:7:headers"); !errors.Is(err, secret.ErrCorrupt) {
		t.Fatalf("Open of a tampered value: %v, want ErrCorrupt", err)
	}
	for _, bad := range []string{"", "plain", "ys1.zz.abc", "ys2." + s[4:], "ys1.00000000.!!!", "ys1.00000000."} {
		if _, err := k.Open(bad, "x"); err == nil {
			t.Fatalf("Open(%q) succeeded", bad)
		}
	}
	// Another key cannot open it (unknown key id).
	if _, err := ring(t, keyB).Open(s, "mcp_server:7:headers"); !errors.Is(err, secret.ErrUnknownKey) {
		t.Fatalf("Open under another key: %v, want ErrUnknownKey", err)
	}
}

func TestRotation(t *testing.T) {
	old := ring(t, keyA)
	sealed, _ := old.Seal("bucket-secret", "kb_source:3:secret_key")

	// The operator moves A to PREVIOUS and sets B.
	rotated := ring(t, keyB, secret.ParsePrevious(" "+keyC+" , "+keyA+",")...)
	if !rotated.NeedsRotation(sealed) {
		t.Fatal("a value sealed with the previous key does not need rotation")
	}
	if got, err := rotated.Open(sealed, "kb_source:3:secret_key"); err != nil || got != "bucket-secret" {
		t.Fatalf("Open with the previous key = %q, %v", got, err)
	}
	resealed, changed, err := rotated.Reseal(sealed, "kb_source:3:secret_key")
	if err != nil || !changed || rotated.NeedsRotation(resealed) {
		t.Fatalf("Reseal = changed %v, err %v, still needs rotation %v", changed, err, rotated.NeedsRotation(resealed))
	}
	if !strings.Contains(resealed, "."+rotated.KeyID()+".") {
		t.Fatalf("resealed value %q does not carry the current key id %s", resealed, rotated.KeyID())
	}
	same, changed, err := rotated.Reseal(resealed, "kb_source:3:secret_key")
	if err != nil || changed || same != resealed {
		t.Fatalf("Reseal of a current value: changed %v, err %v", changed, err)
	}
	// Once A is dropped, only the resealed value opens.
	final := ring(t, keyB)
	if _, err := final.Open(sealed, "kb_source:3:secret_key"); !errors.Is(err, secret.ErrUnknownKey) {
		t.Fatalf("old value after dropping its key: %v", err)
	}
	if got, err := final.Open(resealed, "kb_source:3:secret_key"); err != nil || got != "bucket-secret" {
		t.Fatalf("resealed value: %q, %v", got, err)
	}
}

func TestKeyRules(t *testing.T) {
	if _, err := secret.New(strings.Repeat("x", 31)); err == nil || !strings.Contains(err.Error(), "32 bytes") {
		t.Fatalf("short key: %v", err)
	}
	if _, err := secret.New(keyA, "short"); err == nil {
		t.Fatal("short previous key accepted")
	}
	if _, err := secret.New(keyA, keyA); err == nil {
		t.Fatal("previous key equal to the current one accepted")
	}
	if ring(t, keyA).KeyID() == ring(t, keyB).KeyID() {
		t.Fatal("two keys share an id")
	}
}

func TestNilKeyringRefusesToStore(t *testing.T) {
	var k *secret.Keyring
	if k.Enabled() {
		t.Fatal("nil keyring is enabled")
	}
	_, err := k.Seal("x", "y")
	if !errors.Is(err, secret.ErrNoKey) {
		t.Fatalf("Seal without a key: %v", err)
	}
	if fe, ok := failure.As(err); !ok || fe.Kind != failure.KindUnavailable || fe.Code != "encryption_key_missing" {
		t.Fatalf("Seal without a key: %#v", err)
	}
	if _, err := k.Open("ys1.00000000.AAAA", "y"); !errors.Is(err, secret.ErrNoKey) {
		t.Fatalf("Open without a key: %v", err)
	}
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "encryption.key")
	var wg sync.WaitGroup
	keys := make([]string, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = secret.LoadOrCreateKeyFile(path) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if keys[i] != keys[0] {
			t.Fatalf("concurrent starts got different keys: %q vs %q", keys[i], keys[0])
		}
	}
	if len(keys[0]) < secret.MinKeyBytes {
		t.Fatalf("generated key is %d bytes", len(keys[0]))
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	again, err := secret.LoadOrCreateKeyFile(path)
	if err != nil || again != keys[0] {
		t.Fatalf("reload = %q, %v", again, err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
	if _, err := secret.New(keys[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secret.LoadOrCreateKeyFile(path); err == nil {
		t.Fatal("a short key file was accepted")
	}
}
