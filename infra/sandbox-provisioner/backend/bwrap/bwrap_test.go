package bwrap_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/backendtest"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/bwrap"
)

// newBackend gives each test its own cgroup parent, removed at the end, so
// parallel test processes never see each other's sandboxes.
func newBackend(t *testing.T) backend.Backend {
	t.Helper()
	b, err := bwrap.New(bwrap.Config{CgroupParent: "yuxi-test-" + randHex()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil && os.Geteuid() == 0 && !b.CgroupsAvailable() {
		t.Fatal("cgroup v1 memory and pids are mounted and we are root, but the backend found no writable groups")
	}
	t.Cleanup(func() {
		ids, _ := b.List(context.Background())
		for _, id := range ids {
			_ = b.Destroy(context.Background(), id)
		}
		b.Close()
	})
	return b
}

func randHex() string {
	p := make([]byte, 4)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

func TestContract(t *testing.T) {
	backendtest.Run(t, newBackend, t.TempDir())
}
