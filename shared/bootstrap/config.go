package bootstrap

import (
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/clientaddr"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
	"github.com/yuxi-serverless/yuxi/shared/secret"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
)

// Config is everything a process needs, read once at start.
type Config struct {
	DatabaseURL string // DATABASE_URL
	RedisURL    string // REDIS_URL
	RedisPrefix string // YUXI_REDIS_PREFIX (default "yuxi:")
	Port        string // PORT
	// Sink is K_SINK: where events are published over CloudEvents HTTP
	// (a Knative Broker). Empty in the all-in-one local process (in-process bus).
	Sink string
	// Runtime: http | lambda | gcf (see faas.DetectRuntime).
	Runtime string
	// Relay is YUXI_RELAY: how the outbox publishes events — http (to
	// K_SINK; the default when K_SINK is set), eventbridge, sqs or pubsub.
	// The local runner ignores it (in-process bus).
	Relay string
	// EventBridgeBus (YUXI_EVENTBRIDGE_BUS, name or ARN) and
	// EventBridgeSource (YUXI_EVENTBRIDGE_SOURCE, default yuxi.outbox) for
	// YUXI_RELAY=eventbridge.
	EventBridgeBus    string
	EventBridgeSource string
	// SQSQueues is YUXI_SQS_QUEUES for YUXI_RELAY=sqs: "type=queue-url,…",
	// "*" for the other types (cloudbus.ParseRoutes).
	SQSQueues string
	// AWSRegion (AWS_REGION) and AWSEndpoint (YUXI_AWS_ENDPOINT: another
	// endpoint for EventBridge and SQS, such as LocalStack's
	// http://localhost:4566). Credentials come from the AWS SDK's default
	// chain (the Lambda role's environment, a profile, instance metadata).
	AWSRegion   string
	AWSEndpoint string
	// PubSubTopics is YUXI_PUBSUB_TOPICS for YUXI_RELAY=pubsub: one topic,
	// or "type=topic,…" with "*" for the other types; PubSubProject is
	// YUXI_PUBSUB_PROJECT (default GOOGLE_CLOUD_PROJECT); PubSubOrdering
	// (YUXI_PUBSUB_ORDERING, default on) gives a thread's events its id as
	// ordering key.
	PubSubTopics   string
	PubSubProject  string
	PubSubOrdering bool

	// OTLPEndpoint is OTEL_EXPORTER_OTLP_ENDPOINT: traces and RED metrics
	// are exported there over OTLP/HTTP (shared/telemetry); empty: off.
	// OTLPHeaders is OTEL_EXPORTER_OTLP_HEADERS ("k=v,…"; Langfuse:
	// Authorization=Basic%20<base64 pk:sk>); OTLPFlush is
	// OTEL_BSP_SCHEDULE_DELAY (milliseconds, default 1000).
	OTLPEndpoint string
	OTLPHeaders  map[string]string
	OTLPFlush    time.Duration

	JWTSecret    string // YUXI_JWT_SECRET (≥ 32 bytes); generated and stored when empty
	APIKeySecret string // YUXI_API_KEY_SECRET (≥ 32 bytes); generated and stored when empty
	// EncryptionKey (YUXI_ENCRYPTION_KEY, ≥ 32 bytes, distinct from the JWT
	// and API key secrets) seals secrets at rest (shared/secret); it is never
	// stored in the database. EncryptionKeyPrevious (YUXI_ENCRYPTION_KEY_PREVIOUS,
	// comma-separated) still opens values sealed before a rotation.
	// EncryptionKeyFile (YUXI_ENCRYPTION_KEY_FILE) is read, or created, when
	// EncryptionKey is empty; the local runner defaults it to
	// .yuxi/encryption.key. With neither, storing a secret answers 503
	// encryption_key_missing.
	EncryptionKey         string
	EncryptionKeyPrevious []string
	EncryptionKeyFile     string

	// TrustedProxies (YUXI_TRUSTED_PROXIES: comma-separated CIDRs, empty by
	// default) are the peers whose X-Forwarded-For hop names the client.
	TrustedProxies clientaddr.Resolver
	// LoginAttemptsPerMinute (YUXI_LOGIN_ATTEMPTS_PER_MINUTE, default 20)
	// bounds login attempts per client address (429 beyond).
	LoginAttemptsPerMinute int
	// AuthCacheTTL (YUXI_AUTH_CACHE_TTL, default 5s, 0 disables) is how long
	// a resolved token or API key is answered from memory; revocations and
	// role changes evict it in every process at once through Redis, and the
	// TTL bounds the staleness when such a message is lost.
	AuthCacheTTL time.Duration

	Environ []string // for the model providers (YUXI_PROVIDER_*, *_API_KEY, YUXI_DEFAULT_MODEL)

	StepLease time.Duration // YUXI_STEP_LEASE (default 60s)
	// Token budgets (shared/budget): the output cap (max_tokens) of a model
	// call under a budget, and the least a call reserves (0: its estimated
	// input + the cap).
	TokenBudgetMaxOutput   int64         // YUXI_TOKEN_BUDGET_MAX_OUTPUT (default 8192)
	TokenBudgetCallCeiling int64         // YUXI_TOKEN_BUDGET_CALL_CEILING (default 0)
	OutboxClaim            time.Duration // YUXI_OUTBOX_CLAIM (default 30s)
	// OutboxRetention (YUXI_OUTBOX_RETENTION, default 24h): published outbox
	// rows older than this are deleted by the sweep. OutboxKeyRetention
	// (YUXI_OUTBOX_KEY_RETENTION, default 168h): how long the dedupe keys that
	// must outlive their rows are kept (shared/outbox/retention.go).
	OutboxRetention time.Duration
	// StreamTTL (YUXI_STREAM_TTL, default 2h) bounds a run stream that never
	// ends; StreamTail (YUXI_STREAM_TAIL, default 5m) is how long a stream
	// lives after its end (runstream.Config).
	StreamTTL          time.Duration
	StreamTail         time.Duration
	OutboxKeyRetention time.Duration
	SweepInterval      time.Duration // YUXI_SWEEP_INTERVAL (default 10s; local runner only)
	SweepStale         time.Duration // YUXI_SWEEP_STALE (default 10m)
	ToolTimeout        time.Duration // YUXI_TOOL_TIMEOUT (default 5m)
	SSEHeartbeat       time.Duration // YUXI_SSE_HEARTBEAT (default 15s)
	SyncWait           time.Duration // YUXI_SYNC_WAIT (default 300s): bound of the blocking invocation routes (agent-call sync, eval/runs, non-streaming /v1/chat/completions); 504 past it, the run goes on
	SSEMaxDuration     time.Duration // YUXI_SSE_MAX_DURATION (default 30m): an SSE response ends after it; clients resume with Last-Event-ID. Keep it below the request timeout
	MaxBodyBytes       int64         // YUXI_MAX_BODY_BYTES (default 1 MiB)
	DBMaxConns         int32         // YUXI_DB_MAX_CONNS (default 20): the pool size of each process
	WorkerID           string        // YUXI_WORKER_ID (default: host-pid-random)
	LogLevel           string        // LOG_LEVEL: debug | info | warn | error
	CreateDatabase     bool          // YUXI_CREATE_DATABASE: create DATABASE_URL's database when missing (local runs)

	// Knowledge bases.
	BlobURI          string // YUXI_BLOB_URI: object store (file:///dir or s3://bucket/prefix?endpoint=…); default .yuxi/objects
	BlobAccessKey    string // YUXI_S3_ACCESS_KEY (or AWS_ACCESS_KEY_ID)
	BlobSecretKey    string // YUXI_S3_SECRET_KEY (or AWS_SECRET_ACCESS_KEY)
	DefaultEmbedding string // YUXI_DEFAULT_EMBEDDING_MODEL (default builtin:hash-ngram-256)
	VectorEngine     string // YUXI_VECTOR_ENGINE: postgres (default)
	// GraphEngine (YUXI_GRAPH_ENGINE) stores knowledge graphs: postgres
	// (default, embedded) or neo4j, reached at NEO4J_URI with NEO4J_USERNAME,
	// NEO4J_PASSWORD (the original's names) and NEO4J_DATABASE (default: the
	// server's).
	GraphEngine   string
	Neo4jURI      string
	Neo4jUsername string
	Neo4jPassword string
	Neo4jDatabase string
	OCREngine     string // YUXI_OCR_ENGINE (mineru_ocr, pp_structure_v3_ocr, …); empty: no OCR
	OCRBaseURL    string // YUXI_OCR_BASE_URL
	OCRToken      string // YUXI_OCR_TOKEN
	// Buckets bound to knowledge bases are read with these (S3 API; GCS through its S3 interoperability endpoint).
	SourceS3Endpoint   string // YUXI_SOURCE_S3_ENDPOINT (default s3.amazonaws.com)
	SourceS3Region     string // YUXI_SOURCE_S3_REGION
	SourceS3AccessKey  string // YUXI_SOURCE_S3_ACCESS_KEY
	SourceS3SecretKey  string // YUXI_SOURCE_S3_SECRET_KEY
	SourceS3SSL        bool   // YUXI_SOURCE_S3_SSL (default true)
	SourceGCSAccessKey string // YUXI_SOURCE_GCS_ACCESS_KEY (HMAC key)
	SourceGCSSecretKey string // YUXI_SOURCE_GCS_SECRET_KEY
	// SourceGCSEndpoint is the S3-interoperable endpoint bound Cloud Storage
	// buckets are read through (YUXI_SOURCE_GCS_ENDPOINT, host[:port], default
	// storage.googleapis.com; another value for a GCS emulator or tests), over
	// https unless YUXI_SOURCE_GCS_SSL=false.
	SourceGCSEndpoint string
	SourceGCSSSL      bool
	// NotifyToken authenticates bucket notification webhooks (YUXI_NOTIFY_TOKEN, ≥ 32 bytes); empty disables the webhook.
	NotifyToken string
	FileLease   time.Duration // YUXI_FILE_LEASE: a parsing/indexing stage older than this is presumed dead (default 15m)
	FileGrace   time.Duration // YUXI_FILE_GRACE: a file waiting this long for its next stage is re-driven (default 2m)
	// UploadGrace is YUXI_UPLOAD_GRACE: a KB upload never registered, or a
	// chat image never sent, is removed by the dispatcher's sweep after this
	// (default 24h).
	UploadGrace time.Duration
	// IngestConcurrency is YUXI_INGEST_CONCURRENCY: in the local runner, how
	// many files are parsed, and how many indexed, at once (default half the
	// CPUs, at least 1), so that ingestion leaves cores to the API and chat.
	IngestConcurrency int
	// EvalBatchSize is YUXI_EVAL_BATCH_SIZE: the items an evaluation run
	// commits at once, its unit of progress and of redone work after a
	// crash (default 10, 1–1000; fixed per run when it starts).
	// EvalConcurrency is YUXI_EVAL_CONCURRENCY: a RAG run's items evaluated
	// at once (default 4, 1–64).
	EvalBatchSize   int
	EvalConcurrency int

	// OutboundAllow is YUXI_OUTBOUND_ALLOW: comma-separated CIDRs and
	// host:port pairs the SSRF guard lets through although they are
	// loopback, private or link-local (empty by default). Every outbound
	// request a user or admin can point somewhere uses Outbound().
	OutboundAllow netguard.Allow

	// The sandbox provisioner functions reach (shared/sandbox):
	// SANDBOX_PROVISIONER_URL (empty: no file-system or sandbox tools),
	// SANDBOX_PROVISIONER_TOKEN (≥ 32 characters) and
	// SANDBOX_EXEC_TIMEOUT_SECONDS (default 180), which YUXI_TOOL_TIMEOUT
	// must stay above.
	SandboxURL         string
	SandboxToken       string
	SandboxExecTimeout time.Duration
	// LargeToolResultTokens (YUXI_LARGE_TOOL_RESULT_TOKENS, default 20000,
	// the original's large-tool-result threshold): a tool result estimated
	// above it is offloaded to outputs/large_tool_results/ and the model gets
	// a preview and the path (toolinvoke.Config.LargeResultTokens).
	LargeToolResultTokens int
	// Web tools (shared/webtool): web_search with Tavily or Doubao search,
	// chosen by WEB_SEARCH_PROVIDER or by which key is set; web_fetch unless
	// YUXI_WEB_FETCH=off. The base URLs are for tests and proxies.
	WebSearchProvider string // WEB_SEARCH_PROVIDER
	TavilyAPIKey      string // TAVILY_API_KEY
	TavilyBaseURL     string // TAVILY_BASE_URL
	// Langfuse (agent evaluation suites read datasets and write experiments):
	// LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, LANGFUSE_BASE_URL (all three, or none).
	LangfusePublicKey, LangfuseSecretKey, LangfuseBaseURL string
	DoubaoSearchAPIKey                                    string // DOUBAO_SEARCH_API_KEY
	DoubaoSearchBaseURL                                   string // DOUBAO_SEARCH_BASE_URL
	WebFetchOff                                           bool   // YUXI_WEB_FETCH=off
	// SkillSourceHosts is YUXI_SKILL_SOURCE_HOSTS: the hosts remote skill
	// sources may name (comma-separated "host", "host:port", or
	// "http://host:port" to allow plain http from that origin); unset:
	// github.com and modelscope.cn; "none": remote sources closed.
	SkillSourceHosts []string

	// CrashAt is YUXI_CRASH_AT: "point" or "point:n" — SIGKILL the process the
	// n-th time it reaches the named point. For crash tests only.
	CrashAt string
}

// Outbound returns the SSRF guard for user-directed outbound HTTP, with the
// configured allow-list; its Client() is the one client for such requests.
func (c Config) Outbound() *netguard.Guard {
	return netguard.New(netguard.Options{Allow: c.OutboundAllow, DialTimeout: 10 * time.Second})
}

// Load reads the configuration through getenv and validates it.
func Load(getenv func(string) string, environ []string, defaultPort string) (Config, error) {
	c := Config{
		DatabaseURL:           or(getenv("DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/yuxi?sslmode=disable"),
		RedisURL:              or(getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"),
		RedisPrefix:           or(getenv("YUXI_REDIS_PREFIX"), "yuxi:"),
		Port:                  or(getenv("PORT"), defaultPort),
		Sink:                  getenv("K_SINK"),
		Runtime:               getenv("YUXI_RUNTIME"),
		Relay:                 getenv("YUXI_RELAY"),
		EventBridgeBus:        getenv("YUXI_EVENTBRIDGE_BUS"),
		EventBridgeSource:     getenv("YUXI_EVENTBRIDGE_SOURCE"),
		SQSQueues:             getenv("YUXI_SQS_QUEUES"),
		AWSRegion:             or(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION")),
		AWSEndpoint:           getenv("YUXI_AWS_ENDPOINT"),
		PubSubTopics:          getenv("YUXI_PUBSUB_TOPICS"),
		PubSubProject:         or(getenv("YUXI_PUBSUB_PROJECT"), getenv("GOOGLE_CLOUD_PROJECT")),
		PubSubOrdering:        getenv("YUXI_PUBSUB_ORDERING") != "off",
		OTLPEndpoint:          getenv("OTEL_EXPORTER_OTLP_ENDPOINT"),
		JWTSecret:             getenv("YUXI_JWT_SECRET"),
		APIKeySecret:          getenv("YUXI_API_KEY_SECRET"),
		EncryptionKey:         getenv("YUXI_ENCRYPTION_KEY"),
		EncryptionKeyFile:     getenv("YUXI_ENCRYPTION_KEY_FILE"),
		EncryptionKeyPrevious: secret.ParsePrevious(getenv("YUXI_ENCRYPTION_KEY_PREVIOUS")),
		Environ:               environ,
		WorkerID:              getenv("YUXI_WORKER_ID"),
		LogLevel:              or(getenv("LOG_LEVEL"), "info"),
		CrashAt:               getenv("YUXI_CRASH_AT"),
		BlobURI:               or(getenv("YUXI_BLOB_URI"), ".yuxi/objects"),
		BlobAccessKey:         or(getenv("YUXI_S3_ACCESS_KEY"), getenv("AWS_ACCESS_KEY_ID")),
		BlobSecretKey:         or(getenv("YUXI_S3_SECRET_KEY"), getenv("AWS_SECRET_ACCESS_KEY")),
		DefaultEmbedding:      or(getenv("YUXI_DEFAULT_EMBEDDING_MODEL"), "builtin:hash-ngram-256"),
		VectorEngine:          or(getenv("YUXI_VECTOR_ENGINE"), "postgres"),
		GraphEngine:           or(getenv("YUXI_GRAPH_ENGINE"), "postgres"),
		Neo4jURI:              getenv("NEO4J_URI"),
		Neo4jUsername:         or(getenv("NEO4J_USERNAME"), "neo4j"),
		Neo4jPassword:         getenv("NEO4J_PASSWORD"),
		Neo4jDatabase:         getenv("NEO4J_DATABASE"),
		OCREngine:             getenv("YUXI_OCR_ENGINE"),
		OCRBaseURL:            getenv("YUXI_OCR_BASE_URL"),
		OCRToken:              getenv("YUXI_OCR_TOKEN"),
		SourceS3Endpoint:      or(getenv("YUXI_SOURCE_S3_ENDPOINT"), "s3.amazonaws.com"),
		SourceS3Region:        getenv("YUXI_SOURCE_S3_REGION"),
		SourceS3AccessKey:     getenv("YUXI_SOURCE_S3_ACCESS_KEY"),
		SourceS3SecretKey:     getenv("YUXI_SOURCE_S3_SECRET_KEY"),
		SourceS3SSL:           getenv("YUXI_SOURCE_S3_SSL") != "false",
		SourceGCSAccessKey:    getenv("YUXI_SOURCE_GCS_ACCESS_KEY"),
		SourceGCSSecretKey:    getenv("YUXI_SOURCE_GCS_SECRET_KEY"),
		SourceGCSEndpoint:     or(getenv("YUXI_SOURCE_GCS_ENDPOINT"), "storage.googleapis.com"),
		SourceGCSSSL:          getenv("YUXI_SOURCE_GCS_SSL") != "false",
		NotifyToken:           getenv("YUXI_NOTIFY_TOKEN"),
		CreateDatabase:        getenv("YUXI_CREATE_DATABASE") == "1" || getenv("YUXI_CREATE_DATABASE") == "true",
		SandboxURL:            getenv("SANDBOX_PROVISIONER_URL"),
		SandboxToken:          getenv("SANDBOX_PROVISIONER_TOKEN"),
		SandboxExecTimeout:    180 * time.Second,
		WebSearchProvider:     getenv("WEB_SEARCH_PROVIDER"),
		TavilyAPIKey:          getenv("TAVILY_API_KEY"),
		TavilyBaseURL:         getenv("TAVILY_BASE_URL"),
		LangfusePublicKey:     getenv("LANGFUSE_PUBLIC_KEY"),
		LangfuseSecretKey:     getenv("LANGFUSE_SECRET_KEY"),
		LangfuseBaseURL:       or(getenv("LANGFUSE_BASE_URL"), getenv("LANGFUSE_HOST")),
		DoubaoSearchAPIKey:    getenv("DOUBAO_SEARCH_API_KEY"),
		DoubaoSearchBaseURL:   getenv("DOUBAO_SEARCH_BASE_URL"),
		WebFetchOff:           getenv("YUXI_WEB_FETCH") == "off",
		SkillSourceHosts:      splitList(getenv("YUXI_SKILL_SOURCE_HOSTS")),
	}
	var err error
	durations := []struct {
		env string
		dst *time.Duration
		def time.Duration
	}{
		{"YUXI_STEP_LEASE", &c.StepLease, 60 * time.Second},
		{"YUXI_OUTBOX_CLAIM", &c.OutboxClaim, 30 * time.Second},
		{"YUXI_OUTBOX_RETENTION", &c.OutboxRetention, 24 * time.Hour},
		{"YUXI_STREAM_TTL", &c.StreamTTL, 2 * time.Hour},
		{"YUXI_STREAM_TAIL", &c.StreamTail, 5 * time.Minute},
		{"YUXI_OUTBOX_KEY_RETENTION", &c.OutboxKeyRetention, 7 * 24 * time.Hour},
		{"YUXI_SWEEP_INTERVAL", &c.SweepInterval, 10 * time.Second},
		{"YUXI_SWEEP_STALE", &c.SweepStale, 10 * time.Minute},
		{"YUXI_TOOL_TIMEOUT", &c.ToolTimeout, 5 * time.Minute},
		{"YUXI_SSE_HEARTBEAT", &c.SSEHeartbeat, 15 * time.Second},
		{"YUXI_SSE_MAX_DURATION", &c.SSEMaxDuration, 30 * time.Minute},
		{"YUXI_SYNC_WAIT", &c.SyncWait, 300 * time.Second},
		{"YUXI_FILE_LEASE", &c.FileLease, 15 * time.Minute},
		{"YUXI_FILE_GRACE", &c.FileGrace, 2 * time.Minute},
		{"YUXI_UPLOAD_GRACE", &c.UploadGrace, 24 * time.Hour},
	}
	for _, d := range durations {
		*d.dst = d.def
		if v := getenv(d.env); v != "" {
			if *d.dst, err = time.ParseDuration(v); err != nil || *d.dst <= 0 {
				return c, fmt.Errorf("%s=%q: want a positive duration such as 30s", d.env, v)
			}
		}
	}
	if c.OTLPHeaders, err = telemetry.ParseHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS")); err != nil {
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %w", err)
	}
	c.OTLPFlush = time.Second
	if v := getenv("OTEL_BSP_SCHEDULE_DELAY"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 1 {
			return c, fmt.Errorf("OTEL_BSP_SCHEDULE_DELAY=%q: want milliseconds", v)
		}
		c.OTLPFlush = time.Duration(ms) * time.Millisecond
	}
	if v := getenv("SANDBOX_EXEC_TIMEOUT_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("SANDBOX_EXEC_TIMEOUT_SECONDS=%q: want a positive number of seconds", v)
		}
		c.SandboxExecTimeout = time.Duration(n) * time.Second
	}
	c.TokenBudgetMaxOutput = 8192
	for _, v := range []struct {
		env string
		dst *int64
		min int64
	}{{"YUXI_TOKEN_BUDGET_MAX_OUTPUT", &c.TokenBudgetMaxOutput, 1}, {"YUXI_TOKEN_BUDGET_CALL_CEILING", &c.TokenBudgetCallCeiling, 0}} {
		if s := getenv(v.env); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < v.min {
				return c, fmt.Errorf("%s=%q: want a number of tokens ≥ %d", v.env, s, v.min)
			}
			*v.dst = n
		}
	}
	c.LargeToolResultTokens = 20000
	if v := getenv("YUXI_LARGE_TOOL_RESULT_TOKENS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			return c, fmt.Errorf("YUXI_LARGE_TOOL_RESULT_TOKENS=%q: want a number of tokens ≥ 100", v)
		}
		c.LargeToolResultTokens = n
	}
	c.DBMaxConns = 20
	if v := getenv("YUXI_DB_MAX_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return c, fmt.Errorf("YUXI_DB_MAX_CONNS=%q: want an integer between 1 and 1000", v)
		}
		c.DBMaxConns = int32(n)
	}
	if c.TrustedProxies, err = clientaddr.Parse(getenv("YUXI_TRUSTED_PROXIES")); err != nil {
		return c, err
	}
	c.AuthCacheTTL = 5 * time.Second
	if v := getenv("YUXI_AUTH_CACHE_TTL"); v != "" {
		if c.AuthCacheTTL, err = time.ParseDuration(v); err != nil || c.AuthCacheTTL < 0 || c.AuthCacheTTL > time.Hour {
			return c, fmt.Errorf("YUXI_AUTH_CACHE_TTL=%q: want a duration between 0 and 1h", v)
		}
	}
	c.LoginAttemptsPerMinute = 20
	if v := getenv("YUXI_LOGIN_ATTEMPTS_PER_MINUTE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return c, fmt.Errorf("YUXI_LOGIN_ATTEMPTS_PER_MINUTE=%q: want an integer between 1 and 100000", v)
		}
		c.LoginAttemptsPerMinute = n
	}
	c.IngestConcurrency = max(1, runtime.NumCPU()/2)
	if v := getenv("YUXI_INGEST_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 256 {
			return c, fmt.Errorf("YUXI_INGEST_CONCURRENCY=%q: want an integer between 1 and 256", v)
		}
		c.IngestConcurrency = n
	}
	for _, n := range []struct {
		env           string
		dst           *int
		def, min, max int
	}{
		{"YUXI_EVAL_BATCH_SIZE", &c.EvalBatchSize, 10, 1, 1000},
		{"YUXI_EVAL_CONCURRENCY", &c.EvalConcurrency, 4, 1, 64},
	} {
		*n.dst = n.def
		if v := getenv(n.env); v != "" {
			if *n.dst, err = strconv.Atoi(v); err != nil || *n.dst < n.min || *n.dst > n.max {
				return c, fmt.Errorf("%s=%q: want an integer between %d and %d", n.env, v, n.min, n.max)
			}
		}
	}
	if c.OutboundAllow, err = netguard.ParseAllow(getenv("YUXI_OUTBOUND_ALLOW")); err != nil {
		return c, err
	}
	c.MaxBodyBytes = 1 << 20
	if v := getenv("YUXI_MAX_BODY_BYTES"); v != "" {
		if c.MaxBodyBytes, err = strconv.ParseInt(v, 10, 64); err != nil || c.MaxBodyBytes < 1024 {
			return c, fmt.Errorf("YUXI_MAX_BODY_BYTES=%q: want an integer ≥ 1024", v)
		}
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().UnixNano()%1_000_000)
	}
	return c, c.validate()
}

func (c Config) validate() error {
	switch strings.ToLower(c.WebSearchProvider) {
	case "", "tavily", "doubao":
	default:
		return fmt.Errorf("WEB_SEARCH_PROVIDER=%q: want tavily or doubao", c.WebSearchProvider)
	}
	if _, err := url.Parse(c.DatabaseURL); err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	if !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
		return fmt.Errorf("REDIS_URL must start with redis:// or rediss://")
	}
	if c.Sink != "" {
		u, err := url.Parse(c.Sink)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("K_SINK=%q: want an http(s) URL", c.Sink)
		}
	}
	if err := c.validateRelay(); err != nil {
		return err
	}
	for name, v := range map[string]string{"YUXI_JWT_SECRET": c.JWTSecret, "YUXI_API_KEY_SECRET": c.APIKeySecret} {
		if v != "" && len(v) < 32 {
			return fmt.Errorf("%s must be at least 32 bytes", name)
		}
	}
	if (c.JWTSecret == "") != (c.APIKeySecret == "") {
		return fmt.Errorf("set both YUXI_JWT_SECRET and YUXI_API_KEY_SECRET, or neither (then they are generated and stored)")
	}
	if c.JWTSecret != "" && c.JWTSecret == c.APIKeySecret {
		return fmt.Errorf("YUXI_JWT_SECRET and YUXI_API_KEY_SECRET must differ")
	}
	if c.EncryptionKey != "" || len(c.EncryptionKeyPrevious) > 0 {
		if c.EncryptionKey == "" {
			return fmt.Errorf("YUXI_ENCRYPTION_KEY_PREVIOUS is set but YUXI_ENCRYPTION_KEY is not")
		}
		if _, err := secret.New(c.EncryptionKey, c.EncryptionKeyPrevious...); err != nil {
			return err
		}
		for _, other := range []string{c.JWTSecret, c.APIKeySecret} {
			if other != "" && other == c.EncryptionKey {
				return fmt.Errorf("YUXI_ENCRYPTION_KEY must differ from YUXI_JWT_SECRET and YUXI_API_KEY_SECRET")
			}
		}
	}
	switch {
	case c.GraphEngine != "postgres" && c.GraphEngine != "neo4j":
		return fmt.Errorf("YUXI_GRAPH_ENGINE=%q: supported engines: postgres, neo4j", c.GraphEngine)
	case c.GraphEngine == "neo4j" && c.Neo4jURI == "":
		return fmt.Errorf("YUXI_GRAPH_ENGINE=neo4j needs NEO4J_URI (bolt://host:7687 or neo4j://host:7687)")
	}
	if c.VectorEngine != "postgres" {
		return fmt.Errorf("YUXI_VECTOR_ENGINE=%q: supported engines: postgres", c.VectorEngine)
	}
	if c.NotifyToken != "" && len(c.NotifyToken) < 32 {
		return fmt.Errorf("YUXI_NOTIFY_TOKEN must be at least 32 bytes")
	}
	if (c.OCREngine == "") != (c.OCRBaseURL == "") {
		return fmt.Errorf("set both YUXI_OCR_ENGINE and YUXI_OCR_BASE_URL, or neither")
	}
	if c.OutboxKeyRetention < c.OutboxRetention {
		return fmt.Errorf("YUXI_OUTBOX_KEY_RETENTION must not be shorter than YUXI_OUTBOX_RETENTION")
	}
	if c.StreamTail > c.StreamTTL {
		return fmt.Errorf("YUXI_STREAM_TAIL must not be longer than YUXI_STREAM_TTL")
	}
	if c.SandboxURL != "" {
		if u, err := url.Parse(c.SandboxURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("SANDBOX_PROVISIONER_URL=%q: want an http(s) URL", c.SandboxURL)
		}
		if len(c.SandboxToken) < 32 {
			return fmt.Errorf("SANDBOX_PROVISIONER_TOKEN must be at least 32 characters")
		}
		if c.ToolTimeout <= c.SandboxExecTimeout {
			return fmt.Errorf("YUXI_TOOL_TIMEOUT (%s) must stay above SANDBOX_EXEC_TIMEOUT_SECONDS (%s): a command would outlive its tool call", c.ToolTimeout, c.SandboxExecTimeout)
		}
	}
	if c.StepLease < 3*time.Millisecond {
		return fmt.Errorf("YUXI_STEP_LEASE is too short")
	}
	return nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Keyring builds the secrets-at-rest keyring: from EncryptionKey, else from
// EncryptionKeyFile (created when missing), else nil — the ring that refuses
// to store secrets (secret.ErrNoKey).
func (c Config) Keyring() (*secret.Keyring, error) {
	key := c.EncryptionKey
	if key == "" && c.EncryptionKeyFile != "" {
		var err error
		if key, err = secret.LoadOrCreateKeyFile(c.EncryptionKeyFile); err != nil {
			return nil, err
		}
		for _, other := range []string{c.JWTSecret, c.APIKeySecret} {
			if other != "" && other == key {
				return nil, fmt.Errorf("the key in %s must differ from YUXI_JWT_SECRET and YUXI_API_KEY_SECRET", c.EncryptionKeyFile)
			}
		}
	}
	if key == "" {
		return nil, nil
	}
	return secret.New(key, c.EncryptionKeyPrevious...)
}

// Crasher returns the failpoint hook for CrashAt (nil when unset): it kills
// the process with SIGKILL — no deferred function runs, no buffer is flushed —
// the n-th time the named point is reached.
func (c Config) Crasher() func(point string) {
	if c.CrashAt == "" {
		return nil
	}
	name, nth := c.CrashAt, 1
	if i := strings.LastIndex(c.CrashAt, ":"); i > 0 {
		if n, err := strconv.Atoi(c.CrashAt[i+1:]); err == nil && n > 0 {
			name, nth = c.CrashAt[:i], n
		}
	}
	var hits atomic.Int32
	return func(point string) {
		if point != name {
			return
		}
		if n := hits.Add(1); int(n) == nth {
			fmt.Fprintf(os.Stderr, "crash point %s reached (hit %d): SIGKILL\n", point, nth)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never continue past a crash point
		}
	}
}

// splitList splits a comma-separated list, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
