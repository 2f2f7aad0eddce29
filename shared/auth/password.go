package auth

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Password policy.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 128
)

// argon2id parameters for new hashes (OWASP's minimum recommendation:
// 19 MiB, 2 passes, 1 lane). Verification reads the parameters from the
// stored hash, so hashes made by the original product (argon2-cffi defaults)
// verify too.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// validatePassword enforces the length policy (counted in characters).
func validatePassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < MinPasswordLen || n > MaxPasswordLen {
		return failure.Unprocessable("weak_password", "password must be %d to %d characters long", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

// HashPassword returns an argon2id hash in PHC string form:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash> (unpadded standard base64).
func HashPassword(pw string) (string, error) {
	salt, err := randomBytes(argonSaltLen)
	if err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemoryKiB, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// VerifyPassword reports whether pw matches the PHC-encoded argon2id hash.
// The comparison is constant-time; a malformed hash is an error.
func VerifyPassword(encoded, pw string) (bool, error) {
	p, err := parseArgon2id(encoded)
	if err != nil {
		return false, err
	}
	key := argon2.IDKey([]byte(pw), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(key, p.key) == 1, nil
}

type argonParams struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

var errBadHash = errors.New("malformed argon2id hash")

func parseArgon2id(encoded string) (argonParams, error) {
	var p argonParams
	parts := strings.Split(encoded, "$")
	// "", "argon2id", "v=19", "m=…,t=…,p=…", salt, hash
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return p, fmt.Errorf("%w: unsupported version %q", errBadHash, parts[2])
	}
	var threads uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &threads); err != nil {
		return p, fmt.Errorf("%w: parameters %q", errBadHash, parts[3])
	}
	// Bounds keep a corrupted row from turning a login into a memory bomb.
	if p.time < 1 || p.time > 64 || threads < 1 || threads > 64 || p.memory < 8*threads || p.memory > 1<<21 {
		return p, fmt.Errorf("%w: parameters out of range %q", errBadHash, parts[3])
	}
	p.threads = uint8(threads)
	var err error
	if p.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(p.salt) < 8 {
		return p, fmt.Errorf("%w: salt", errBadHash)
	}
	if p.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(p.key) < 16 || len(p.key) > 128 {
		return p, fmt.Errorf("%w: key", errBadHash)
	}
	return p, nil
}
