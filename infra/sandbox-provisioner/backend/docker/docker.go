// Package docker is the sandbox provisioner's Docker backend: one container
// per sandbox, created through the Docker Engine API (v1.41) over the
// daemon's socket with a small hand-written client (no Docker SDK).
//
// Each container runs the sandbox image as a non-root uid with a read-only
// root file system, every capability dropped, no-new-privileges, a tmpfs
// /home/gem and /tmp, memory/pids/CPU limits (cgroups) plus CPU-time and
// file-size rlimits, and the volume's user-data dirs bind-mounted read-write
// and the skills dir read-only. Commands run through the exec API, so the
// sandbox needs no network at all: by default it has only a loopback
// interface (NetworkMode "none"). NetworkInternal instead gives every
// sandbox its own `internal: true` bridge network, joined only by the
// provisioner's container, for images that serve an HTTP API of their own;
// it is weaker: the engine's iptables rules keep such networks apart, but
// the host answers on each bridge's gateway address, so host services
// listening on all interfaces are reachable from the sandbox.
// Containers and networks carry labels, so List finds them again after a
// provisioner restart and Destroy removes only what this provisioner made.
//
// Imported by: the sandbox provisioner, which picks it by PROVISIONER_BACKEND. May import: the standard library,
// infra/sandbox-provisioner/backend.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// Network modes.
const (
	NetworkNone     = "none"
	NetworkInternal = "internal"
)

// Labels every object this backend creates carries.
const (
	LabelInstance = "io.yuxi.sandbox.instance" // Config.Instance: which provisioner owns it
	LabelID       = "io.yuxi.sandbox.id"       // the sandbox id
	LabelSpec     = "io.yuxi.sandbox.spec"     // hash of the creation spec; a change recreates the container
)

// Config configures the backend. Zero values take the defaults noted.
type Config struct {
	Host     string // Engine socket: unix:///var/run/docker.sock (default), a socket path, or tcp://host:port
	Image    string // sandbox image (required)
	Instance string // label value separating provisioners that share one engine (default "yuxi")
	Prefix   string // container name prefix (default "yuxi-sandbox-")
	// NetworkPrefix names the per-sandbox networks (default: Prefix).
	NetworkPrefix string
	UID, GID      int // sandbox user (default 1000:1000); 0 is refused

	Network string // NetworkNone (default) or NetworkInternal
	// ProvisionerContainer is joined to each sandbox network in
	// NetworkInternal mode (the provisioner's own container name or id).
	ProvisionerContainer string

	// VolumeRoot and HostVolumeRoot translate mount sources when the
	// provisioner runs in a container whose volume sits elsewhere on the
	// Docker host (the original's DOCKER_THREADS_HOST_PATH): a host path
	// under VolumeRoot is handed to the engine under HostVolumeRoot.
	VolumeRoot, HostVolumeRoot string

	HomeBytes int64   // size of the /home/gem and /tmp tmpfs (default 64 MiB each)
	CPUs      float64 // CPU share (NanoCPUs; default 1)
	// ExecTimeout bounds a command whose request sets no timeout (default
	// 180 s, the original's SANDBOX_EXEC_TIMEOUT_SECONDS).
	ExecTimeout time.Duration
	// Defaults fills the Limits a Spec leaves zero.
	Defaults backend.Limits
}

// Default limits when neither the Spec nor Config.Defaults set one.
var defaultLimits = backend.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUSeconds: 600, FileSizeBytes: 256 << 20}

// Backend is the Docker backend. Safe for concurrent use.
type Backend struct {
	c   *Client
	cfg Config

	// adopted holds the containers this process has made or taken over.
	// A running container met for the first time was left by an earlier
	// life of the provisioner (restart, SIGKILL): commands that life
	// started may still run, with nobody waiting for their output, so
	// they are killed before the container is reused.
	adopted sync.Map // container name -> struct{}
}

var _ backend.Backend = (*Backend)(nil)

// New checks the configuration and returns the backend. It does not
// contact the engine; Ping does.
func New(cfg Config) (*Backend, error) {
	if cfg.Image == "" {
		return nil, errors.New("docker backend: image is required")
	}
	if cfg.Instance == "" {
		cfg.Instance = "yuxi"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "yuxi-sandbox-"
	}
	if cfg.NetworkPrefix == "" {
		cfg.NetworkPrefix = cfg.Prefix
	}
	if cfg.UID == 0 && cfg.GID == 0 {
		cfg.UID, cfg.GID = 1000, 1000
	}
	if cfg.UID <= 0 || cfg.GID <= 0 {
		return nil, fmt.Errorf("docker backend: sandbox uid:gid %d:%d must not be root", cfg.UID, cfg.GID)
	}
	switch cfg.Network {
	case "":
		cfg.Network = NetworkNone
	case NetworkNone, NetworkInternal:
	default:
		return nil, fmt.Errorf("docker backend: network %q: want %q or %q", cfg.Network, NetworkNone, NetworkInternal)
	}
	if cfg.HomeBytes <= 0 {
		cfg.HomeBytes = 64 << 20
	}
	if cfg.ExecTimeout <= 0 {
		cfg.ExecTimeout = 180 * time.Second
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = 1
	}
	if (cfg.VolumeRoot == "") != (cfg.HostVolumeRoot == "") {
		return nil, errors.New("docker backend: set both VolumeRoot and HostVolumeRoot or neither")
	}
	c, err := NewClient(cfg.Host)
	if err != nil {
		return nil, err
	}
	return &Backend{c: c, cfg: cfg}, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "docker" }

// Client returns the engine client (tests use it to inspect what was made).
func (b *Backend) Client() *Client { return b.c }

// Ping checks the engine answers.
func (b *Backend) Ping(ctx context.Context) error { return b.c.Ping(ctx) }

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// ContainerName is the container name of sandbox id.
func (b *Backend) ContainerName(id string) string { return b.cfg.Prefix + b.safeName(id) }

// NetworkName is the internal network name of sandbox id.
func (b *Backend) NetworkName(id string) string { return b.cfg.NetworkPrefix + b.safeName(id) }

func (b *Backend) safeName(id string) string {
	n := unsafeName.ReplaceAllString(id, "_")
	if n != id || len(n) > 100 {
		// Keep names unique when sanitising or truncating changed them.
		sum := sha256.Sum256([]byte(id))
		if len(n) > 80 {
			n = n[:80]
		}
		n += "-" + hex.EncodeToString(sum[:6])
	}
	return n
}

type containerInfo struct {
	ID    string `json:"Id"`
	State struct {
		Running bool `json:"Running"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

func (b *Backend) inspect(ctx context.Context, name string) (containerInfo, error) {
	var ci containerInfo
	err := b.c.do(ctx, http.MethodGet, "/containers/"+url.PathEscape(name)+"/json", nil, nil, &ci)
	return ci, err
}

// Ensure creates the sandbox's container, or reuses a running one made from
// the same spec; a stopped one is started, one made from another spec (new
// env, mounts, limits or image) is replaced. Files live on the mounted
// volume, so replacing a container keeps them.
func (b *Backend) Ensure(ctx context.Context, s backend.Spec) error {
	if s.ID == "" {
		return errors.New("docker backend: empty sandbox id")
	}
	name := b.ContainerName(s.ID)
	body, hash, err := b.createBody(s)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		ci, err := b.inspect(ctx, name)
		switch {
		case err == nil && ci.Config.Labels[LabelSpec] == hash:
			if b.cfg.Network == NetworkInternal {
				if err := b.ensureNetwork(ctx, s.ID); err != nil {
					return err
				}
			}
			if !ci.State.Running {
				if err := b.start(ctx, name); err != nil {
					return err
				}
				b.adopted.Store(name, struct{}{})
				return nil
			}
			if _, mine := b.adopted.LoadOrStore(name, struct{}{}); !mine {
				b.killAll(ctx, name)
			}
			return nil
		case err == nil:
			if err := b.removeContainer(ctx, name); err != nil {
				return err
			}
		case !errors.Is(err, ErrNotFound):
			return fmt.Errorf("ensure sandbox %s: %w", s.ID, err)
		}
		if b.cfg.Network == NetworkInternal {
			if err := b.ensureNetwork(ctx, s.ID); err != nil {
				return err
			}
		}
		err = b.c.do(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, body, nil)
		if errors.Is(err, errConflict) && attempt < 2 {
			continue // a concurrent Ensure created it: reuse theirs
		}
		if errors.Is(err, ErrNotFound) {
			// The backend never pulls (sandboxes must not depend on a
			// registry at run time): the image is pulled or built beforehand.
			return fmt.Errorf("create sandbox %s: image %s is not on the engine (pull or build it first): %w", s.ID, b.cfg.Image, err)
		}
		if err != nil {
			return fmt.Errorf("create sandbox %s: %w", s.ID, err)
		}
		if err := b.start(ctx, name); err != nil {
			return err
		}
		b.adopted.Store(name, struct{}{})
		return nil
	}
}

func (b *Backend) start(ctx context.Context, name string) error {
	if err := b.c.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(name)+"/start", nil, nil, nil); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	return nil
}

// limits is l with unset limits taken from the configured defaults, then
// from the backend's own.
func (b *Backend) limits(l backend.Limits) backend.Limits {
	return l.Or(b.cfg.Defaults).Or(defaultLimits)
}

// hostPath maps a path on the provisioner's volume to the engine host's path.
func (b *Backend) hostPath(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("mount source %q: %w", p, err)
	}
	if b.cfg.VolumeRoot == "" {
		return p, nil
	}
	rel, err := filepath.Rel(filepath.Clean(b.cfg.VolumeRoot), p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("mount source %q is outside the volume %q", p, b.cfg.VolumeRoot)
	}
	return filepath.Join(b.cfg.HostVolumeRoot, rel), nil
}

type mountJSON struct {
	Type         string `json:"Type"`
	Source       string `json:"Source,omitempty"`
	Target       string `json:"Target"`
	ReadOnly     bool   `json:"ReadOnly"`
	BindOptions  any    `json:"BindOptions,omitempty"`
	TmpfsOptions any    `json:"TmpfsOptions,omitempty"`
}

type ulimit struct {
	Name string `json:"Name"`
	Soft int64  `json:"Soft"`
	Hard int64  `json:"Hard"`
}

// createBody builds the POST /containers/create body and its spec hash.
func (b *Backend) createBody(s backend.Spec) (map[string]any, string, error) {
	lim := b.limits(s.Limits)
	user := strconv.Itoa(b.cfg.UID) + ":" + strconv.Itoa(b.cfg.GID)
	var mounts []mountJSON
	for _, m := range s.Mounts {
		if !strings.HasPrefix(m.SandboxPath, "/home/gem/") || filepath.Clean(m.SandboxPath) != m.SandboxPath {
			return nil, "", fmt.Errorf("sandbox path %q must be a clean path under /home/gem", m.SandboxPath)
		}
		if err := b.prepareSource(m); err != nil {
			return nil, "", err
		}
		src, err := b.hostPath(m.HostPath)
		if err != nil {
			return nil, "", err
		}
		mounts = append(mounts, mountJSON{Type: "bind", Source: src, Target: m.SandboxPath, ReadOnly: m.ReadOnly,
			BindOptions: map[string]any{"Propagation": "rprivate"}})
	}
	env := []string{"HOME=/home/gem", "USER=gem", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.Env[k])
	}
	tmpfsOpts := fmt.Sprintf("rw,nosuid,nodev,size=%d,uid=%d,gid=%d,mode=0755", b.cfg.HomeBytes, b.cfg.UID, b.cfg.GID)
	netMode := "none"
	if b.cfg.Network == NetworkInternal {
		netMode = b.NetworkName(s.ID)
	}
	host := map[string]any{
		"NetworkMode":    netMode,
		"ReadonlyRootfs": true,
		"CapDrop":        []string{"ALL"},
		"SecurityOpt":    []string{"no-new-privileges"},
		"Privileged":     false,
		"Init":           false, // PID 1 is the keep-alive shell: immune to the timeout's kill -1, it reaps orphans
		"IpcMode":        "private",
		"Memory":         lim.MemoryBytes,
		"MemorySwap":     lim.MemoryBytes, // no swap on top of the memory limit
		"PidsLimit":      lim.Pids,
		"NanoCpus":       int64(b.cfg.CPUs * 1e9),
		"OomScoreAdj":    500, // a sandbox is the kernel's first choice, never the host's services
		"Ulimits": []ulimit{
			// SIGXCPU at the limit; SIGKILL a little later for a process that catches it.
			{Name: "cpu", Soft: lim.CPUSeconds, Hard: lim.CPUSeconds + 5},
			{Name: "fsize", Soft: lim.FileSizeBytes, Hard: lim.FileSizeBytes},
			{Name: "nofile", Soft: 1024, Hard: 1024},
		},
		"Tmpfs": map[string]string{
			"/home/gem": tmpfsOpts,
			"/tmp":      fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", b.cfg.HomeBytes),
		},
		"Mounts":        mounts,
		"RestartPolicy": map[string]any{"Name": "no"},
		"LogConfig":     map[string]any{"Type": "none"},
	}
	labels := map[string]string{LabelInstance: b.cfg.Instance, LabelID: s.ID}
	body := map[string]any{
		"Image":      b.cfg.Image,
		"User":       user,
		"Env":        env,
		"WorkingDir": "/home/gem",
		// The image's own command (the kubernetes exec agent) is replaced:
		// PID 1 is a keep-alive shell and commands come through exec.
		"Entrypoint":      []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"},
		"Cmd":             []string{},
		"Labels":          labels,
		"NetworkDisabled": b.cfg.Network == NetworkNone,
		"HostConfig":      host,
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:12])
	labels[LabelSpec] = hash
	return body, hash, nil
}

// prepareSource makes a mount's source directory exist and, for writable
// mounts when the provisioner runs as root, hands it to the sandbox uid
// (not recursively: the provisioner's own files keep their owner).
func (b *Backend) prepareSource(m backend.Mount) error {
	if err := os.MkdirAll(m.HostPath, 0o755); err != nil {
		return fmt.Errorf("mount source %s: %w", m.HostPath, err)
	}
	if m.ReadOnly || os.Geteuid() != 0 {
		return nil
	}
	if err := os.Chown(m.HostPath, b.cfg.UID, b.cfg.GID); err != nil {
		return fmt.Errorf("mount source %s: %w", m.HostPath, err)
	}
	return nil
}

// ensureNetwork creates the sandbox's internal bridge network when missing
// and joins the provisioner's container to it.
func (b *Backend) ensureNetwork(ctx context.Context, id string) error {
	name := b.NetworkName(id)
	err := b.c.do(ctx, http.MethodGet, "/networks/"+url.PathEscape(name), nil, nil, nil)
	if errors.Is(err, ErrNotFound) {
		err = b.c.do(ctx, http.MethodPost, "/networks/create", nil, map[string]any{
			"Name":           name,
			"Driver":         "bridge",
			"Internal":       true,
			"CheckDuplicate": true,
			"Attachable":     false,
			"Labels":         map[string]string{LabelInstance: b.cfg.Instance, LabelID: id},
			"Options": map[string]string{
				"com.docker.network.bridge.enable_ip_masquerade": "false",
				"com.docker.network.bridge.enable_icc":           "true",
			},
		}, nil)
		if errors.Is(err, errConflict) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("sandbox network %s: %w", name, err)
	}
	if b.cfg.ProvisionerContainer == "" {
		return nil
	}
	err = b.c.do(ctx, http.MethodPost, "/networks/"+url.PathEscape(name)+"/connect", nil,
		map[string]any{"Container": b.cfg.ProvisionerContainer}, nil)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("join provisioner to %s: %w", name, err)
	}
	return nil
}

func (b *Backend) removeContainer(ctx context.Context, name string) error {
	err := b.c.do(ctx, http.MethodDelete, "/containers/"+url.PathEscape(name), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// Destroy removes the sandbox's container (and its network); files on the
// volume stay. Destroying an unknown sandbox is not an error.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	if err := b.removeContainer(ctx, b.ContainerName(id)); err != nil {
		return err
	}
	return b.removeNetwork(ctx, b.NetworkName(id))
}

func (b *Backend) removeNetwork(ctx context.Context, name string) error {
	var n struct {
		Labels     map[string]string `json:"Labels"`
		Containers map[string]struct {
			Name string `json:"Name"`
		} `json:"Containers"`
	}
	err := b.c.do(ctx, http.MethodGet, "/networks/"+url.PathEscape(name), nil, nil, &n)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.Labels[LabelInstance] != b.cfg.Instance {
		return nil // not ours: never remove a network another owner made
	}
	for cid := range n.Containers { // the provisioner: leave the network first
		_ = b.c.do(ctx, http.MethodPost, "/networks/"+url.PathEscape(name)+"/disconnect", nil,
			map[string]any{"Container": cid, "Force": true}, nil)
	}
	err = b.c.do(ctx, http.MethodDelete, "/networks/"+url.PathEscape(name), nil, nil, nil)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remove network %s: %w", name, err)
	}
	return nil
}

// List returns the ids of every sandbox container this provisioner
// instance made, running or not.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	f, _ := json.Marshal(map[string][]string{"label": {LabelInstance + "=" + b.cfg.Instance}})
	var cs []struct {
		Labels map[string]string `json:"Labels"`
	}
	if err := b.c.do(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(f)}}, nil, &cs); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	// Networks count too: one whose container is gone (a crash between the
	// two creations) is listed so the provisioner's cleanup destroys it.
	var ns []struct {
		Labels map[string]string `json:"Labels"`
	}
	if err := b.c.do(ctx, http.MethodGet, "/networks", url.Values{"filters": {string(f)}}, nil, &ns); err != nil {
		return nil, fmt.Errorf("list sandbox networks: %w", err)
	}
	seen := map[string]bool{}
	ids := []string{}
	for _, c := range append(cs, ns...) {
		if id := c.Labels[LabelID]; id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}
