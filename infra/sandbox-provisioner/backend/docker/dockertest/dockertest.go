// Package dockertest gives tests a real Docker Engine and the sandbox test
// image. Engine runs engine.sh (next to this file), which finds a daemon
// or installs docker.io and starts a private one; Image builds a tiny
// sandbox image with the engine's import API (what `docker import` does)
// from a root file system assembled from Debian's busybox-static, because
// no registry can be reached here. When no engine can be had the test is
// skipped, unless CI is set, in which case it fails.
//
// Imported by: tests only. May import: the standard library, testing,
// infra/sandbox-provisioner/backend/docker.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker"
)

var (
	engineOnce sync.Once
	engineHost string
	engineErr  error

	imageMu  sync.Mutex
	imageRef string
)

// Engine returns the host of a Docker Engine that answers.
func Engine(t testing.TB) string {
	t.Helper()
	engineOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "engine.sh")
		var stderr bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			engineErr = fmt.Errorf("%s: %v: %s", script, err, strings.TrimSpace(stderr.String()))
			return
		}
		engineHost = strings.TrimSpace(string(out))
		sweep(engineHost)
	})
	if engineErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Docker Engine: %v", engineErr)
		}
		t.Skipf("no Docker Engine: %v", engineErr)
	}
	return engineHost
}

// sweep removes test sandboxes (instance label "test-…") left over for
// more than an hour by test processes that were killed before cleanup.
func sweep(host string) {
	c, err := docker.NewClient(host)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := url.Values{"filters": {`{"label":["` + docker.LabelInstance + `"]}`}, "all": {"1"}}
	var cs []struct {
		ID      string `json:"Id"`
		Created int64
		Labels  map[string]string
	}
	if c.Get(ctx, "/containers/json?"+f.Encode(), &cs) != nil {
		return
	}
	old := time.Now().Add(-time.Hour).Unix()
	for _, ct := range cs {
		if strings.HasPrefix(ct.Labels[docker.LabelInstance], "test-") && ct.Created < old {
			_ = c.Delete(ctx, "/containers/"+ct.ID)
		}
	}
	var ns []struct {
		ID      string `json:"Id"`
		Created time.Time
		Labels  map[string]string
	}
	if c.Get(ctx, "/networks?"+url.Values{"filters": f["filters"]}.Encode(), &ns) != nil {
		return
	}
	for _, n := range ns {
		if strings.HasPrefix(n.Labels[docker.LabelInstance], "test-") && n.Created.Unix() < old {
			_ = c.Delete(ctx, "/networks/"+n.ID)
		}
	}
}

// Image returns the reference of the sandbox test image in the engine at
// host, importing it when missing. The tag is a hash of the root file
// system's contents, so a changed busybox makes a new image.
func Image(t testing.TB, host string) string {
	t.Helper()
	imageMu.Lock()
	defer imageMu.Unlock()
	if imageRef != "" {
		return imageRef
	}
	rootfs, err := BusyboxRootfs()
	if err != nil {
		t.Fatalf("assemble sandbox rootfs: %v", err)
	}
	sum := sha256.Sum256(rootfs)
	ref := "yuxi-sandbox-test:" + hex.EncodeToString(sum[:8])
	c, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ok, err := c.ImageExists(ctx, ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	if !ok {
		if err := c.ImportImage(ctx, ref, bytes.NewReader(rootfs)); err != nil {
			t.Fatalf("import %s: %v", ref, err)
		}
	}
	imageRef = ref
	return ref
}

// BusyboxRootfs returns a tar of a minimal root file system: a static
// busybox with a link per applet in /bin, /etc/passwd and /etc/group naming
// root and the sandbox user gem (1000:1000), and the usual empty dirs.
func BusyboxRootfs() ([]byte, error) {
	var bin string
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return nil, fmt.Errorf("busybox not found (Debian: apt-get install busybox-static)")
	}
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			f.Close()
			return nil, fmt.Errorf("%s is dynamically linked (Debian: apt-get install busybox-static)", bin)
		}
	}
	f.Close()
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	list, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", bin, err)
	}
	applets := strings.Fields(string(list))
	sort.Strings(applets)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mtime})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"home", 0o755}, {"home/gem", 0o755}, {"proc", 0o555},
		{"root", 0o700}, {"sys", 0o555}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/bin", 0o755}, {"var", 0o755}} {
		if err := dir(d.name, d.mode); err != nil {
			return nil, err
		}
	}
	if err := file("bin/busybox", 0o755, exe); err != nil {
		return nil, err
	}
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	etc := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\ngem:x:1000:1000:gem:/home/gem:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":    "root:x:0:\ngem:x:1000:\nnogroup:x:65534:\n",
		"etc/hostname": "sandbox\n",
	}
	for _, name := range []string{"etc/group", "etc/hostname", "etc/passwd"} {
		if err := file(name, 0o644, []byte(etc[name])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
