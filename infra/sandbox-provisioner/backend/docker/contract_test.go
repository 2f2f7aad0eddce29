package docker_test

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/backendtest"
)

// TestContract runs the backend contract (the same escape and limit tests
// as bwrap) against a real Docker Engine, each subtest with its own
// instance label so parallel subtests and test processes never see each
// other's containers.
func TestContract(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend { return newWorld(t, nil).b }, t.TempDir())
}
