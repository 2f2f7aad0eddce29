package bootstrap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
)

// env is a getenv over a map: the tests never read the process environment.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

var (
	secretA = strings.Repeat("a", 32)
	secretB = strings.Repeat("b", 32)
)

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	environ := []string{"YUXI_DEFAULT_MODEL=p:m"}
	c, err := bootstrap.Load(env(nil), environ, "8080")
	if err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	want := map[string][2]any{
		"DatabaseURL":   {c.DatabaseURL, "postgres://postgres@127.0.0.1:5432/yuxi?sslmode=disable"},
		"RedisURL":      {c.RedisURL, "redis://127.0.0.1:6379/0"},
		"RedisPrefix":   {c.RedisPrefix, "yuxi:"},
		"Port":          {c.Port, "8080"},
		"Sink":          {c.Sink, ""},
		"Runtime":       {c.Runtime, ""},
		"LogLevel":      {c.LogLevel, "info"},
		"CrashAt":       {c.CrashAt, ""},
		"JWTSecret":     {c.JWTSecret, ""},
		"APIKeySecret":  {c.APIKeySecret, ""},
		"StepLease":     {c.StepLease, 60 * time.Second},
		"OutboxClaim":   {c.OutboxClaim, 30 * time.Second},
		"SweepInterval": {c.SweepInterval, 10 * time.Second},
		"SweepStale":    {c.SweepStale, 10 * time.Minute},
		"ToolTimeout":   {c.ToolTimeout, 5 * time.Minute},
		"SSEHeartbeat":  {c.SSEHeartbeat, 15 * time.Second},
		"SSEMaxDur":     {c.SSEMaxDuration, 30 * time.Minute},
		"SyncWait":      {c.SyncWait, 300 * time.Second},
		"MaxBodyBytes":  {c.MaxBodyBytes, int64(1 << 20)},
		"CreateDB":      {c.CreateDatabase, false},
	}
	for name, gw := range want {
		if gw[0] != gw[1] {
			t.Errorf("%s = %v, want %v", name, gw[0], gw[1])
		}
	}
	if c.WorkerID == "" {
		t.Error("WorkerID must be generated when unset")
	}
	if len(c.Environ) != 1 || c.Environ[0] != environ[0] {
		t.Errorf("Environ = %v, want it passed through", c.Environ)
	}
	if c.Crasher() != nil {
		t.Error("Crasher must be nil when YUXI_CRASH_AT is unset")
	}
}

func TestLoadReadsEveryVariable(t *testing.T) {
	t.Parallel()
	c, err := bootstrap.Load(env(map[string]string{
		"DATABASE_URL":          "postgres://u@db:5432/x",
		"REDIS_URL":             "rediss://cache:6380/2",
		"YUXI_REDIS_PREFIX":     "t:",
		"PORT":                  "9999",
		"K_SINK":                "http://broker.default.svc/ns/default",
		"YUXI_RUNTIME":          "lambda",
		"YUXI_JWT_SECRET":       secretA,
		"YUXI_API_KEY_SECRET":   secretB,
		"YUXI_WORKER_ID":        "w-1",
		"LOG_LEVEL":             "debug",
		"YUXI_CRASH_AT":         "after_commit:2",
		"YUXI_CREATE_DATABASE":  "true",
		"YUXI_STEP_LEASE":       "2m",
		"YUXI_OUTBOX_CLAIM":     "5s",
		"YUXI_SWEEP_INTERVAL":   "1s",
		"YUXI_SWEEP_STALE":      "1h",
		"YUXI_TOOL_TIMEOUT":     "90s",
		"YUXI_SSE_HEARTBEAT":    "3s",
		"YUXI_SSE_MAX_DURATION": "9m",
		"YUXI_MAX_BODY_BYTES":   "4096",
		"YUXI_SYNC_WAIT":        "45s",
	}), nil, "8080")
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != "postgres://u@db:5432/x" || c.RedisURL != "rediss://cache:6380/2" || c.RedisPrefix != "t:" || c.Port != "9999" ||
		c.Sink != "http://broker.default.svc/ns/default" || c.Runtime != "lambda" || c.JWTSecret != secretA || c.APIKeySecret != secretB ||
		c.WorkerID != "w-1" || c.LogLevel != "debug" || c.CrashAt != "after_commit:2" || !c.CreateDatabase {
		t.Errorf("strings not read: %+v", c)
	}
	if c.StepLease != 2*time.Minute || c.OutboxClaim != 5*time.Second || c.SweepInterval != time.Second || c.SweepStale != time.Hour ||
		c.ToolTimeout != 90*time.Second || c.SSEHeartbeat != 3*time.Second || c.SSEMaxDuration != 9*time.Minute || c.MaxBodyBytes != 4096 || c.SyncWait != 45*time.Second {
		t.Errorf("durations/limits not read: %+v", c)
	}
	if c1, _ := bootstrap.Load(env(map[string]string{"YUXI_CREATE_DATABASE": "1"}), nil, "1"); !c1.CreateDatabase {
		t.Error(`YUXI_CREATE_DATABASE=1 must enable database creation`)
	}
	if c2, _ := bootstrap.Load(env(map[string]string{"YUXI_CREATE_DATABASE": "yes"}), nil, "1"); c2.CreateDatabase {
		t.Error(`YUXI_CREATE_DATABASE=yes is not a recognised truth value`)
	}
}

func TestLoadRejectsBadConfiguration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     map[string]string
		errHas  string
		errHas2 string
	}{
		{"unparsable duration", map[string]string{"YUXI_STEP_LEASE": "sixty"}, "YUXI_STEP_LEASE", "positive duration"},
		{"duration without unit", map[string]string{"YUXI_OUTBOX_CLAIM": "30"}, "YUXI_OUTBOX_CLAIM", "positive duration"},
		{"zero duration", map[string]string{"YUXI_TOOL_TIMEOUT": "0s"}, "YUXI_TOOL_TIMEOUT", "positive duration"},
		{"tool timeout not above the sandbox exec timeout", map[string]string{"SANDBOX_PROVISIONER_URL": "http://sp:8002", "SANDBOX_PROVISIONER_TOKEN": secretA,
			"YUXI_TOOL_TIMEOUT": "180s"}, "YUXI_TOOL_TIMEOUT", "SANDBOX_EXEC_TIMEOUT_SECONDS"},
		{"short provisioner token", map[string]string{"SANDBOX_PROVISIONER_URL": "http://sp:8002", "SANDBOX_PROVISIONER_TOKEN": "short"}, "SANDBOX_PROVISIONER_TOKEN", "32"},
		{"provisioner URL without scheme", map[string]string{"SANDBOX_PROVISIONER_URL": "sp:8002", "SANDBOX_PROVISIONER_TOKEN": secretA}, "SANDBOX_PROVISIONER_URL", "http(s)"},
		{"bad sandbox exec timeout", map[string]string{"SANDBOX_EXEC_TIMEOUT_SECONDS": "3m"}, "SANDBOX_EXEC_TIMEOUT_SECONDS", ""},
		{"negative duration", map[string]string{"YUXI_SSE_HEARTBEAT": "-1s"}, "YUXI_SSE_HEARTBEAT", "positive duration"},
		{"bad sweep interval", map[string]string{"YUXI_SWEEP_INTERVAL": "1x"}, "YUXI_SWEEP_INTERVAL", ""},
		{"bad sweep stale", map[string]string{"YUXI_SWEEP_STALE": "abc"}, "YUXI_SWEEP_STALE", ""},
		{"step lease too short", map[string]string{"YUXI_STEP_LEASE": "1ms"}, "YUXI_STEP_LEASE", "too short"},
		{"body limit not a number", map[string]string{"YUXI_MAX_BODY_BYTES": "1MiB"}, "YUXI_MAX_BODY_BYTES", "1024"},
		{"body limit too small", map[string]string{"YUXI_MAX_BODY_BYTES": "1023"}, "YUXI_MAX_BODY_BYTES", "1024"},
		{"outbound allow-list garbage", map[string]string{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/8, nonsense"}, "YUXI_OUTBOUND_ALLOW", "nonsense"},
		{"unknown web search provider", map[string]string{"WEB_SEARCH_PROVIDER": "bing"}, "WEB_SEARCH_PROVIDER", "tavily or doubao"},
		{"short JWT secret", map[string]string{"YUXI_JWT_SECRET": "short", "YUXI_API_KEY_SECRET": secretB}, "YUXI_JWT_SECRET", "32 bytes"},
		{"short API key secret", map[string]string{"YUXI_JWT_SECRET": secretA, "YUXI_API_KEY_SECRET": strings.Repeat("k", 31)}, "YUXI_API_KEY_SECRET", "32 bytes"},
		{"only JWT secret", map[string]string{"YUXI_JWT_SECRET": secretA}, "set both", ""},
		{"only API key secret", map[string]string{"YUXI_API_KEY_SECRET": secretB}, "set both", ""},
		{"equal secrets", map[string]string{"YUXI_JWT_SECRET": secretA, "YUXI_API_KEY_SECRET": secretA}, "must differ", ""},
		{"short encryption key", map[string]string{"YUXI_ENCRYPTION_KEY": "short-key"}, "YUXI_ENCRYPTION_KEY", "32 bytes"},
		{"encryption key equals JWT secret", map[string]string{"YUXI_JWT_SECRET": secretA, "YUXI_API_KEY_SECRET": secretB, "YUXI_ENCRYPTION_KEY": secretA}, "YUXI_ENCRYPTION_KEY", "differ"},
		{"encryption key equals API key secret", map[string]string{"YUXI_JWT_SECRET": secretA, "YUXI_API_KEY_SECRET": secretB, "YUXI_ENCRYPTION_KEY": secretB}, "YUXI_ENCRYPTION_KEY", "differ"},
		{"previous key without a current one", map[string]string{"YUXI_ENCRYPTION_KEY_PREVIOUS": secretA}, "YUXI_ENCRYPTION_KEY", "not"},
		{"short previous key", map[string]string{"YUXI_ENCRYPTION_KEY": secretA, "YUXI_ENCRYPTION_KEY_PREVIOUS": "short"}, "YUXI_ENCRYPTION_KEY_PREVIOUS", "32 bytes"},
		{"sink without scheme", map[string]string{"K_SINK": "broker.default.svc"}, "K_SINK", "http(s)"},
		{"sink with other scheme", map[string]string{"K_SINK": "ftp://broker"}, "K_SINK", "http(s)"},
		{"sink unparsable", map[string]string{"K_SINK": "http://[::1"}, "K_SINK", ""},
		{"redis URL without scheme", map[string]string{"REDIS_URL": "127.0.0.1:6379"}, "REDIS_URL", "redis://"},
		{"redis URL with other scheme", map[string]string{"REDIS_URL": "http://127.0.0.1:6379"}, "REDIS_URL", ""},
		{"database URL unparsable", map[string]string{"DATABASE_URL": "postgres://u@[::1/db"}, "DATABASE_URL", ""},
		{"unknown graph engine", map[string]string{"YUXI_GRAPH_ENGINE": "arangodb"}, "YUXI_GRAPH_ENGINE", "postgres, neo4j"},
		{"neo4j without its URI", map[string]string{"YUXI_GRAPH_ENGINE": "neo4j", "NEO4J_PASSWORD": secretA}, "NEO4J_URI", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := bootstrap.Load(env(tc.env), nil, "8080")
			if err == nil {
				t.Fatalf("Load accepted %v", tc.env)
			}
			if !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), tc.errHas2) {
				t.Fatalf("error %q should mention %q and %q", err, tc.errHas, tc.errHas2)
			}
			for _, v := range tc.env {
				if len(v) >= 31 && strings.Contains(err.Error(), v) {
					t.Fatalf("error %q leaks a secret", err)
				}
			}
		})
	}
}

func TestLoadAcceptsGoodEdges(t *testing.T) {
	t.Parallel()
	for name, e := range map[string]map[string]string{
		"both secrets of 32 bytes": {"YUXI_JWT_SECRET": secretA, "YUXI_API_KEY_SECRET": secretB},
		"https sink":               {"K_SINK": "https://broker.example/ns"},
		"encryption key rotation":  {"YUXI_ENCRYPTION_KEY": secretA, "YUXI_ENCRYPTION_KEY_PREVIOUS": secretB + "," + strings.Repeat("p", 32)},
		"rediss URL":               {"REDIS_URL": "rediss://cache:6380/0"},
		"body limit of 1024":       {"YUXI_MAX_BODY_BYTES": "1024"},
		"short but legal lease":    {"YUXI_STEP_LEASE": "3ms"},
		"neo4j graph engine":       {"YUXI_GRAPH_ENGINE": "neo4j", "NEO4J_URI": "bolt://graph:7687", "NEO4J_PASSWORD": "pw"},
	} {
		if _, err := bootstrap.Load(env(e), nil, "8080"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The crash hook kills the process with SIGKILL on its n-th hit; these tests
// never let it reach that hit. They check the parsing of "point" and
// "point:n" through hits that must not kill. That the n-th hit does kill (and
// that a bare "point" kills on the first hit) is not tested here: it cannot be
// observed without killing the test process.
func TestCrasherNeverFiresOnOtherPoints(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"step_committed", "step_committed:1", "step_committed:3"} {
		crash := bootstrap.Config{CrashAt: at}.Crasher()
		if crash == nil {
			t.Fatalf("CrashAt=%q: want a hook", at)
		}
		for i := 0; i < 100; i++ {
			crash("tool_finished")
			crash("step_committed_later")
			crash("Step_committed")
			crash("")
		}
	}
}

func TestCrasherCountsBeforeFiring(t *testing.T) {
	t.Parallel()
	// "point:3": the first two hits of the point itself must not kill, so the
	// count was parsed (a bare "point" would fire on the first hit), and the
	// full string is not the point name.
	crash := bootstrap.Config{CrashAt: "after_dispatch:3"}.Crasher()
	crash("after_dispatch")
	crash("after_dispatch:3")
	crash("after_dispatch")
	for i := 0; i < 10; i++ {
		crash("after_dispatch:3") // never the name: the suffix was split off
	}

	// Hooks are independent: each counts its own hits.
	other := bootstrap.Config{CrashAt: "after_dispatch:3"}.Crasher()
	other("after_dispatch")
	other("after_dispatch")
}

func TestCrasherKeepsAnInvalidCountInTheName(t *testing.T) {
	t.Parallel()
	// A suffix that is not a positive integer is part of the point name, so
	// the bare point never matches (it would fire at once otherwise).
	for _, at := range []string{"p:0", "p:-2", "p:x", "p:", ":3"} {
		crash := bootstrap.Config{CrashAt: at}.Crasher()
		for i := 0; i < 10; i++ {
			crash("p")
			crash("")
		}
	}
}

func TestKeyringFromConfig(t *testing.T) {
	t.Parallel()
	c, err := bootstrap.Load(env(nil), nil, "8080")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := c.Keyring(); err != nil || k != nil {
		t.Fatalf("no key configured: Keyring = %v, %v; want nil (refuses to store secrets)", k, err)
	}
	c.EncryptionKeyFile = t.TempDir() + "/data/encryption.key"
	k1, err := c.Keyring()
	if err != nil || !k1.Enabled() {
		t.Fatalf("key file: %v, %v", k1, err)
	}
	k2, _ := c.Keyring()
	if k1.KeyID() != k2.KeyID() {
		t.Fatal("a second start did not reuse the key file")
	}
	c, err = bootstrap.Load(env(map[string]string{"YUXI_ENCRYPTION_KEY": secretA, "YUXI_ENCRYPTION_KEY_FILE": c.EncryptionKeyFile}), nil, "8080")
	if err != nil {
		t.Fatal(err)
	}
	k3, err := c.Keyring()
	if err != nil || k3.KeyID() == k1.KeyID() {
		t.Fatalf("YUXI_ENCRYPTION_KEY must win over the file: %v", err)
	}
}
