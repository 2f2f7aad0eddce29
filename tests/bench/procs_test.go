package main

import (
	"os"
	"strings"
	"testing"
)

// The bench waits for the processes' ready lines: a changed line would make
// every figure that starts the local runner time out ("not ready after").
func TestReadyAddrReadsTheReadyLines(t *testing.T) {
	src, err := os.ReadFile("../../infra/local/cmd/yuxi-server/main.go")
	if err != nil {
		t.Fatal(err)
	}
	const runner = `"yuxi: ready, web UI and API on http://%s (all functions`
	if !strings.Contains(string(src), runner) {
		t.Fatalf("the local runner's ready line changed; update readyAddr (want %s)", runner)
	}
	for line, want := range map[string]string{
		"yuxi: ready, web UI and API on http://[::]:34785 (all functions in one process; sandbox provisioner backend bwrap)": "[::]:34785",
		"intake: ready on 127.0.0.1:8080": "127.0.0.1:8080",
	} {
		if got, ok := readyAddr(line); !ok || got != want {
			t.Errorf("readyAddr(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
	if _, ok := readyAddr("yuxi: starting"); ok {
		t.Error("a line without an address read as ready")
	}
}
