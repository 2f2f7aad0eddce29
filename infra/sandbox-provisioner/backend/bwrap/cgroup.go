package bwrap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroups places sandboxes under a parent group in each cgroup v1
// hierarchy we use (memory, pids), below the provisioner's own group:
// <mount>/<ctrl>/<own path>/<parent>/<sandbox id>/<exec n>. The sandbox
// group holds the limits (v1 hierarchies charge children to parents);
// each exec gets a child group so a timeout kills exactly its processes.
// A host without writable v1 controllers gets no cgroups (rlimits only),
// which Available reports.
type cgroups struct {
	dirs map[string]string // controller -> parent dir ("" map: unavailable)
}

var controllers = []string{"memory", "pids"}

func newCgroups(mount, parent string) (*cgroups, error) {
	own, err := ownV1Paths()
	if err != nil {
		return nil, err
	}
	c := &cgroups{dirs: map[string]string{}}
	for _, ctrl := range controllers {
		p, ok := own[ctrl]
		if !ok {
			continue
		}
		dir := filepath.Join(mount, ctrl, p, parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return &cgroups{dirs: map[string]string{}}, nil // not delegated: rlimits only
		}
		c.dirs[ctrl] = dir
	}
	return c, nil
}

// ownV1Paths reads the v1 hierarchies this process is in.
func ownV1Paths() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			out[ctrl] = parts[2]
		}
	}
	return out, nil
}

func (c *cgroups) available() bool { return c.dirs["memory"] != "" && c.dirs["pids"] != "" }

// create makes a sandbox's groups and writes its limits.
func (c *cgroups) create(id string, memory, pids int64) error {
	for ctrl, parent := range c.dirs {
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		switch ctrl {
		case "memory":
			if err := writeFile(filepath.Join(dir, "memory.limit_in_bytes"), memory); err != nil {
				return err
			}
			// Without swap accounting the limit already binds RAM; with it,
			// swap must not extend it.
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
				if err := writeFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), memory); err != nil {
					return err
				}
			}
			_ = writeFile(filepath.Join(dir, "memory.swappiness"), 0)
		case "pids":
			if err := writeFile(filepath.Join(dir, "pids.max"), pids); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeFile(path string, v int64) error {
	if err := os.WriteFile(path, []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// execGroup makes the child group of one exec and returns its name.
func (c *cgroups) execGroup(id, name string) error {
	for _, parent := range c.dirs {
		if err := os.Mkdir(filepath.Join(parent, id, name), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// join moves pids into a group (sandbox id, or id/exec).
func (c *cgroups) join(group string, pids ...int) error {
	for _, parent := range c.dirs {
		for _, pid := range pids {
			f := filepath.Join(parent, group, "cgroup.procs")
			if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
				return fmt.Errorf("join %s: %w", f, err)
			}
		}
	}
	return nil
}

// kill SIGKILLs every process in a group and its children until the
// group is empty, then removes the groups bottom-up. The pids limit bounds
// how many a fork loop can make between sweeps.
func (c *cgroups) kill(group string) {
	dir := c.dirs["pids"]
	if dir == "" {
		dir = c.dirs["memory"]
	}
	if dir == "" {
		return
	}
	for i := 0; i < 200; i++ {
		pids := procsBelow(filepath.Join(dir, group))
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// remove deletes a group (and exec children) in every hierarchy.
func (c *cgroups) remove(group string) {
	for _, parent := range c.dirs {
		root := filepath.Join(parent, group)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			for j := 0; j < 50; j++ { // rmdir fails while exiting tasks linger
				if err := os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// list names the sandbox groups under the parent (restart recovery).
func (c *cgroups) list() []string {
	for _, parent := range c.dirs {
		entries, err := os.ReadDir(parent)
		if err != nil {
			return nil
		}
		var ids []string
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "sb-") {
				ids = append(ids, e.Name())
			}
		}
		return ids
	}
	return nil
}

func procsBelow(root string) []int {
	var pids []int
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return nil
	})
	return pids
}

// close removes the parent groups when they are empty.
func (c *cgroups) close() {
	for _, parent := range c.dirs {
		_ = os.Remove(parent)
	}
}
