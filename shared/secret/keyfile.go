package secret

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadOrCreateKeyFile returns the key kept in path, creating the file (mode
// 0600, 48 random bytes base64-encoded) when it does not exist. It is for the
// local all-in-one runner only, whose processes share one data directory:
// deployed functions get YUXI_ENCRYPTION_KEY from the platform's secret store,
// because a key generated per instance would not open another's values. The
// key is never written to the database.
func LoadOrCreateKeyFile(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		k := strings.TrimSpace(string(b))
		if len(k) < MinKeyBytes {
			return "", fmt.Errorf("encryption key file %s: shorter than %d bytes", path, MinKeyBytes)
		}
		return k, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read encryption key file: %w", err)
	}
	raw := make([]byte, 48)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate encryption key: %w", err)
	}
	k := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create encryption key file: %w", err)
	}
	// Write a temporary file, then link it into place: the link fails when
	// another process created the key first, and nobody reads a half-written file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".encryption-key-*")
	if err != nil {
		return "", fmt.Errorf("create encryption key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("create encryption key file: %w", err)
	}
	if _, err := tmp.WriteString(k + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write encryption key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write encryption key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return LoadOrCreateKeyFile(path) // another process won the race: use its key
	} else if err != nil {
		return "", fmt.Errorf("create encryption key file: %w", err)
	}
	return k, nil
}
