// Package secret encrypts secrets at rest (model provider API keys, MCP
// headers, bucket credentials, connector tokens) with one operator-held key,
// YUXI_ENCRYPTION_KEY, that never lives in the database.
//
// A Keyring seals with AES-256-GCM under a key derived (HKDF-SHA256) from the
// current key, and opens with the current key or any previous one: every
// ciphertext carries the id of the key that sealed it, so an operator rotates
// by moving the old key to YUXI_ENCRYPTION_KEY_PREVIOUS, setting a new
// YUXI_ENCRYPTION_KEY, and letting the owners Reseal what NeedsRotation
// reports (each owner's ResealSecrets, all of them at once through
// POST /api/system/secrets/reseal). The associated data binds a ciphertext to where it is stored (for
// example "model_provider:42:api_key"), so a value copied to another row or
// column does not open.
//
// A nil *Keyring is the "no key configured" ring: Seal and Open answer
// ErrNoKey (503 encryption_key_missing at the edge), so a process without a
// key refuses to store secrets instead of storing them in the clear.
//
// Imported by: shared/bootstrap and every domain package that stores a
// secret. May import: stdlib and shared/failure only.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// MinKeyBytes is the shortest accepted key.
const MinKeyBytes = 32

// prefix marks the format version of a sealed value: "ys1.<key id>.<base64url(nonce‖ciphertext‖tag)>".
const prefix = "ys1"

var (
	// ErrNoKey: no YUXI_ENCRYPTION_KEY is configured, so secrets cannot be stored or read.
	ErrNoKey = failure.New(failure.KindUnavailable, "encryption_key_missing",
		"storing secrets needs YUXI_ENCRYPTION_KEY (at least %d bytes) to be configured", MinKeyBytes)
	// ErrUnknownKey: the value was sealed with a key that is neither the
	// current nor a previous one (a rotation dropped it too early).
	ErrUnknownKey = failure.New(failure.KindInternal, "encryption_key_unknown",
		"the secret was sealed with a key that is no longer configured")
	// ErrCorrupt: the value is malformed, was altered, or is opened with other associated data.
	ErrCorrupt = failure.New(failure.KindInternal, "secret_corrupt", "the stored secret cannot be decrypted")
)

type key struct {
	id   string // 8 hex digits, derived from the key
	aead cipher.AEAD
}

// Keyring seals with its current key and opens with any of its keys.
type Keyring struct {
	current  key
	previous []key
}

// New builds a keyring from the current key and the previous ones (oldest
// last or first, order does not matter). Each key is at least MinKeyBytes;
// the current key must differ from every previous one.
func New(current string, previous ...string) (*Keyring, error) {
	cur, err := derive("YUXI_ENCRYPTION_KEY", current)
	if err != nil {
		return nil, err
	}
	k := &Keyring{current: cur}
	for _, p := range previous {
		pk, err := derive("YUXI_ENCRYPTION_KEY_PREVIOUS", p)
		if err != nil {
			return nil, err
		}
		if subtle.ConstantTimeCompare([]byte(p), []byte(current)) == 1 {
			return nil, errors.New("YUXI_ENCRYPTION_KEY_PREVIOUS must not repeat YUXI_ENCRYPTION_KEY")
		}
		k.previous = append(k.previous, pk)
	}
	return k, nil
}

// ParsePrevious splits YUXI_ENCRYPTION_KEY_PREVIOUS: keys separated by commas
// (so a key cannot itself contain a comma), blanks ignored.
func ParsePrevious(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func derive(name, raw string) (key, error) {
	if len(raw) < MinKeyBytes {
		return key{}, fmt.Errorf("%s must be at least %d bytes, got %d", name, MinKeyBytes, len(raw))
	}
	m := hmac.New(sha256.New, []byte(raw))
	m.Write([]byte("yuxi secret key id v1"))
	id := hex.EncodeToString(m.Sum(nil)[:4])
	dk, err := hkdf.Key(sha256.New, []byte(raw), nil, "yuxi secret aes-256-gcm v1", 32)
	if err != nil {
		return key{}, fmt.Errorf("derive %s: %w", name, err)
	}
	block, err := aes.NewCipher(dk)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	return key{id: id, aead: aead}, nil
}

// Enabled reports whether a key is configured (k is not nil).
func (k *Keyring) Enabled() bool { return k != nil }

// KeyID is the id of the current key ("" when none is configured); it is not
// secret and may be logged or stored next to the values.
func (k *Keyring) KeyID() string {
	if k == nil {
		return ""
	}
	return k.current.id
}

func aad(id, associatedData string) []byte {
	return []byte(prefix + "." + id + "." + associatedData)
}

// Seal encrypts plaintext under the current key, bound to associatedData
// (which is not secret and must be given again to Open). Each call draws a
// fresh random nonce, so sealing one value twice gives different strings.
func (k *Keyring) Seal(plaintext, associatedData string) (string, error) {
	if k == nil {
		return "", ErrNoKey
	}
	a := k.current.aead
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plaintext)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	out := a.Seal(nonce, nonce, []byte(plaintext), aad(k.current.id, associatedData))
	return prefix + "." + k.current.id + "." + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a value from Seal with the key it names, given the same
// associated data.
func (k *Keyring) Open(sealed, associatedData string) (string, error) {
	if k == nil {
		return "", ErrNoKey
	}
	id, body, err := split(sealed)
	if err != nil {
		return "", err
	}
	kk, ok := k.find(id)
	if !ok {
		return "", ErrUnknownKey
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	n := kk.aead.NonceSize()
	if err != nil || len(raw) < n+kk.aead.Overhead() {
		return "", ErrCorrupt
	}
	plain, err := kk.aead.Open(nil, raw[:n], raw[n:], aad(id, associatedData))
	if err != nil {
		return "", ErrCorrupt
	}
	return string(plain), nil
}

// NeedsRotation reports whether sealed was made with another key than the
// current one (the owner should Reseal it). Malformed values report false:
// Open reports them.
func (k *Keyring) NeedsRotation(sealed string) bool {
	if k == nil {
		return false
	}
	id, _, err := split(sealed)
	return err == nil && id != k.current.id
}

// Reseal opens sealed and seals it again under the current key when it needs
// rotation; otherwise it returns sealed unchanged. changed tells the caller
// whether to write the new value back.
func (k *Keyring) Reseal(sealed, associatedData string) (out string, changed bool, err error) {
	if !k.NeedsRotation(sealed) {
		if _, err := k.Open(sealed, associatedData); err != nil {
			return "", false, err
		}
		return sealed, false, nil
	}
	plain, err := k.Open(sealed, associatedData)
	if err != nil {
		return "", false, err
	}
	out, err = k.Seal(plain, associatedData)
	return out, err == nil, err
}

// IsSealed reports whether v looks like a value from Seal (it does not check
// that it opens).
func IsSealed(v string) bool {
	_, _, err := split(v)
	return err == nil
}

func split(sealed string) (id, body string, err error) {
	parts := strings.SplitN(sealed, ".", 3)
	if len(parts) != 3 || parts[0] != prefix || len(parts[1]) != 8 || parts[2] == "" {
		return "", "", ErrCorrupt
	}
	return parts[1], parts[2], nil
}

func (k *Keyring) find(id string) (key, bool) {
	if k.current.id == id {
		return k.current, true
	}
	for _, p := range k.previous {
		if p.id == id {
			return p, true
		}
	}
	return key{}, false
}
