// Package secrettest builds key rings for tests of secrets at rest.
//
// Imported by: tests only. May import: shared/secret, testing.
package secrettest

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/secret"
)

// Ring is a key ring sealing with current and opening with previous too
// (a rotation); the test fails when a key is refused.
func Ring(t testing.TB, current string, previous ...string) *secret.Keyring {
	t.Helper()
	k, err := secret.New(current, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
