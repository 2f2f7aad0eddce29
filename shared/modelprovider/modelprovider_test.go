package modelprovider_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/modelprovider"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/redistest"
	"github.com/yuxi-serverless/yuxi/shared/secret"
	"github.com/yuxi-serverless/yuxi/shared/secret/secrettest"
)

func str(s string) *string { return &s }

func code(err error) string {
	if f, ok := failure.As(err); ok {
		return f.Code
	}
	return ""
}

// A provider saved through one process is used by another: its key sealed at
// rest and never answered, its URL guarded, its models listed and called on
// a local OpenAI-compatible server.
func TestStoredProvidersAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	rdb, prefix := redistest.New(t)
	keys, err := secret.New(strings.Repeat("k", 40))
	if err != nil {
		t.Fatal(err)
	}
	env, err := llm.LoadRegistry([]string{"OPENAI_API_KEY=env-key"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fake := llmtest.NewServer(t)
	u, _ := url.Parse(fake.URL())

	// The default policy refuses the loopback address of the fake.
	strict := modelprovider.New(pool, rdb, prefix, env, keys, netguard.New(netguard.Options{}))
	in := modelprovider.Input{ProviderID: str("my-vllm"), DisplayName: str("My vLLM"), BaseURL: str(fake.URL()), APIKey: str("sk-provider-secret"),
		Capabilities:  []string{"chat"},
		EnabledModels: []modelprovider.Model{{ID: "fake-model", Type: "chat"}},
		Headers:       map[string]string{"X-Tenant": "tenant-secret"}}
	if _, err := strict.Create(ctx, "admin", in); code(err) != "outbound_denied" {
		t.Fatalf("loopback base URL: %v, want outbound_denied", err)
	}
	if _, err := strict.Create(ctx, "admin", modelprovider.Input{ProviderID: str("http://169.254.169.254"), BaseURL: str("http://x")}); code(err) != "invalid_provider_id" {
		t.Fatalf("bad id: %v", err)
	}

	guard := netguard.New(netguard.Options{Allow: netguard.MustParseAllow(u.Host)})
	a := modelprovider.New(pool, rdb, prefix, env, keys, guard)
	b := modelprovider.New(pool, rdb, prefix, env, keys, guard)
	b.CheckEvery = 0 // b reads the version on every resolution: the test waits on nothing

	if _, _, err := b.ChatModel("my-vllm:fake-model"); code(err) != "model_not_available" {
		t.Fatalf("before create: %v", err)
	}
	if _, err := a.Create(ctx, "admin", modelprovider.Input{ProviderID: str("openai"), BaseURL: str(fake.URL())}); code(err) != "provider_exists" {
		t.Fatalf("environment id: %v, want provider_exists", err)
	}
	bad := in
	bad.ProviderID, bad.APIKeyEnv = str("env-thief"), str("YUXI_JWT_SECRET")
	if _, err := a.Create(ctx, "admin", bad); code(err) != "api_key_env_not_allowed" {
		t.Fatalf("api_key_env: %v", err)
	}
	v, err := a.Create(ctx, "admin", in)
	if err != nil {
		t.Fatal(err)
	}
	if v.APIKey != nil || !v.HasAPIKey || v.Headers["X-Tenant"] != "******" || v.IsBuiltin || v.CredentialStatus != "ok" {
		t.Fatalf("answered view: %+v", v)
	}
	var sealedKey, sealedHeaders string
	if err := pool.QueryRow(ctx, `SELECT api_key_sealed, headers_sealed FROM model_providers WHERE provider_id='my-vllm'`).Scan(&sealedKey, &sealedHeaders); err != nil {
		t.Fatal(err)
	}
	if !secret.IsSealed(sealedKey) || strings.Contains(sealedKey+sealedHeaders, "secret") {
		t.Fatalf("stored in the clear: %q %q", sealedKey, sealedHeaders)
	}

	// The other process resolves both spec forms and calls the provider with its key.
	fake.Enqueue(llmtest.Text("hello from vllm"))
	m, id, err := b.ChatModel("my-vllm/fake-model")
	if err != nil || id != "fake-model" {
		t.Fatalf("resolve: %v %q", err, id)
	}
	resp, err := m.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}, func(llm.Delta) error { return nil })
	if err != nil || resp.Content != "hello from vllm" {
		t.Fatalf("stream: %v %q", err, resp.Content)
	}
	reqs := fake.Requests()
	if got := reqs[len(reqs)-1]; got.Authorization != "Bearer sk-provider-secret" || got.Model != "fake-model" {
		t.Fatalf("request: %+v", got)
	}
	if _, _, err := b.ChatModel("my-vllm:not-enabled"); code(err) != "model_not_available" {
		t.Fatalf("model not enabled: %v", err)
	}
	if spec, err := b.NormalizeSpec("my-vllm/fake-model"); err != nil || spec != "my-vllm:fake-model" {
		t.Fatalf("normalize: %q %v", spec, err)
	}
	// Environment providers come first and keep working.
	if _, id, err := b.ChatModel("openai:gpt-4o"); err != nil || id != "gpt-4o" {
		t.Fatalf("env provider: %v", err)
	}

	remote, err := b.RemoteModels(ctx, "my-vllm")
	if err != nil || len(remote) != 1 || remote[0].ID != "fake-model" || remote[0].Type != "chat" {
		t.Fatalf("remote models: %v %+v", err, remote)
	}
	groups, err := b.Grouped(ctx, "chat")
	if err != nil || len(groups["my-vllm"].Models) != 1 || groups["my-vllm"].Models[0].Spec != "my-vllm:fake-model" {
		t.Fatalf("grouped: %v %+v", err, groups)
	}
	fake.Enqueue(llmtest.Text("1"))
	if st := b.CheckStatus(ctx, "my-vllm:fake-model"); st.Status != "available" {
		t.Fatalf("status: %+v", st)
	}
	list, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var builtin, stored int
	for _, p := range list {
		if p.IsBuiltin {
			builtin++
		} else {
			stored++
		}
	}
	if builtin != len(env.Providers()) || stored != 1 {
		t.Fatalf("list: %d built-in, %d stored", builtin, stored)
	}

	// Updates keep the key and a redacted header; built-in providers are the environment's.
	up, err := a.Update(ctx, "admin", "my-vllm", modelprovider.Input{DisplayName: str("Renamed"), Headers: map[string]string{"X-Tenant": "******", "X-New": "n"}})
	if err != nil || up.DisplayName != "Renamed" || !up.HasAPIKey || len(up.Headers) != 2 {
		t.Fatalf("update: %v %+v", err, up)
	}
	if _, err := a.Update(ctx, "admin", "openai", modelprovider.Input{DisplayName: str("x")}); !errors.Is(err, modelprovider.ErrBuiltin) {
		t.Fatalf("update built-in: %v", err)
	}
	if _, err := a.Update(ctx, "admin", "my-vllm", modelprovider.Input{BaseURL: str("http://127.0.0.2:1/v1")}); code(err) != "outbound_denied" {
		t.Fatalf("update to a denied URL: %v", err)
	}
	if _, err := a.Update(ctx, "admin", "my-vllm", modelprovider.Input{IsEnabled: new(bool)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ChatModel("my-vllm:fake-model"); code(err) != "model_not_available" {
		t.Fatalf("disabled provider: %v", err)
	}
	if err := a.Delete(ctx, "my-vllm"); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "my-vllm"); !errors.Is(err, modelprovider.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := b.Get(ctx, "my-vllm"); !errors.Is(err, modelprovider.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// Without YUXI_ENCRYPTION_KEY a key cannot be stored: 503 encryption_key_missing.
func TestNoKeyNoStoredSecret(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	rdb, prefix := redistest.New(t)
	s := modelprovider.New(pool, rdb, prefix, nil, nil, nil)
	_, err := s.Create(context.Background(), "admin", modelprovider.Input{ProviderID: str("p1"), BaseURL: str("https://example.com/v1"), APIKey: str("k")})
	if !errors.Is(err, secret.ErrNoKey) {
		t.Fatalf("got %v", err)
	}
}

// After a key rotation (the old key moved to the previous keys), ResealSecrets
// seals every stored key and header map again under the new key, so the old
// key can be dropped; a value no configured key opens is named and left as
// it is; a second pass changes nothing; without a key it refuses.
func TestResealSecretsAfterKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	rdb, prefix := redistest.New(t)
	oldKey, newKey, strayKey := strings.Repeat("o", 40), strings.Repeat("n", 40), strings.Repeat("s", 40)
	ring := func(current string, previous ...string) *secret.Keyring {
		return secrettest.Ring(t, current, previous...)
	}
	fake := llmtest.NewServer(t)
	u, _ := url.Parse(fake.URL())
	guard := netguard.New(netguard.Options{Allow: netguard.MustParseAllow(u.Host)})
	before := modelprovider.New(pool, rdb, prefix, nil, ring(oldKey), guard)
	for _, id := range []string{"alpha", "beta"} {
		if _, err := before.Create(ctx, "admin", modelprovider.Input{ProviderID: str(id), BaseURL: str(fake.URL()), APIKey: str("sk-" + id),
			Headers: map[string]string{"X-Tenant": id}}); err != nil {
			t.Fatal(err)
		}
	}
	// beta's key was sealed with a key nobody configured any more.
	stray, err := ring(strayKey).Seal("sk-beta", "model_providers:beta:api_key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE model_providers SET api_key_sealed = $1 WHERE provider_id = 'beta'`, stray); err != nil {
		t.Fatal(err)
	}

	after := modelprovider.New(pool, rdb, prefix, nil, ring(newKey, oldKey), guard)
	n, failed, err := after.ResealSecrets(ctx)
	if err != nil || n != 3 || strings.Join(failed, ",") != "beta" {
		t.Fatalf("reseal: %d %v %v, want 3 values resealed (alpha's key and headers, beta's headers) and beta failed", n, failed, err)
	}
	onlyNew := ring(newKey)
	var alphaKey, alphaHeaders, betaKey, betaHeaders string
	if err := pool.QueryRow(ctx, `SELECT a.api_key_sealed, a.headers_sealed, b.api_key_sealed, b.headers_sealed
		FROM model_providers a, model_providers b WHERE a.provider_id = 'alpha' AND b.provider_id = 'beta'`).
		Scan(&alphaKey, &alphaHeaders, &betaKey, &betaHeaders); err != nil {
		t.Fatal(err)
	}
	if plain, err := onlyNew.Open(alphaKey, "model_providers:alpha:api_key"); err != nil || plain != "sk-alpha" {
		t.Fatalf("alpha's key under the new key alone: %q %v", plain, err)
	}
	for id, v := range map[string]string{"alpha": alphaHeaders, "beta": betaHeaders} {
		if plain, err := onlyNew.Open(v, "model_providers:"+id+":headers"); err != nil || !strings.Contains(plain, id) {
			t.Fatalf("%s's headers under the new key alone: %q %v", id, plain, err)
		}
	}
	if betaKey != stray {
		t.Fatal("a value that does not open was changed")
	}
	// The provider works with the new key alone.
	fake.Enqueue(llmtest.Text("ok"))
	if _, err := modelprovider.New(pool, rdb, prefix, nil, onlyNew, guard).RemoteModels(ctx, "alpha"); err != nil {
		t.Fatalf("alpha under the new key alone: %v", err)
	}
	if n, failed, err := after.ResealSecrets(ctx); err != nil || n != 0 || len(failed) != 1 {
		t.Fatalf("second pass: %d %v %v", n, failed, err)
	}
	if _, _, err := modelprovider.New(pool, rdb, prefix, nil, nil, guard).ResealSecrets(ctx); !errors.Is(err, secret.ErrNoKey) {
		t.Fatalf("without a key: %v", err)
	}
}
