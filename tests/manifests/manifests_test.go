// Package manifests checks, without a cluster, that the Knative deployment
// under knative/ and functions/*/func.yaml is wired the way the code is: every
// event type reaches exactly the function whose router handles it, every
// function is deployed, can publish (K_SINK) and is probed on a path its
// handler serves, and the Secret template holds placeholders only. It also
// enforces the architecture rules of STYLE.md: thin function mains, no
// function importing another, shared/ never importing a function, events/
// importing only the standard library and the CloudEvents SDK, and every
// package doc's "May import" and "Imported by" lines true to go list
// (packagedocs_test.go).
//
// Run by `make lint` and `make test`. Test-only package: it may import
// anything, including the function handler packages, which it builds with nil
// dependencies (registration touches no database).
package manifests

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/functions/dispatcher/dispatcher"
	"github.com/yuxi-serverless/yuxi/functions/doc-parse/parsedoc"
	"github.com/yuxi-serverless/yuxi/functions/evaluate/evaluate"
	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/functions/kb-graph/graphbuild"
	"github.com/yuxi-serverless/yuxi/functions/kb-index/indexdoc"
	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/llm"
)

const (
	namespace     = "yuxi"
	partOfLabel   = "app.kubernetes.io/part-of" // `ko apply -l app.kubernetes.io/part-of=yuxi` selects on it
	configMapName = "yuxi-config"
	secretName    = "yuxi-secrets"
	placeholder   = "REPLACE_ME"

	serviceAPI     = "serving.knative.dev/v1"
	eventingAPI    = "eventing.knative.dev/v1"
	sourcesAPI     = "sources.knative.dev/v1"
	annMinScale    = "autoscaling.knative.dev/min-scale"
	annMaxScale    = "autoscaling.knative.dev/max-scale"
	annTarget      = "autoscaling.knative.dev/target"
	visibilityKey  = "networking.knative.dev/visibility"
	clusterLocal   = "cluster-local"
	eventProbePath = "/healthz" // served by faas.NewHTTPReceiver
	intakeProbe    = "/api/system/health"

	// sseMaxDurationDefault is bootstrap's default for YUXI_SSE_MAX_DURATION:
	// an SSE response stays open this long unless the ConfigMap sets it, so
	// intake's timeoutSeconds must cover it.
	sseMaxDurationDefault = 30 * time.Minute

	// maxRevisionTimeout is Knative Serving's default config-defaults
	// max-revision-timeout-seconds. knative/ ships no config-defaults patch,
	// so a Service above it would be rejected by an unmodified cluster.
	maxRevisionTimeout = 600
)

// handledBy is the routing table the Triggers must implement: event type →
// the one function that handles it. TestRoutingTableMatchesRouters checks it
// against the functions' real routers, so neither can drift alone.
var handledBy = map[string]string{
	events.TypeStepReady:         "agent-step",
	events.TypeToolCallRequested: "tool-invoke",
	events.TypeRunFinished:       "dispatcher",
	events.TypeSweepRequested:    "dispatcher",
	events.TypeKnativePing:       "dispatcher",

	events.TypeDocumentUploaded:    "doc-parse",
	events.TypeBucketObjectChanged: "doc-parse",
	events.TypeGCSObjectFinalized:  "doc-parse",
	events.TypeGCSObjectDeleted:    "doc-parse",
	events.TypeDocumentParsed:      "kb-index",
	events.TypeDocumentIndexed:     "kb-graph",

	events.TypeEvaluationBatchReady: "evaluate",
	events.TypeDatasetBatchReady:    "evaluate",
	events.TypeEvaluationTick:       "evaluate",
	events.TypeEvaluationRegressed:  "evaluate",
}

// directPings are the functions a PingSource sinks to directly (not through
// the Broker, whose ping Trigger is the dispatcher's), with the event type
// the PingSource's data must be: they also handle dev.knative.sources.ping.
var directPings = map[string]string{"evaluate": events.TypeEvaluationTick}

// eventRouters builds each event function's router as its main does, with
// nil dependencies: registering handlers touches no database.
func eventRouters() map[string]*faas.Router {
	out := map[string]*faas.Router{}
	add := func(name string, register func(*faas.Router)) {
		r := faas.NewRouter(name, nil, nil)
		register(r)
		out[name] = r
	}
	add("agent-step", agentstep.New(nil, nil, nil, nil, agentstep.Config{}, nil).Register)
	add("tool-invoke", toolinvoke.New(nil, nil, nil, toolinvoke.Config{}, nil).Register)
	add("dispatcher", dispatcher.New(nil, nil, nil, dispatcher.Config{}, nil).Register)
	add("doc-parse", parsedoc.New(nil, nil, nil, nil, nil, nil, nil, nil, parsedoc.Config{}, nil).Register)
	add("kb-index", indexdoc.New(nil, nil, nil, nil, nil, nil, nil, indexdoc.Config{}, nil).Register)
	add("kb-graph", graphbuild.New(nil, nil).Register)
	add("evaluate", evaluate.New(nil, evaluate.Config{}, nil).Register)
	return out
}

// httpFunctions are the functions that serve HTTP rather than events, with
// their handler built from zero dependencies (enough for the probe path).
var httpFunctions = map[string]func() http.Handler{
	"intake": func() http.Handler { return intake.New(intake.Deps{}).Handler() },
}

// probePath is the readiness path a function's Service must name.
func probePath(fn string) string {
	if _, ok := httpFunctions[fn]; ok {
		return intakeProbe
	}
	return eventProbePath
}

// handler is the function's real HTTP handler, for probing.
func handler(t *testing.T, fn string) http.Handler {
	t.Helper()
	if h, ok := httpFunctions[fn]; ok {
		return h()
	}
	r, ok := eventRouters()[fn]
	if !ok {
		t.Fatalf("function %s is neither in httpFunctions nor in eventRouters: add it to the tables in this test", fn)
	}
	return faas.NewHTTPReceiver(r)
}

func setup(t *testing.T) (root string, m *manifests) {
	t.Helper()
	root = repoRoot(t)
	return root, loadManifests(t, root)
}

func TestEveryFunctionIsInTheTables(t *testing.T) {
	root := repoRoot(t)
	routers := eventRouters()
	for _, fn := range functionNames(t, root) {
		_, isEvent := routers[fn]
		_, isHTTP := httpFunctions[fn]
		if isEvent == isHTTP {
			t.Errorf("functions/%s: list it in exactly one of eventRouters and httpFunctions", fn)
		}
	}
	for fn := range routers {
		if _, err := os.Stat(filepath.Join(root, "functions", fn, "main.go")); err != nil {
			t.Errorf("eventRouters lists %s but functions/%s/main.go does not exist", fn, fn)
		}
	}
}

func TestRoutingTableMatchesRouters(t *testing.T) {
	want := append(events.Types(), events.TypeKnativePing)
	for _, typ := range want {
		if _, ok := handledBy[typ]; !ok {
			t.Errorf("event type %s (events.Types) has no entry in handledBy", typ)
		}
	}
	for typ := range handledBy {
		if !slices.Contains(want, typ) {
			t.Errorf("handledBy lists %s, which is neither in events.Types() nor the PingSource type", typ)
		}
	}
	routers := eventRouters()
	for typ, fn := range handledBy {
		r, ok := routers[fn]
		if !ok {
			t.Errorf("handledBy sends %s to %s, which has no event router", typ, fn)
			continue
		}
		if !r.Handles(typ) {
			t.Errorf("handledBy sends %s to %s, but its router does not handle it (it handles %v)", typ, fn, r.Types())
		}
	}
	for fn, r := range routers {
		for _, typ := range r.Types() {
			if typ == events.TypeKnativePing && directPings[fn] != "" {
				continue
			}
			if handledBy[typ] != fn {
				t.Errorf("%s's router handles %s, but handledBy sends it to %q", fn, typ, handledBy[typ])
			}
		}
	}
}

func TestManifestsAreWellFormed(t *testing.T) {
	_, m := setup(t)
	wantAPI := map[string]string{
		"Namespace": "v1", "ConfigMap": "v1", "Secret": "v1",
		"Service": serviceAPI, "Broker": eventingAPI, "Trigger": eventingAPI,
		"PingSource": sourcesAPI, "SinkBinding": sourcesAPI,
		"Kustomization": "kustomize.config.k8s.io/v1beta1",
	}
	for _, d := range m.docs {
		api, known := wantAPI[d.Kind]
		if !known {
			t.Errorf("%s: unexpected kind; teach this test about it", d)
			continue
		}
		if d.APIVersion != api {
			t.Errorf("%s: apiVersion %q, want %q", d, d.APIVersion, api)
		}
		if d.Kind == "Kustomization" {
			continue
		}
		if d.Metadata.Name == "" {
			t.Errorf("%s: no metadata.name", d)
		}
		if d.Metadata.Labels[partOfLabel] != namespace {
			t.Errorf("%s: label %s=%s is missing (ko apply -l selects on it)", d, partOfLabel, namespace)
		}
		switch d.Kind {
		case "Namespace":
			if d.Metadata.Name != namespace || d.Metadata.Namespace != "" {
				t.Errorf("%s: want the cluster-scoped Namespace %q", d, namespace)
			}
		default:
			if d.Metadata.Namespace != namespace {
				t.Errorf("%s: metadata.namespace %q, want %q", d, d.Metadata.Namespace, namespace)
			}
		}
	}
	// References name no namespace, so the set moves with one kustomize edit.
	refs := map[string]*ref{}
	for name, tr := range m.triggers {
		refs["Trigger "+name+" subscriber"] = tr.Spec.Subscriber.Ref
	}
	for name, ps := range m.pingSources {
		refs["PingSource "+name+" sink"] = ps.Spec.Sink.Ref
	}
	for name, sb := range m.sinkBindings {
		refs["SinkBinding "+name+" sink"] = sb.Spec.Sink.Ref
		if sb.Spec.Subject.Namespace != "" {
			t.Errorf("SinkBinding %s: subject names namespace %q; leave it to default", name, sb.Spec.Subject.Namespace)
		}
	}
	for where, r := range refs {
		if r != nil && r.Namespace != "" {
			t.Errorf("%s names namespace %q; leave it to default to the object's own", where, r.Namespace)
		}
	}
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	_, m := setup(t)
	if m.kustomization == nil {
		t.Fatal("knative/kustomization.yaml is missing")
	}
	var want []string
	for _, f := range m.files {
		switch {
		case strings.HasSuffix(f, ".yml"):
			t.Errorf("knative/%s: name it .yaml; ko apply -f skips .yml files", f)
		case strings.HasSuffix(f, ".yaml") && f != "kustomization.yaml":
			want = append(want, f)
		}
	}
	got := slices.Clone(m.kustomization.Resources)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources = %v, want every manifest in knative/: %v", got, want)
	}
	if m.kustomization.Namespace != namespace {
		t.Errorf("kustomization.yaml namespace = %q, want %q", m.kustomization.Namespace, namespace)
	}
}

func TestEveryEventTypeHasOneTrigger(t *testing.T) {
	_, m := setup(t)
	byType := map[string][]string{}
	for name, tr := range m.triggers {
		if tr.Spec.Filter == nil || tr.Spec.Filter.Attributes["type"] == "" {
			t.Errorf("Trigger %s: no spec.filter.attributes.type; it would deliver every event", name)
			continue
		}
		typ := tr.Spec.Filter.Attributes["type"]
		byType[typ] = append(byType[typ], name)
		if _, ok := handledBy[typ]; !ok {
			t.Errorf("Trigger %s filters on %s, which no function handles", name, typ)
		}
	}
	for typ, fn := range handledBy {
		names := byType[typ]
		if len(names) != 1 {
			t.Errorf("event type %s: %d Triggers %v, want exactly one (to %s)", typ, len(names), names, fn)
			continue
		}
		tr := m.triggers[names[0]]
		r := tr.Spec.Subscriber.Ref
		if r == nil || r.APIVersion != serviceAPI || r.Kind != "Service" || r.Name != fn {
			t.Errorf("Trigger %s (%s): subscriber %+v, want ref {apiVersion: %s, kind: Service, name: %s}", names[0], typ, r, serviceAPI, fn)
		}
	}
}

func TestTriggersReachDefinedServices(t *testing.T) {
	_, m := setup(t)
	for name, tr := range m.triggers {
		if _, ok := m.brokers[tr.Spec.Broker]; !ok {
			t.Errorf("Trigger %s: broker %q is not defined in knative/", name, tr.Spec.Broker)
			continue
		}
		r := tr.Spec.Subscriber.Ref
		if r == nil {
			t.Errorf("Trigger %s: subscriber has no ref", name)
			continue
		}
		svc, ok := m.services[r.Name]
		if !ok || r.Kind != "Service" {
			t.Errorf("Trigger %s: subscriber %s %q is not a Service defined in knative/", name, r.Kind, r.Name)
			continue
		}
		d := tr.Spec.Delivery
		if d == nil {
			d = m.brokers[tr.Spec.Broker].Spec.Delivery
		}
		if d == nil || d.Retry == nil || *d.Retry < 1 || d.BackoffPolicy != "exponential" || d.BackoffDelay == "" {
			t.Errorf("Trigger %s: want a delivery (its own or the Broker's) with retry ≥ 1 and exponential backoff, got %+v", name, d)
			continue
		}
		if _, err := parseISODuration(d.BackoffDelay); err != nil {
			t.Errorf("Trigger %s: backoffDelay: %v", name, err)
		}
		if d.Timeout != "" {
			timeout, err := parseISODuration(d.Timeout)
			if err != nil {
				t.Errorf("Trigger %s: delivery timeout: %v", name, err)
			} else if ts := svc.Spec.Template.Spec.TimeoutSeconds; ts != nil && timeout > time.Duration(*ts)*time.Second {
				t.Errorf("Trigger %s: delivery timeout %s exceeds %s's timeoutSeconds %d", name, d.Timeout, r.Name, *ts)
			}
		}
	}
}

func TestBrokerDelivery(t *testing.T) {
	root, m := setup(t)
	b, ok := m.brokers["default"]
	if !ok {
		t.Fatal("no Broker named default")
	}
	d := b.Spec.Delivery
	if d == nil || d.Retry == nil || *d.Retry < 1 || d.BackoffPolicy != "exponential" {
		t.Fatalf("Broker default: want delivery with retry ≥ 1 and exponential backoff, got %+v", d)
	}
	if _, err := parseISODuration(d.BackoffDelay); err != nil {
		t.Errorf("Broker default: backoffDelay: %v", err)
	}
	// Dead letters of every type would land on one function, which answers
	// 400 to the types it does not handle: use a dedicated Service.
	for name, tr := range m.triggers {
		for where, dl := range map[string]*delivery{"Broker default": d, "Trigger " + name: tr.Spec.Delivery} {
			if dl == nil || dl.DeadLetterSink == nil || dl.DeadLetterSink.Ref == nil {
				continue
			}
			if r := dl.DeadLetterSink.Ref; slices.Contains(functionNames(t, root), r.Name) {
				t.Errorf("%s: dead-letter sink %q is a function", where, r.Name)
			}
		}
	}
}

func TestEveryFunctionHasAService(t *testing.T) {
	root, m := setup(t)
	mod := modulePath(t, root)
	toolTimeout := configDuration(t, m, "YUXI_TOOL_TIMEOUT", 5*time.Minute) // bootstrap's default
	sseMaxDuration := configDuration(t, m, "YUXI_SSE_MAX_DURATION", sseMaxDurationDefault)
	for _, fn := range functionNames(t, root) {
		t.Run(fn, func(t *testing.T) {
			svc, ok := m.services[fn]
			if !ok {
				t.Fatalf("no Knative Service named %s in knative/", fn)
			}
			tmpl := svc.Spec.Template
			ann := tmpl.Metadata.Annotations
			if ann[annMinScale] != "0" {
				t.Errorf("%s = %q, want \"0\" (scale to zero)", annMinScale, ann[annMinScale])
			}
			positiveInt(t, annMaxScale, ann[annMaxScale])
			target := positiveInt(t, annTarget, ann[annTarget])
			cc := tmpl.Spec.ContainerConcurrency
			if cc == nil || *cc <= 0 {
				t.Errorf("containerConcurrency not set")
			} else if target > *cc {
				t.Errorf("target %d above containerConcurrency %d", target, *cc)
			}
			ts := tmpl.Spec.TimeoutSeconds
			if ts == nil || *ts <= 0 {
				t.Errorf("timeoutSeconds not set")
			} else if *ts > maxRevisionTimeout {
				t.Errorf("timeoutSeconds %d is above Knative's default max-revision-timeout-seconds %d, which knative/ does not raise: the cluster rejects the revision", *ts, maxRevisionTimeout)
			}
			if fn == "intake" && ts != nil && time.Duration(*ts)*time.Second <= sseMaxDuration {
				t.Errorf("timeoutSeconds %d would cut SSE responses, which last up to YUXI_SSE_MAX_DURATION %s; keep that below it", *ts, sseMaxDuration)
			}
			if fn == "tool-invoke" && ts != nil && time.Duration(*ts)*time.Second <= toolTimeout {
				t.Errorf("timeoutSeconds %d is not above YUXI_TOOL_TIMEOUT %s", *ts, toolTimeout)
			}
			_, isHTTP := httpFunctions[fn]
			if vis := svc.Metadata.Labels[visibilityKey]; isHTTP == (vis == clusterLocal) {
				if isHTTP {
					t.Errorf("the public API must not be %s", clusterLocal)
				} else {
					t.Errorf("event functions are reached through the Broker only: label %s=%s", visibilityKey, clusterLocal)
				}
			}

			if len(tmpl.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(tmpl.Spec.Containers))
			}
			c := tmpl.Spec.Containers[0]
			if want := "ko://" + mod + "/functions/" + fn; c.Image != want {
				t.Errorf("image %q, want %q", c.Image, want)
			}
			for _, k := range []string{"cpu", "memory"} {
				if c.Resources.Requests[k] == "" || c.Resources.Limits[k] == "" {
					t.Errorf("resources: want requests and limits for %s, got %+v", k, c.Resources)
				}
			}
			var cm, sec bool
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == configMapName {
					cm = true
				}
				if ef.SecretRef != nil && ef.SecretRef.Name == secretName {
					sec = true
				}
			}
			if !cm || !sec {
				t.Errorf("envFrom must include configMapRef %s and secretRef %s", configMapName, secretName)
			}
			if _, ok := m.configMaps[configMapName]; !ok {
				t.Errorf("ConfigMap %s is not defined in knative/", configMapName)
			}
			if _, ok := m.secrets[secretName]; !ok {
				t.Errorf("Secret %s is not defined in knative/", secretName)
			}
			for _, e := range c.Env {
				if e.Name == "PORT" {
					t.Errorf("env PORT: Knative sets it and refuses a user value")
				}
			}

			// Readiness: the path the manifest names must answer 200 on the
			// function's real handler.
			want := probePath(fn)
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != want {
				t.Errorf("readinessProbe: want httpGet path %s", want)
			}
			h := handler(t, fn)
			for _, p := range []*probe{c.ReadinessProbe, c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil {
					continue
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.HTTPGet.Path, nil))
				if rec.Code != http.StatusOK {
					t.Errorf("probe GET %s: the %s handler answers %d, want 200", p.HTTPGet.Path, fn, rec.Code)
				}
			}

			// K_SINK: set explicitly, or injected by a SinkBinding whose
			// subject is this Service and whose sink is a defined Broker.
			if !hasEnv(c, "K_SINK") {
				var bindings []string
				for name, sb := range m.sinkBindings {
					s := sb.Spec.Subject
					if s.APIVersion == serviceAPI && s.Kind == "Service" && s.Name == fn {
						bindings = append(bindings, name)
						r := sb.Spec.Sink.Ref
						if r == nil || r.APIVersion != eventingAPI || r.Kind != "Broker" {
							t.Errorf("SinkBinding %s: sink %+v, want a Broker ref", name, sb.Spec.Sink)
						} else if _, ok := m.brokers[r.Name]; !ok {
							t.Errorf("SinkBinding %s: Broker %q is not defined in knative/", name, r.Name)
						}
					}
				}
				if len(bindings) != 1 {
					t.Errorf("K_SINK: want exactly one SinkBinding with subject Service %s (or env K_SINK), got %v", fn, bindings)
				}
			}
		})
	}
	for name := range m.services {
		if !slices.Contains(functionNames(t, root), name) {
			t.Errorf("Service %s has no functions/%s/main.go", name, name)
		}
	}
}

// configDuration is the ConfigMap's value of key as a duration, or def.
func configDuration(t *testing.T, m *manifests, key string, def time.Duration) time.Duration {
	t.Helper()
	v := m.configMaps[configMapName].Data[key]
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("ConfigMap %s %s: %v", configMapName, key, err)
	}
	return d
}

// TestIntakeReadsSSEMaxDuration: the ConfigMap's YUXI_SSE_MAX_DURATION keeps
// streams under intake's timeoutSeconds only if intake's main passes it on.
func TestIntakeReadsSSEMaxDuration(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "functions", "intake", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "SSEMaxDuration: cfg.SSEMaxDuration") {
		t.Error("functions/intake/main.go does not set intake.Deps.SSEMaxDuration from cfg.SSEMaxDuration (YUXI_SSE_MAX_DURATION)")
	}
}

func hasEnv(c container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func positiveInt(t *testing.T, what, v string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		t.Errorf("%s = %q, want a positive integer", what, v)
		return 0
	}
	return n
}

func TestFuncYAMLMatchesService(t *testing.T) {
	root, m := setup(t)
	for _, fn := range functionNames(t, root) {
		t.Run(fn, func(t *testing.T) {
			f, ok := loadFuncYAML(t, root, fn)
			if !ok {
				t.Fatalf("functions/%s/func.yaml is missing", fn)
			}
			if f.Name != fn {
				t.Errorf("name %q, want the folder name %q", f.Name, fn)
			}
			if f.SpecVersion != "0.36.0" || f.Runtime != "go" {
				t.Errorf("specVersion %q runtime %q, want 0.36.0 and go", f.SpecVersion, f.Runtime)
			}
			if f.Created == "" {
				t.Errorf("created is required by the func schema")
			}
			if f.Deploy.Namespace != namespace {
				t.Errorf("deploy.namespace %q, want %q", f.Deploy.Namespace, namespace)
			}
			if len(f.Deploy.Subscriptions) > 0 {
				t.Errorf("deploy.subscriptions would create Triggers next to knative/500-triggers.yaml and deliver events twice")
			}
			if f.Deploy.Annotations[annMinScale] != "0" {
				t.Errorf("deploy.annotations %s = %q, want \"0\"", annMinScale, f.Deploy.Annotations[annMinScale])
			}
			svc, ok := m.services[fn]
			if !ok {
				t.Skip("no Service to compare with (reported by TestEveryFunctionHasAService)")
			}
			tmpl := svc.Spec.Template
			for k, v := range tmpl.Metadata.Annotations {
				if strings.HasPrefix(k, "autoscaling.knative.dev/") && f.Deploy.Annotations[k] != v {
					t.Errorf("deploy.annotations %s = %q, Service has %q", k, f.Deploy.Annotations[k], v)
				}
			}
			for k, v := range f.Deploy.Annotations {
				if tmpl.Metadata.Annotations[k] != v {
					t.Errorf("deploy.annotations %s = %q, Service has %q", k, v, tmpl.Metadata.Annotations[k])
				}
			}
			sc := f.Deploy.Options.Scale
			if sc.Min == nil || *sc.Min != 0 {
				t.Errorf("options.scale.min must be 0")
			}
			if sc.Max == nil || strconv.FormatInt(*sc.Max, 10) != tmpl.Metadata.Annotations[annMaxScale] {
				t.Errorf("options.scale.max %v, Service max-scale %q", deref(sc.Max), tmpl.Metadata.Annotations[annMaxScale])
			}
			if sc.Target == nil || strconv.FormatFloat(*sc.Target, 'f', -1, 64) != tmpl.Metadata.Annotations[annTarget] {
				t.Errorf("options.scale.target %v, Service target %q", deref(sc.Target), tmpl.Metadata.Annotations[annTarget])
			}
			if len(tmpl.Spec.Containers) != 1 {
				t.Fatalf("Service %s: want one container", fn)
			}
			c := tmpl.Spec.Containers[0]
			res := f.Deploy.Options.Resources
			got := map[string]string{
				"requests.cpu": res.Requests.CPU, "requests.memory": res.Requests.Memory,
				"limits.cpu": res.Limits.CPU, "limits.memory": res.Limits.Memory,
			}
			want := map[string]string{
				"requests.cpu": c.Resources.Requests["cpu"], "requests.memory": c.Resources.Requests["memory"],
				"limits.cpu": c.Resources.Limits["cpu"], "limits.memory": c.Resources.Limits["memory"],
			}
			for k := range want {
				if got[k] != want[k] {
					t.Errorf("options.resources.%s = %q, Service has %q", k, got[k], want[k])
				}
			}
			if cc := tmpl.Spec.ContainerConcurrency; res.Limits.Concurrency == nil || cc == nil || *res.Limits.Concurrency != *cc {
				t.Errorf("options.resources.limits.concurrency %v, Service containerConcurrency %v", deref(res.Limits.Concurrency), deref(cc))
			}
			if f.Deploy.HealthEndpoints.Readiness != probePath(fn) {
				t.Errorf("healthEndpoints.readiness %q, want %q", f.Deploy.HealthEndpoints.Readiness, probePath(fn))
			}
			if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && f.Deploy.HealthEndpoints.Liveness != c.LivenessProbe.HTTPGet.Path {
				t.Errorf("healthEndpoints.liveness %q, Service liveness %q", f.Deploy.HealthEndpoints.Liveness, c.LivenessProbe.HTTPGet.Path)
			}
			envs := map[string]bool{}
			for _, e := range f.Run.Envs {
				envs[strings.Join(strings.Fields(e.Value), "")] = true
			}
			for _, w := range []string{"{{configMap:" + configMapName + "}}", "{{secret:" + secretName + "}}"} {
				if !envs[w] {
					t.Errorf("run.envs must import every key with %q (as the Service's envFrom does)", w)
				}
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return "<unset>"
	}
	return *p
}

func compileSchema(t *testing.T, eventType string) *jsonschema.Schema {
	t.Helper()
	raw, err := events.Schema(eventType)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(eventType+".json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(eventType + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPingSourceSendsASweepRequest(t *testing.T) {
	_, m := setup(t)
	if len(m.pingSources) == 0 {
		t.Fatal("no PingSource: nothing schedules the dispatcher's recovery sweeps")
	}
	raw, err := events.Schema(events.TypeSweepRequested)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(events.TypeSweepRequested+".json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(events.TypeSweepRequested + ".json")
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range m.pingSources {
		if fields := strings.Fields(ps.Spec.Schedule); len(fields) != 5 {
			t.Errorf("PingSource %s: schedule %q is not a 5-field cron expression", name, ps.Spec.Schedule)
		}
		if ps.Spec.ContentType != "application/json" || ps.Spec.DataBase64 != "" {
			t.Errorf("PingSource %s: want contentType application/json and JSON in data", name)
		}
		r := ps.Spec.Sink.Ref
		if r != nil && r.Kind == "Service" && directPings[r.Name] != "" {
			// A PingSource straight to a function: its data is that
			// function's tick, validated and strictly decoded the same way.
			var v any
			if err := json.Unmarshal([]byte(ps.Spec.Data), &v); err != nil {
				t.Errorf("PingSource %s: data %q is not JSON: %v", name, ps.Spec.Data, err)
			} else if err := compileSchema(t, directPings[r.Name]).Validate(v); err != nil {
				t.Errorf("PingSource %s: data %q fails the %s schema: %v", name, ps.Spec.Data, directPings[r.Name], err)
			}
			if _, err := events.Decode[events.EvaluationTick]([]byte(ps.Spec.Data)); err != nil {
				t.Errorf("PingSource %s: data %q: %v", name, ps.Spec.Data, err)
			}
			if _, ok := m.services[r.Name]; !ok {
				t.Errorf("PingSource %s: Service %q is not defined", name, r.Name)
			}
			continue
		}
		// The dispatcher validates a tick's data against the sweep schema,
		// then decodes it strictly (shared/faas.OnType): both must pass.
		var v any
		if err := json.Unmarshal([]byte(ps.Spec.Data), &v); err != nil {
			t.Errorf("PingSource %s: data %q is not JSON: %v", name, ps.Spec.Data, err)
		} else if err := schema.Validate(v); err != nil {
			t.Errorf("PingSource %s: data %q fails the %s schema: %v", name, ps.Spec.Data, events.TypeSweepRequested, err)
		}
		if _, err := events.Decode[events.SweepRequested]([]byte(ps.Spec.Data)); err != nil {
			t.Errorf("PingSource %s: data %q: %v", name, ps.Spec.Data, err)
		}
		switch {
		case r == nil:
			t.Errorf("PingSource %s: sink has no ref", name)
		case r.Kind == "Broker":
			if _, ok := m.brokers[r.Name]; !ok {
				t.Errorf("PingSource %s: Broker %q is not defined", name, r.Name)
			}
			// The dispatcher-ping Trigger is checked by TestEveryEventTypeHasOneTrigger.
		case r.Kind == "Service":
			if r.Name != handledBy[events.TypeKnativePing] {
				t.Errorf("PingSource %s: sink Service %q, want %s", name, r.Name, handledBy[events.TypeKnativePing])
			}
		default:
			t.Errorf("PingSource %s: sink %s %q, want the Broker or the dispatcher", name, r.Kind, r.Name)
		}
	}
}

// realLooking matches things that look like live credentials: long
// high-entropy runs and well-known key prefixes.
var realLooking = regexp.MustCompile(`[A-Za-z0-9+/_=-]{24,}|\bsk-[A-Za-z0-9]|\bAKIA[0-9A-Z]{12}|\bgh[pousr]_|\bxox[abprs]-|-----BEGIN`)

func TestSecretsHoldPlaceholdersOnly(t *testing.T) {
	_, m := setup(t)
	if len(m.secrets) == 0 {
		t.Fatalf("no Secret template (%s) in knative/", secretName)
	}
	for name, s := range m.secrets {
		if len(s.Data) > 0 {
			t.Errorf("Secret %s: base64 `data` hides its values from review; use stringData placeholders", name)
		}
		if len(s.StringData) == 0 {
			t.Errorf("Secret %s: no stringData", name)
		}
		for k, v := range s.StringData {
			if !strings.Contains(v, placeholder) {
				t.Errorf("Secret %s %s: value is not marked %s", name, k, placeholder)
			}
			if rest := strings.ReplaceAll(v, placeholder, ""); realLooking.MatchString(rest) {
				t.Errorf("Secret %s %s: %q looks like a real credential", name, k, v)
			}
		}
		// Unedited signing-key placeholders must be refused at start-up
		// (bootstrap wants ≥ 32 bytes), never used as keys.
		for _, k := range []string{"YUXI_JWT_SECRET", "YUXI_API_KEY_SECRET"} {
			if v, ok := s.StringData[k]; ok && len(v) >= 32 {
				t.Errorf("Secret %s %s: a placeholder of %d bytes would be accepted as a key; keep it under 32", name, k, len(v))
			}
		}
	}
}

func TestConfigKeysAreReadByTheCode(t *testing.T) {
	root, m := setup(t)
	known := envNames(t, filepath.Join(root, "shared", "bootstrap", "config.go"))
	if !known["DATABASE_URL"] || !known["K_SINK"] {
		t.Fatalf("shared/bootstrap/config.go no longer names DATABASE_URL and K_SINK (found %v); update this test", known)
	}
	known[llm.EnvDefaultModel] = true
	for _, p := range llm.Templates() {
		if p.APIKeyEnv != "" {
			known[p.APIKeyEnv] = true
		}
	}
	provider := regexp.MustCompile(`^` + regexp.QuoteMeta(llm.EnvProviderPrefix) + `[A-Z0-9_]+_(BASE_URL|API_KEY)$`)
	readByCode := func(k string) bool { return known[k] || provider.MatchString(k) }
	secretish := regexp.MustCompile(`SECRET|API_KEY|PASSWORD|TOKEN|^DATABASE_URL$|^REDIS_URL$`)

	cm, ok := m.configMaps[configMapName]
	if !ok {
		t.Fatalf("ConfigMap %s is not defined", configMapName)
	}
	for k, v := range cm.Data {
		if !readByCode(k) {
			t.Errorf("ConfigMap %s: %s is not read by shared/bootstrap or shared/llm (misspelt?)", configMapName, k)
		}
		switch {
		case k == "PORT":
			t.Errorf("ConfigMap %s: PORT is set by Knative", configMapName)
		case k == "K_SINK":
			t.Errorf("ConfigMap %s: K_SINK comes from the SinkBindings", configMapName)
		case secretish.MatchString(k):
			t.Errorf("ConfigMap %s: %s carries a credential; put it in Secret %s", configMapName, k, secretName)
		}
		if strings.HasPrefix(k, "YUXI_") && (strings.HasSuffix(k, "_LEASE") || strings.HasSuffix(k, "_CLAIM") ||
			strings.HasSuffix(k, "_STALE") || strings.HasSuffix(k, "_TIMEOUT") || strings.HasSuffix(k, "_HEARTBEAT")) {
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				t.Errorf("ConfigMap %s: %s=%q is not a positive Go duration", configMapName, k, v)
			}
		}
	}
	for name, s := range m.secrets {
		for k := range s.StringData {
			if !readByCode(k) {
				t.Errorf("Secret %s: %s is not read by shared/bootstrap or shared/llm (misspelt?)", name, k)
			}
		}
	}
}

// The architecture rules of STYLE.md.

func TestFunctionMainsAreThin(t *testing.T) {
	root := repoRoot(t)
	for _, fn := range functionNames(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, "functions", fn, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(string(raw), "\n")
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			lines++
		}
		if lines > 60 {
			t.Errorf("functions/%s/main.go has %d lines; a main only wires config, clients and the faas adapter (≤ 60)", fn, lines)
		}
	}
}

func TestFunctionsDoNotImportEachOther(t *testing.T) {
	root := repoRoot(t)
	prefix := modulePath(t, root) + "/functions/"
	dir := filepath.Join(root, "functions")
	for _, file := range goFiles(t, dir) {
		own, _, _ := strings.Cut(rel(dir, file), "/")
		for _, imp := range imports(t, file) {
			rest, ok := strings.CutPrefix(imp, prefix)
			if !ok {
				continue
			}
			if other, _, _ := strings.Cut(rest, "/"); other != own {
				t.Errorf("%s imports %s: a function never imports another function", rel(root, file), imp)
			}
		}
	}
}

func TestSharedDoesNotImportFunctions(t *testing.T) {
	root := repoRoot(t)
	fnPrefix := modulePath(t, root) + "/functions"
	for _, top := range []string{"shared", "events"} {
		for _, file := range goFiles(t, filepath.Join(root, top)) {
			for _, imp := range imports(t, file) {
				if imp == fnPrefix || strings.HasPrefix(imp, fnPrefix+"/") {
					t.Errorf("%s imports %s: dependencies point functions → shared → events", rel(root, file), imp)
				}
			}
		}
	}
}

func TestEventsImportsOnlyStdlibAndCloudEvents(t *testing.T) {
	root := repoRoot(t)
	own := modulePath(t, root) + "/events"
	for _, file := range goFiles(t, filepath.Join(root, "events")) {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		for _, imp := range imports(t, file) {
			switch {
			case isStdlib(imp),
				strings.HasPrefix(imp, "github.com/cloudevents/sdk-go/"),
				imp == own || strings.HasPrefix(imp, own+"/"):
			default:
				t.Errorf("%s imports %s: events/ may import only the standard library and the CloudEvents SDK", rel(root, file), imp)
			}
		}
	}
}

// TestServicesRunRestricted holds every Service's containers to the
// Kubernetes "restricted" Pod Security profile, which is also what Knative
// Serving warns about when a field is missing: no privilege escalation, every
// capability dropped, a non-root numeric user, the RuntimeDefault seccomp
// profile, and a read-only root filesystem (no function writes to disk).
func TestServicesRunRestricted(t *testing.T) {
	_, m := setup(t)
	if len(m.services) == 0 {
		t.Fatal("no Knative Services in knative/")
	}
	for name, svc := range m.services {
		for _, c := range svc.Spec.Template.Spec.Containers {
			where := "Service " + name + " container " + c.Name
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no securityContext", where)
				continue
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: want allowPrivilegeEscalation: false", where)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s: privileged", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("%s: want capabilities.drop [ALL]", where)
			} else if len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities.add %v; want none", where, sc.Capabilities.Add)
			}
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("%s: want runAsNonRoot: true", where)
			}
			// A numeric non-zero user lets the kubelet enforce runAsNonRoot
			// without trusting the image's USER.
			if sc.RunAsUser == nil || *sc.RunAsUser <= 0 {
				t.Errorf("%s: want a numeric non-root runAsUser", where)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: want readOnlyRootFilesystem: true", where)
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault" {
				t.Errorf("%s: want seccompProfile.type RuntimeDefault", where)
			}
		}
	}
}

// TestReadmeTableDescribesEveryService holds knative/README.md's function
// table to 300-services.yaml: one row per Service, and each row's visibility,
// triggers, readiness path, scale and timeoutSeconds as deployed.
func TestReadmeTableDescribesEveryService(t *testing.T) {
	root, m := setup(t)
	raw, err := os.ReadFile(filepath.Join(root, "knative", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	inTable := false
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "Function" {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(cells[0], "---") {
			continue
		}
		fn := strings.Trim(cells[0], "`")
		if _, dup := rows[fn]; dup {
			t.Errorf("README table: two rows for %s", fn)
		}
		rows[fn] = cells
	}
	if len(rows) == 0 {
		t.Fatal("knative/README.md has no table whose first column is headed Function")
	}
	backticked := regexp.MustCompile("`([^`]+)`")
	for name, svc := range m.services {
		cells, ok := rows[name]
		if !ok {
			t.Errorf("README table has no row for Service %s", name)
			continue
		}
		if len(cells) != 6 {
			t.Errorf("README row %s: %d columns, want 6 (function, reached by, triggered by, readiness, scale, timeoutSeconds)", name, len(cells))
			continue
		}
		wantVis := "public route"
		if svc.Metadata.Labels[visibilityKey] == clusterLocal {
			wantVis = clusterLocal
		}
		if cells[1] != wantVis {
			t.Errorf("README row %s: reached by %q, Service is %q", name, cells[1], wantVis)
		}
		var wantTypes []string
		for typ, fn := range handledBy {
			if fn == name {
				wantTypes = append(wantTypes, typ)
			}
		}
		var gotTypes []string
		for _, mt := range backticked.FindAllStringSubmatch(cells[2], -1) {
			gotTypes = append(gotTypes, mt[1])
		}
		sort.Strings(wantTypes)
		sort.Strings(gotTypes)
		if len(wantTypes) == 0 {
			if cells[2] != "HTTP" {
				t.Errorf("README row %s: triggered by %q, want HTTP", name, cells[2])
			}
		} else if !slices.Equal(gotTypes, wantTypes) {
			t.Errorf("README row %s: triggered by %v, the Triggers deliver %v", name, gotTypes, wantTypes)
		}
		if want := "`GET " + probePath(name) + "`"; cells[3] != want {
			t.Errorf("README row %s: readiness %q, want %q", name, cells[3], want)
		}
		tmpl := svc.Spec.Template
		ann := tmpl.Metadata.Annotations
		if cc := tmpl.Spec.ContainerConcurrency; cc != nil {
			want := ann[annMinScale] + "/" + ann[annMaxScale] + ", " + ann[annTarget] + ", " + strconv.FormatInt(*cc, 10)
			if cells[4] != want {
				t.Errorf("README row %s: scale %q, Service has %q", name, cells[4], want)
			}
		}
		if ts := tmpl.Spec.TimeoutSeconds; ts != nil {
			if got, _, _ := strings.Cut(cells[5], " "); got != strconv.FormatInt(*ts, 10) {
				t.Errorf("README row %s: timeoutSeconds %q, Service has %d", name, got, *ts)
			}
		}
	}
	for fn := range rows {
		if _, ok := m.services[fn]; !ok {
			t.Errorf("README table lists %s, which has no Service in knative/", fn)
		}
	}
}
