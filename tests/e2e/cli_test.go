package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestCLI drives the `yuxi` command line (infra/cli) against the platform:
// remotes, login with an API key, whoami, status, logout, and knowledge
// bases (list, a resumable directory upload, query).
func TestCLI(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, "./infra/cli/cmd/yuxi")
	p := testkit.StartLocal(t, nil)
	home := t.TempDir()
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	ok := func(args ...string) string {
		t.Helper()
		out, errs, code := run(args...)
		if code != 0 {
			t.Fatalf("yuxi %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	js := func(v any, args ...string) {
		t.Helper()
		out := ok(append([]string{"--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("yuxi --json %s: %q: %v", strings.Join(args, " "), out, err)
		}
	}
	fails := func(wantCode int, wantMsg string, args ...string) {
		t.Helper()
		out, errs, code := run(args...)
		if code != wantCode || !strings.HasPrefix(errs, "yuxi: ") || !strings.Contains(errs, wantMsg) {
			t.Fatalf("yuxi %s: exit %d, stderr %q (stdout %q); want exit %d with %q", strings.Join(args, " "), code, errs, out, wantCode, wantMsg)
		}
	}

	fails(1, "no remote", "whoami")
	ok("remote", "add", "local", p.URL)
	st, err := os.Stat(filepath.Join(home, ".yuxi", "config.toml"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v", st, err)
	}
	if out := ok("remote", "ping"); !strings.Contains(out, "ok") {
		t.Errorf("ping: %q", out)
	}
	var remotes []map[string]any
	js(&remotes, "remote", "list")
	if len(remotes) != 1 || remotes[0]["name"] != "local" || remotes[0]["current"] != true || remotes[0]["logged_in"] != false {
		t.Fatalf("remotes: %v", remotes)
	}
	fails(1, "not logged in", "whoami")
	fails(1, "login to local", "login", "--api-key", "yxkey_not_a_key")
	key := p.Admin.APIKey("cli")
	ok("login", "--api-key", key)
	if data, _ := os.ReadFile(filepath.Join(home, ".yuxi", "config.toml")); !strings.Contains(string(data), key) {
		t.Fatal("the key was not stored")
	}
	var me map[string]any
	js(&me, "whoami")
	if me["uid"] != "admin" {
		t.Fatalf("whoami: %v", me)
	}
	var status map[string]any
	js(&status, "status")
	if status["reachable"] != true || status["logged_in"] != true || status["uid"] != "admin" {
		t.Fatalf("status: %v", status)
	}

	kbID := p.Admin.NewKnowledgeBase("cli kb", "for the CLI", nil)
	var kbs []map[string]any
	js(&kbs, "kb", "list")
	found := false
	for _, k := range kbs {
		found = found || k["kb_id"] == kbID
	}
	if !found {
		t.Fatalf("kb list: %v", kbs)
	}

	dir := t.TempDir()
	write := func(rel, content string) {
		fp := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("guide/intro.md", "# Intro\n\nThe pangolin protocol needs two keys.\n")
	write("guide/deep/notes.md", "# Notes\n\nTapirs sleep in the afternoon.\n")
	write("readme.txt", "plain text file about otters\n")
	write("logo.png", "not really a png")
	var sum struct {
		Total, Uploaded, Skipped, Failed int
	}
	js(&sum, "kb", "upload", kbID, dir, "--concurrency", "4", "--include-ext", "md,txt")
	if sum.Total != 3 || sum.Uploaded != 3 || sum.Skipped != 0 || sum.Failed != 0 {
		t.Fatalf("first upload: %+v", sum)
	}
	// Re-running skips what is there (by content hash); a new file goes up.
	write("guide/more.md", "# More\n\nA new page.\n")
	js(&sum, "kb", "upload", kbID, dir, "--include-ext", "md,txt")
	if sum.Total != 4 || sum.Uploaded != 1 || sum.Skipped != 3 || sum.Failed != 0 {
		t.Fatalf("second upload: %+v", sum)
	}
	// The directory structure became folders.
	var listing struct {
		Files []map[string]any `json:"files"`
	}
	p.Admin.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/search?limit=500", nil).Decode(t, &listing)
	names := map[string]map[string]any{}
	for _, f := range listing.Files {
		names[f["filename"].(string)] = f
	}
	guide, deep, notes := names["guide"], names["deep"], names["notes.md"]
	if guide == nil || deep == nil || notes == nil || guide["is_folder"] != true || deep["parent_id"] != guide["file_id"] || notes["parent_id"] != deep["file_id"] ||
		names["readme.txt"] == nil || names["readme.txt"]["parent_id"] != nil || names["logo.png"] != nil {
		t.Fatalf("folders: %v", names)
	}
	p.Admin.WaitFile(kbID, names["intro.md"]["file_id"].(string), ingestWait, "indexed")
	var hits map[string]any
	js(&hits, "kb", "query", kbID, "pangolin protocol")
	if res, _ := hits["results"].([]any); len(res) == 0 || !strings.Contains(res[0].(map[string]any)["content"].(string), "pangolin") {
		t.Fatalf("query: %v", hits)
	}
	if out := ok("kb", "query", kbID, "pangolin"); !strings.Contains(out, "pangolin") {
		t.Errorf("text query output: %q", out)
	}
	intro := names["intro.md"]["file_id"].(string)
	if out := ok("kb", "open", kbID, intro, "--limit", "50"); !strings.Contains(out, "The pangolin protocol needs two keys.") {
		t.Errorf("kb open: %q", out)
	}
	var match map[string]any
	js(&match, "kb", "find", kbID, intro, "two keys")
	if wins, _ := match["windows"].([]any); len(wins) != 1 || !strings.Contains(wins[0].(map[string]any)["content"].(string), "two keys") {
		t.Errorf("kb find: %v", match)
	}

	fails(2, "unknown command", "frobnicate")
	fails(2, "--concurrency", "kb", "upload", kbID, dir, "--concurrency", "0")
	ok("logout")
	fails(1, "not logged in", "whoami")

	// The device-code login: the CLI prints a code, a signed-in browser
	// session approves it, the CLI gets a key of its own.
	cmd := exec.Command(bin, "login", "--browser", "--no-open")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.Contains(line, "/auth/cli/authorize?user_code=") {
		t.Fatalf("device login prompt: %q %v", line, err)
	}
	fields := strings.Fields(line)
	code := fields[len(fields)-1]
	p.Admin.OK("POST", "/api/auth/cli/sessions/"+code+"/approve", nil)
	go io.Copy(io.Discard, stderr) //nolint:errcheck // drained until exit
	if err := cmd.Wait(); err != nil || !strings.Contains(stdout.String(), "logged in to local as admin") {
		t.Fatalf("device login: %v %q", err, stdout.String())
	}
	js(&me, "whoami")
	if me["uid"] != "admin" {
		t.Fatalf("whoami after the device login: %v", me)
	}
}
