package docker_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestProductionDockerfileMatchesTheBackends: the image no registry lets
// us build here still agrees with what the backends assume: the sandbox
// user 1000:1000, the exec agent's package and port, /bin/sh.
func TestProductionDockerfileMatchesTheBackends(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../image/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{"USER 1000:1000", "useradd -u 1000 -g 1000 -d /home/gem", "EXPOSE 8080", "FROM debian:bookworm-slim", "python3 "} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	m := regexp.MustCompile(`go build .* (\./infra/\S+)`).FindStringSubmatch(df)
	if m == nil {
		t.Fatal("Dockerfile builds no agent")
	}
	if _, err := os.Stat(filepath.Join("../../../..", m[1], "main.go")); err != nil {
		t.Fatalf("the agent the Dockerfile builds: %v", err)
	}
}
