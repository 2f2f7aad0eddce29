package execagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/kube/execagent"
)

func post(t *testing.T, url string, req execagent.Request) (execagent.Response, int) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(url+"/exec", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out execagent.Response
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
	}
	return out, resp.StatusCode
}

func TestExecOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := httptest.NewServer(execagent.New(execagent.Config{Workdir: dir, FileSizeBytes: 64 << 10}))
	defer srv.Close()

	res, code := post(t, srv.URL, execagent.Request{Command: `echo out; echo err >&2; echo "$X"; pwd; exit 3`, Env: map[string]string{"X": "x1"}})
	if code != 200 || res.ExitCode != 3 || string(res.Output) != "out\nerr\nx1\n"+dir+"\n" || res.Truncated || res.TimedOut {
		t.Fatalf("%d %+v %q", code, res, res.Output)
	}
	res, _ = post(t, srv.URL, execagent.Request{Command: `head -c 5000 /dev/zero`, MaxOutput: 100})
	if len(res.Output) != 100 || !res.Truncated || res.ExitCode != 0 {
		t.Fatalf("cap: %d %v %d", len(res.Output), res.Truncated, res.ExitCode)
	}
	// The file-size rlimit stops a disk filler at 64 KiB.
	res, _ = post(t, srv.URL, execagent.Request{Command: `dd if=/dev/zero of=big bs=1024 count=1024`})
	fi, err := os.Stat(filepath.Join(dir, "big"))
	if res.ExitCode == 0 || err != nil || fi.Size() > 64<<10 {
		t.Fatalf("disk filler: %+v %q size %v %v", res, res.Output, fi, err)
	}
	if _, code := post(t, srv.URL, execagent.Request{}); code != http.StatusBadRequest {
		t.Fatalf("empty command: %d", code)
	}
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := execagent.New(execagent.Config{Workdir: dir})
	start := time.Now()
	res, err := h.Run(context.Background(), execagent.Request{Command: `sleep 300 & echo $! > child; echo started; sleep 301`, TimeoutMS: 500})
	if err != nil || !res.TimedOut || res.ExitCode != -1 || string(res.Output) != "started\n" {
		t.Fatalf("%+v %q %v", res, res.Output, err)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("the timeout did not end the call")
	}
	b, err := os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// The background child was killed with the group: SIGKILL lands
	// asynchronously, so wait (bounded) for it to be gone or a zombie.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if f := strings.Fields(string(st)); err != nil || len(f) > 2 && f[2] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running: %s", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A command that exits while a background child lives answers at once.
	res, err = h.Run(context.Background(), execagent.Request{Command: `sleep 2 & echo bg`, TimeoutMS: 60000})
	if err != nil || res.TimedOut || string(res.Output) != "bg\n" {
		t.Fatalf("%+v %q %v", res, res.Output, err)
	}
}
