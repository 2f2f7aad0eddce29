package llm

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Environment variables read by LoadRegistry (from the environ it is given).
const (
	EnvProviderPrefix = "YUXI_PROVIDER_" // YUXI_PROVIDER_<ID>_BASE_URL, YUXI_PROVIDER_<ID>_API_KEY
	EnvDefaultModel   = "YUXI_DEFAULT_MODEL"
	envBaseURLSuffix  = "_BASE_URL"
	envAPIKeySuffix   = "_API_KEY"
)

// codeModelNotAvailable is the error code for specs that name no usable model.
const codeModelNotAvailable = "model_not_available"

// Registry holds the configured providers and hands out chat models by spec.
// It is immutable after LoadRegistry and safe for concurrent use.
type Registry struct {
	order        []string // provider ids: templates first, in table order, then added ones sorted
	providers    map[string]Provider
	clients      map[string]*Client
	defaultModel string
}

// LoadRegistry builds the registry from an os.Environ()-style slice
// ("KEY=value"; for a repeated key the last entry wins; empty values count as
// unset). Only mains read the environment; they pass it here.
//
// Rules:
//   - every template of Templates is present; its API key comes from its key
//     variable (e.g. OPENAI_API_KEY);
//   - YUXI_PROVIDER_<ID>_BASE_URL and YUXI_PROVIDER_<ID>_API_KEY override a
//     template's base URL and key, where <ID> is the template id upper-cased
//     with '-' written '_' (SILICONFLOW_CN is siliconflow-cn);
//   - an <ID> that matches no template adds an OpenAI-compatible provider
//     whose id is <ID> lower-cased with '_' written '-' (MY_VLLM is my-vllm);
//     it needs a BASE_URL, and may go without a key (local servers);
//   - base URLs must be absolute http(s) URLs;
//   - YUXI_DEFAULT_MODEL=provider_id:model_id sets the default model; its
//     provider must exist.
//
// A provider without a key still works against endpoints that need none: no
// Authorization header is sent. hc is shared by all providers' clients (nil:
// a plain http.Client).
func LoadRegistry(environ []string, hc *http.Client) (*Registry, error) {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			env[k] = v
		}
	}
	r := &Registry{providers: map[string]Provider{}, clients: map[string]*Client{}}
	byEnvID := map[string]string{}
	for _, t := range Templates() {
		if t.APIKeyEnv != "" {
			t.APIKey = env[t.APIKeyEnv]
		}
		r.order = append(r.order, t.ID)
		r.providers[t.ID] = t
		byEnvID[envID(t.ID)] = t.ID
	}

	// Collect overrides per <ID>, in a stable order so errors are repeatable.
	type override struct{ baseURL, apiKey string }
	overrides := map[string]*override{}
	for k, v := range env {
		rest, ok := strings.CutPrefix(k, EnvProviderPrefix)
		if !ok || v == "" {
			continue
		}
		var id string
		var isURL bool
		switch {
		case strings.HasSuffix(rest, envBaseURLSuffix):
			id, isURL = strings.TrimSuffix(rest, envBaseURLSuffix), true
		case strings.HasSuffix(rest, envAPIKeySuffix):
			id = strings.TrimSuffix(rest, envAPIKeySuffix)
		default:
			continue // not ours (e.g. a future YUXI_PROVIDER_X_SOMETHING)
		}
		if id == "" {
			return nil, fmt.Errorf("%s: missing provider id", k)
		}
		o := overrides[id]
		if o == nil {
			o = &override{}
			overrides[id] = o
		}
		if isURL {
			o.baseURL = v
		} else {
			o.apiKey = v
		}
	}
	ids := make([]string, 0, len(overrides))
	for id := range overrides {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var added []string
	for _, eid := range ids {
		o := overrides[eid]
		urlVar := EnvProviderPrefix + eid + envBaseURLSuffix
		id, known := byEnvID[eid]
		var p Provider
		if known {
			p = r.providers[id]
		} else {
			id = strings.ReplaceAll(strings.ToLower(eid), "_", "-")
			if !validProviderID(id) {
				return nil, fmt.Errorf("%s%s…: provider id %q must be 2-100 letters, digits, '_' or '-'", EnvProviderPrefix, eid, id)
			}
			if o.baseURL == "" {
				return nil, fmt.Errorf("%s is required: provider %q is not a built-in template", urlVar, id)
			}
			p = Provider{ID: id, DisplayName: id, Capabilities: []string{CapChat}}
			added = append(added, id)
		}
		if o.baseURL != "" {
			u, err := checkBaseURL(o.baseURL)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", urlVar, err)
			}
			p.BaseURL = u
		}
		if o.apiKey != "" {
			p.APIKey = o.apiKey
			p.APIKeyEnv = EnvProviderPrefix + eid + envAPIKeySuffix
		}
		r.providers[id] = p
	}
	sort.Strings(added)
	r.order = append(r.order, added...)

	for _, id := range r.order {
		r.clients[id] = NewClient(r.providers[id], hc)
	}

	if spec := env[EnvDefaultModel]; spec != "" {
		prov, _, err := ParseSpec(spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvDefaultModel, err)
		}
		if _, ok := r.providers[prov]; !ok {
			return nil, fmt.Errorf("%s=%s: unknown provider %q", EnvDefaultModel, spec, prov)
		}
		r.defaultModel = spec
	}
	return r, nil
}

// envID is how a provider id is written inside variable names.
func envID(id string) string {
	return strings.ReplaceAll(strings.ToUpper(id), "-", "_")
}

// validProviderID follows the original's provider id rule, lower-cased.
func validProviderID(id string) bool {
	return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{1,99}$`).MatchString(id)
}

func checkBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("base URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("base URL %q must be an absolute http(s) URL", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("base URL %q must not carry credentials; use the _API_KEY variable", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// ParseSpec splits a model spec "provider_id:model_id" at the first ':'.
// Model ids may contain '/' and further ':' (siliconflow-cn:Pro/BAAI/bge-m3).
func ParseSpec(spec string) (provider, model string, err error) {
	provider, model, ok := strings.Cut(spec, ":")
	if !ok || provider == "" || model == "" {
		return "", "", failure.Unprocessable(codeModelNotAvailable,
			"model spec %q must be provider_id:model_id", spec)
	}
	return provider, model, nil
}

// ParseSpec splits a spec of a configured provider. It accepts the current
// form "provider_id:model_id" and the original product's
// "provider_id/model_id": the spec is split at its first separator, or at
// the other one when only that prefix names a configured provider (so
// "openrouter/qwen/qwen3:free" and "openrouter:qwen/qwen3:free" are the
// same model). NormalizeSpec answers the current form.
func (r *Registry) ParseSpec(spec string) (provider, model string, err error) {
	type cand struct{ p, m string }
	var cands []cand
	add := func(k int) {
		if k > 0 && k < len(spec)-1 {
			cands = append(cands, cand{spec[:k], spec[k+1:]})
		}
	}
	colon, slash := strings.IndexByte(spec, ':'), strings.IndexByte(spec, '/')
	if colon >= 0 && (slash < 0 || colon < slash) {
		add(colon)
		add(slash)
	} else {
		add(slash)
		add(colon)
	}
	for _, c := range cands {
		if _, ok := r.providers[c.p]; ok {
			return c.p, c.m, nil
		}
	}
	if len(cands) == 0 {
		return "", "", failure.Unprocessable(codeModelNotAvailable,
			"model spec %q must be provider_id:model_id (or provider_id/model_id)", spec)
	}
	return "", "", failure.Unprocessable(codeModelNotAvailable, "model %q: unknown provider %q", spec, cands[0].p)
}

// NormalizeSpec returns spec in the current form, "provider_id:model_id".
func (r *Registry) NormalizeSpec(spec string) (string, error) {
	p, m, err := r.ParseSpec(spec)
	if err != nil {
		return "", err
	}
	return p + ":" + m, nil
}

// ChatModel returns the model for spec and its model id (the part after the
// provider). The returned ChatModel fills Request.Model with that id when the
// request leaves it empty. Malformed specs and unknown providers give a
// failure.Unprocessable with code "model_not_available".
func (r *Registry) ChatModel(spec string) (ChatModel, string, error) {
	prov, model, err := r.ParseSpec(spec)
	if err != nil {
		return nil, "", err
	}
	return boundModel{c: r.clients[prov], model: model}, model, nil
}

// DefaultModel is the spec from YUXI_DEFAULT_MODEL, "" when unset.
func (r *Registry) DefaultModel() string { return r.defaultModel }

// Providers lists the providers: built-in templates in table order, then the
// ones added from the environment, sorted by id.
func (r *Registry) Providers() []Provider {
	out := make([]Provider, 0, len(r.order))
	for _, id := range r.order {
		p := r.providers[id]
		p.Capabilities = append([]string(nil), p.Capabilities...)
		out = append(out, p)
	}
	return out
}

// Provider returns one provider by id.
func (r *Registry) Provider(id string) (Provider, bool) {
	p, ok := r.providers[id]
	if ok {
		p.Capabilities = append([]string(nil), p.Capabilities...)
	}
	return p, ok
}

// boundModel is a provider client plus the model id from the spec.
type boundModel struct {
	c     *Client
	model string
}

func (b boundModel) Stream(ctx context.Context, req Request, onDelta func(Delta) error) (Response, error) {
	if req.Model == "" {
		req.Model = b.model
	}
	return b.c.Stream(ctx, req, onDelta)
}
