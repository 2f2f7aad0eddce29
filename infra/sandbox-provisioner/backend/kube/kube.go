// Package kube is the sandbox provisioner's Kubernetes backend: per
// sandbox a Pod, a ClusterIP Service and a NetworkPolicy, made through the
// API server's REST interface with plain JSON (no client-go: the backend
// needs five resources and a label selector).
//
// As the original, the Pod mounts THREAD_PVC with subPaths —
// threads/shared/<uid>/workspace, threads/<file_thread>/user-data/{uploads,
// outputs} read-write and threads/<skills_thread>/skills read-only — at
// /home/gem/user-data/… and /home/gem/skills, with /home/gem and /tmp on
// memory-backed emptyDirs. It runs as uid 1000 (runAsNonRoot, no privilege
// escalation, every capability dropped, read-only root, RuntimeDefault
// seccomp) with automountServiceAccountToken false and no service links.
// Its NetworkPolicy admits only the provisioner's pods on the exec port
// and denies all egress (the cluster, its DNS, the internet).
//
// Commands run through the sandbox image's exec agent (package execagent)
// reached over the Service, not through the pods/exec subresource: the
// provisioner needs no exec rights on pods and the API server stays out
// of the data path. Unlike the original (a NodePort and NODE_HOST), the
// Service is ClusterIP: the provisioner runs in the cluster, and nothing
// outside it can reach a sandbox. Pod-level pids limits are a kubelet
// setting (podPidsLimit), not part of the Pod; memory and CPU are the
// container's limits; CPU time and file size are the agent's rlimits.
// rbac.yaml (next to this file) is the Role the provisioner needs: get,
// list, create and delete on those three kinds, no pods/exec.
//
// Imported by: the sandbox provisioner, which picks it by PROVISIONER_BACKEND. May import: the standard library,
// infra/sandbox-provisioner/backend, infra/sandbox-provisioner/backend/kube/execagent.
package kube

import (
	"bytes"
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
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/kube/execagent"
)

// Labels and annotations on every object the backend makes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "yuxi-sandbox-provisioner"
	LabelInstance  = "yuxi.io/sandbox-instance" // Config.Instance
	LabelSandbox   = "yuxi.io/sandbox"          // the object name; the Service and NetworkPolicy select on it
	AnnotationID   = "yuxi.io/sandbox-id"       // the sandbox id (any string)
	AnnotationSpec = "yuxi.io/sandbox-spec"     // hash of the Pod spec; a change replaces the Pod
)

// AgentPort is the exec agent's port in the pod and on the Service.
const AgentPort = 8080

// Config configures the backend. APIServer, Namespace, Image, ThreadPVC
// and VolumeRoot are required.
type Config struct {
	APIServer  string       // https://… (InClusterConfig fills it)
	Token      string       // bearer token, or
	TokenFile  string       // a file holding it, re-read each minute
	HTTPClient *http.Client // TLS setup for the API server (default http.DefaultClient)
	Namespace  string       // K8S_NAMESPACE
	Image      string       // SANDBOX_IMAGE: must run the exec agent on AgentPort
	ThreadPVC  string       // THREAD_PVC: the claim holding threads/
	// VolumeRoot is where the provisioner itself mounts THREAD_PVC: a
	// Spec mount's HostPath under it becomes the subPath.
	VolumeRoot string
	Instance   string // label value separating provisioners (default "yuxi")
	Prefix     string // object name prefix (default "yuxi-sandbox-")
	UID, GID   int64  // default 1000:1000; 0 is refused
	// ProvisionerPods selects the provisioner's pods, the only ones the
	// NetworkPolicy admits (default app.kubernetes.io/name=sandbox-provisioner),
	// in ProvisionerNamespace (default: Namespace).
	ProvisionerPods      map[string]string
	ProvisionerNamespace string
	// AgentURL gives the exec agent's base URL for an object (default
	// http://<name>.<namespace>.svc:8080, the Service's cluster DNS name).
	AgentURL     func(name, namespace string) string
	AgentClient  *http.Client  // for the agent (default: a plain client)
	ExecTimeout  time.Duration // default 180 s
	ReadyTimeout time.Duration // how long Ensure waits for the Pod to be Ready (default 120 s)
	HomeBytes    int64         // sizeLimit of the /home/gem and /tmp emptyDirs (default 64 MiB)
	CPUs         float64       // CPU limit (default 1)
	Defaults     backend.Limits
}

var defaultLimits = backend.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUSeconds: 600, FileSizeBytes: 256 << 20}

// Backend is the Kubernetes backend. Safe for concurrent use.
type Backend struct {
	api *apiClient
	cfg Config
}

var _ backend.Backend = (*Backend)(nil)

// New checks cfg and returns the backend; it does not call the API server.
func New(cfg Config) (*Backend, error) {
	for name, v := range map[string]string{"api server": cfg.APIServer, "namespace": cfg.Namespace, "image": cfg.Image, "THREAD_PVC": cfg.ThreadPVC, "volume root": cfg.VolumeRoot} {
		if v == "" {
			return nil, fmt.Errorf("kubernetes backend: %s is required", name)
		}
	}
	if cfg.Instance == "" {
		cfg.Instance = "yuxi"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "yuxi-sandbox-"
	}
	if cfg.UID == 0 && cfg.GID == 0 {
		cfg.UID, cfg.GID = 1000, 1000
	}
	if cfg.UID <= 0 || cfg.GID <= 0 {
		return nil, fmt.Errorf("kubernetes backend: sandbox uid:gid %d:%d must not be root", cfg.UID, cfg.GID)
	}
	if len(cfg.ProvisionerPods) == 0 {
		cfg.ProvisionerPods = map[string]string{"app.kubernetes.io/name": "sandbox-provisioner"}
	}
	if cfg.ProvisionerNamespace == "" {
		cfg.ProvisionerNamespace = cfg.Namespace
	}
	if cfg.AgentURL == nil {
		cfg.AgentURL = func(name, ns string) string {
			return "http://" + name + "." + ns + ".svc:" + strconv.Itoa(AgentPort)
		}
	}
	if cfg.AgentClient == nil {
		cfg.AgentClient = &http.Client{}
	}
	if cfg.ExecTimeout <= 0 {
		cfg.ExecTimeout = 180 * time.Second
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 120 * time.Second
	}
	if cfg.HomeBytes <= 0 {
		cfg.HomeBytes = 64 << 20
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = 1
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Backend{cfg: cfg, api: &apiClient{base: strings.TrimRight(cfg.APIServer, "/"), http: hc, token: cfg.Token, tokenFile: cfg.TokenFile}}, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "kubernetes" }

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// ObjectName is the Pod, Service and NetworkPolicy name of sandbox id: a
// DNS-1123 label, with a hash suffix when the id had to be changed.
func (b *Backend) ObjectName(id string) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(id), "-"), "-")
	if n != id || len(b.cfg.Prefix)+len(n) > 63 {
		sum := sha256.Sum256([]byte(id))
		h := hex.EncodeToString(sum[:5])
		if room := 63 - len(b.cfg.Prefix) - len(h) - 1; len(n) > room {
			n = strings.Trim(n[:max(room, 0)], "-")
		}
		if n == "" {
			n = h
		} else {
			n += "-" + h
		}
	}
	return b.cfg.Prefix + n
}

func (b *Backend) ns() string { return url.PathEscape(b.cfg.Namespace) }

func (b *Backend) podPath(name string) string {
	return "/api/v1/namespaces/" + b.ns() + "/pods/" + url.PathEscape(name)
}
func (b *Backend) servicePath(name string) string {
	return "/api/v1/namespaces/" + b.ns() + "/services/" + url.PathEscape(name)
}
func (b *Backend) policyPath(name string) string {
	return "/apis/networking.k8s.io/v1/namespaces/" + b.ns() + "/networkpolicies/" + url.PathEscape(name)
}

func (b *Backend) meta(name, id string) map[string]any {
	return map[string]any{
		"name":      name,
		"namespace": b.cfg.Namespace,
		"labels": map[string]string{
			LabelManagedBy: ManagedBy,
			LabelInstance:  b.cfg.Instance,
			LabelSandbox:   name,
		},
		"annotations": map[string]string{AnnotationID: id},
	}
}

// limits is l with unset limits taken from the configured defaults, then
// from the backend's own.
func (b *Backend) limits(l backend.Limits) backend.Limits {
	return l.Or(b.cfg.Defaults).Or(defaultLimits)
}

// subPath turns a mount source on the provisioner's volume into a subPath
// of THREAD_PVC, making the directory exist (owned by the sandbox uid when
// writable and the provisioner is root: kubelet would make it root's).
func (b *Backend) subPath(m backend.Mount) (string, error) {
	p, err := filepath.Abs(m.HostPath)
	if err != nil {
		return "", err
	}
	root, err := filepath.Abs(b.cfg.VolumeRoot)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("mount source %q is not under the volume %q", m.HostPath, b.cfg.VolumeRoot)
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", fmt.Errorf("mount source %s: %w", p, err)
	}
	if !m.ReadOnly && os.Geteuid() == 0 {
		if err := os.Chown(p, int(b.cfg.UID), int(b.cfg.GID)); err != nil {
			return "", fmt.Errorf("mount source %s: %w", p, err)
		}
	}
	return filepath.ToSlash(rel), nil
}

// pod builds the Pod object and its spec hash.
func (b *Backend) pod(s backend.Spec, name string) (map[string]any, string, error) {
	lim := b.limits(s.Limits)
	mounts := []map[string]any{
		{"name": "home", "mountPath": backend.Home},
		{"name": "tmp", "mountPath": "/tmp"},
	}
	for _, m := range s.Mounts {
		if !strings.HasPrefix(m.SandboxPath, backend.Home+"/") || filepath.Clean(m.SandboxPath) != m.SandboxPath {
			return nil, "", fmt.Errorf("sandbox path %q must be a clean path under %s", m.SandboxPath, backend.Home)
		}
		sp, err := b.subPath(m)
		if err != nil {
			return nil, "", err
		}
		mounts = append(mounts, map[string]any{"name": "thread-data", "mountPath": m.SandboxPath, "subPath": sp, "readOnly": m.ReadOnly})
	}
	env := []map[string]string{
		{"name": "HOME", "value": backend.Home},
		{"name": "SANDBOX_EXEC_TIMEOUT_SECONDS", "value": strconv.FormatInt(int64(b.cfg.ExecTimeout/time.Second), 10)},
		{"name": "SANDBOX_CPU_SECONDS", "value": strconv.FormatInt(lim.CPUSeconds, 10)},
		{"name": "SANDBOX_FILE_SIZE_BYTES", "value": strconv.FormatInt(lim.FileSizeBytes, 10)},
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, map[string]string{"name": k, "value": s.Env[k]})
	}
	f := false
	t := true
	cpu := strconv.FormatInt(int64(b.cfg.CPUs*1000), 10) + "m"
	mem := strconv.FormatInt(lim.MemoryBytes, 10)
	size := strconv.FormatInt(b.cfg.HomeBytes, 10)
	spec := map[string]any{
		"automountServiceAccountToken":  false,
		"enableServiceLinks":            false,
		"hostNetwork":                   false,
		"hostPID":                       false,
		"hostIPC":                       false,
		"restartPolicy":                 "Always",
		"terminationGracePeriodSeconds": 5,
		"securityContext": map[string]any{
			"runAsNonRoot":   true,
			"runAsUser":      b.cfg.UID,
			"runAsGroup":     b.cfg.GID,
			"fsGroup":        b.cfg.GID,
			"seccompProfile": map[string]string{"type": "RuntimeDefault"},
		},
		"containers": []map[string]any{{
			"name":            "sandbox",
			"image":           b.cfg.Image,
			"imagePullPolicy": "IfNotPresent",
			"workingDir":      backend.WorkspaceDir,
			"env":             env,
			"ports":           []map[string]any{{"name": "exec", "containerPort": AgentPort, "protocol": "TCP"}},
			"readinessProbe": map[string]any{
				"httpGet":       map[string]any{"path": "/healthz", "port": AgentPort},
				"periodSeconds": 2,
			},
			"resources": map[string]any{
				"limits":   map[string]string{"cpu": cpu, "memory": mem, "ephemeral-storage": size},
				"requests": map[string]string{"cpu": "50m", "memory": "64Mi"},
			},
			"securityContext": map[string]any{
				"runAsNonRoot":             true,
				"runAsUser":                b.cfg.UID,
				"runAsGroup":               b.cfg.GID,
				"allowPrivilegeEscalation": f,
				"privileged":               f,
				"readOnlyRootFilesystem":   t,
				"capabilities":             map[string]any{"drop": []string{"ALL"}},
			},
			"volumeMounts": mounts,
		}},
		"volumes": []map[string]any{
			{"name": "thread-data", "persistentVolumeClaim": map[string]any{"claimName": b.cfg.ThreadPVC}},
			{"name": "home", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": size}},
			{"name": "tmp", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": size}},
		},
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:12])
	meta := b.meta(name, s.ID)
	meta["annotations"].(map[string]string)[AnnotationSpec] = hash
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, hash, nil
}

func (b *Backend) service(name, id string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": b.meta(name, id),
		"spec": map[string]any{
			"type":     "ClusterIP",
			"selector": map[string]string{LabelSandbox: name},
			"ports":    []map[string]any{{"name": "exec", "port": AgentPort, "targetPort": AgentPort, "protocol": "TCP"}},
		},
	}
}

func (b *Backend) policy(name, id string) map[string]any {
	peer := map[string]any{"podSelector": map[string]any{"matchLabels": b.cfg.ProvisionerPods}}
	if b.cfg.ProvisionerNamespace != b.cfg.Namespace {
		peer["namespaceSelector"] = map[string]any{"matchLabels": map[string]string{"kubernetes.io/metadata.name": b.cfg.ProvisionerNamespace}}
	}
	return map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": b.meta(name, id),
		"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]string{LabelSandbox: name}},
			"policyTypes": []string{"Ingress", "Egress"},
			"ingress": []map[string]any{{
				"from":  []map[string]any{peer},
				"ports": []map[string]any{{"protocol": "TCP", "port": AgentPort}},
			}},
			"egress": []any{}, // none: not the cluster, not its DNS, not the internet
		},
	}
}

type podStatus struct {
	Metadata struct {
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

func (p podStatus) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// create POSTs obj to its collection; an existing object is kept.
func (b *Backend) create(ctx context.Context, itemPath string, obj map[string]any) error {
	coll := itemPath[:strings.LastIndex(itemPath, "/")]
	err := b.api.do(ctx, http.MethodPost, coll, nil, obj, nil)
	if errors.Is(err, errExists) {
		return nil
	}
	return err
}

// Ensure creates the sandbox's NetworkPolicy (first, so the Pod never runs
// unfenced), Service and Pod, or reuses them, and waits until the Pod is
// Ready. A Pod made from another spec is replaced; files live on the PVC.
func (b *Backend) Ensure(ctx context.Context, s backend.Spec) error {
	if s.ID == "" {
		return errors.New("kubernetes backend: empty sandbox id")
	}
	name := b.ObjectName(s.ID)
	pod, hash, err := b.pod(s, name)
	if err != nil {
		return err
	}
	if err := b.create(ctx, b.policyPath(name), b.policy(name, s.ID)); err != nil {
		return fmt.Errorf("sandbox %s network policy: %w", s.ID, err)
	}
	if err := b.create(ctx, b.servicePath(name), b.service(name, s.ID)); err != nil {
		return fmt.Errorf("sandbox %s service: %w", s.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		var st podStatus
		err := b.api.do(ctx, http.MethodGet, b.podPath(name), nil, nil, &st)
		switch {
		case errors.Is(err, errNotFound):
			if err := b.create(ctx, b.podPath(name), pod); err != nil {
				return fmt.Errorf("sandbox %s pod: %w", s.ID, err)
			}
		case err != nil:
			return fmt.Errorf("sandbox %s pod: %w", s.ID, err)
		case st.Metadata.DeletionTimestamp != nil:
			// Going away (replaced or reaped): wait until it is gone.
		case st.Metadata.Annotations[AnnotationSpec] != hash || st.Status.Phase == "Failed" || st.Status.Phase == "Succeeded":
			if err := b.deletePod(ctx, name); err != nil {
				return err
			}
		case st.ready():
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s: pod not ready: %w", s.ID, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

func (b *Backend) deletePod(ctx context.Context, name string) error {
	err := b.api.do(ctx, http.MethodDelete, b.podPath(name), url.Values{"gracePeriodSeconds": {"0"}}, nil, nil)
	if err != nil && !errors.Is(err, errNotFound) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}

// Destroy deletes the sandbox's Pod, Service and NetworkPolicy (in that
// order: the fence goes last). Unknown sandboxes are not an error.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	name := b.ObjectName(id)
	if err := b.deletePod(ctx, name); err != nil {
		return err
	}
	for _, p := range []string{b.servicePath(name), b.policyPath(name)} {
		if err := b.api.do(ctx, http.MethodDelete, p, nil, nil, nil); err != nil && !errors.Is(err, errNotFound) {
			return fmt.Errorf("destroy sandbox %s: %w", id, err)
		}
	}
	return nil
}

// List returns the ids of the sandboxes this instance made: any of the
// three objects counts, so a half-made or half-destroyed sandbox is found
// and can be destroyed.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	sel := url.Values{"labelSelector": {LabelManagedBy + "=" + ManagedBy + "," + LabelInstance + "=" + b.cfg.Instance}}
	seen := map[string]bool{}
	ids := []string{}
	for _, coll := range []string{
		"/api/v1/namespaces/" + b.ns() + "/pods",
		"/api/v1/namespaces/" + b.ns() + "/services",
		"/apis/networking.k8s.io/v1/namespaces/" + b.ns() + "/networkpolicies",
	} {
		var l struct {
			Items []struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := b.api.do(ctx, http.MethodGet, coll, sel, nil, &l); err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		for _, it := range l.Items {
			if id := it.Metadata.Annotations[AnnotationID]; id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Exec runs a command through the pod's exec agent. A sandbox whose Pod is
// gone answers backend.ErrNotFound (the caller Ensures and retries).
func (b *Backend) Exec(ctx context.Context, id string, r backend.ExecRequest) (backend.ExecResult, error) {
	name := b.ObjectName(id)
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = b.cfg.ExecTimeout
	}
	body, _ := json.Marshal(execagent.Request{Command: r.Command, Workdir: r.Workdir, TimeoutMS: timeout.Milliseconds(), MaxOutput: r.MaxOutput, Env: r.Env})
	// The agent ends the command at its timeout; the margin covers the answer.
	cctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, b.cfg.AgentURL(name, b.cfg.Namespace)+"/exec", bytes.NewReader(body))
	if err != nil {
		return backend.ExecResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.cfg.AgentClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return backend.ExecResult{}, ctx.Err()
		}
		// Unreachable: is the Pod there at all?
		var st podStatus
		if gerr := b.api.do(ctx, http.MethodGet, b.podPath(name), nil, nil, &st); errors.Is(gerr, errNotFound) {
			return backend.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", id, backend.ErrNotFound)
		}
		return backend.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return backend.ExecResult{}, fmt.Errorf("exec in sandbox %s: agent answered %s", id, resp.Status)
	}
	var out execagent.Response
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return backend.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	return backend.ExecResult{Output: out.Output, ExitCode: out.ExitCode, Truncated: out.Truncated, TimedOut: out.TimedOut}, nil
}
