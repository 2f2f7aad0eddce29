package intake

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/chatimage"
	"github.com/yuxi-serverless/yuxi/shared/clientaddr"
	"github.com/yuxi-serverless/yuxi/shared/contentguard"
	"github.com/yuxi-serverless/yuxi/shared/dashboard"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kbassist"
	"github.com/yuxi-serverless/yuxi/shared/logring"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/mindmap"
	"github.com/yuxi-serverless/yuxi/shared/modelprovider"
	"github.com/yuxi-serverless/yuxi/shared/oidc"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/shared/sysconfig"
	"github.com/yuxi-serverless/yuxi/shared/task"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/shared/usersettings"
)

// Deps are the intake's collaborators, built by main.
type Deps struct {
	// Telemetry records a server span and RED metrics per request (nil: off).
	Telemetry *telemetry.Telemetry
	Auth      *auth.Service
	Agents    *agent.Store
	Threads   *thread.Store
	Queue     *queue.Service
	Runs      *run.Store
	Tools     *tool.Registry
	// MCP is the MCP layer (nil: the /api/system/mcp-servers routes are not served).
	MCP *mcp.Toolset
	// Skills are the Skills use cases (nil: the /api/skills and
	// /api/system/skills routes are not served).
	Skills *skill.Service
	// Budgets are the token budgets (nil: the budget routes are not
	// served and /api/auth/me shows none).
	Budgets *budget.Service
	// Hub serves run and request streams; Stream writes cancel signals and end events.
	Hub    *runstream.Hub
	Stream *runstream.Writer
	Log    *slog.Logger
	// MaxBodyBytes bounds every request body (default 1 MiB); larger bodies get 413.
	MaxBodyBytes int64
	// Knowledge bases (nil KBs: the knowledge routes are not served).
	KBs *kb.Store
	// Graph is the knowledge-graph engine of the /api/graph/* routes (nil:
	// they answer 404 graph_unavailable).
	Graph graph.Engine
	// GraphBuild is the graph-build routes' use cases (nil: they answer 404
	// graph_unavailable); its KBs is set here.
	GraphBuild *graph.Builder
	// Mindmaps serves the mind-map routes (nil: they answer 503 mindmap_unavailable).
	Mindmaps *mindmap.Service
	// Assist writes sample questions and descriptions of knowledge bases
	// with the default model (nil: those routes answer 503 assist_unavailable).
	Assist *kbassist.Service
	// Outbound is the SSRF-guarded client (netguard) for fetch-url (nil: 503).
	Outbound  *http.Client
	Retriever *kb.Retriever
	Blob      blob.Store
	Keyword   kb.KeywordIndex
	Vectors   kb.VectorStore
	Outbox    *outbox.Outbox
	// Evaluation serves /api/evaluation (nil: those routes answer 503).
	Evaluation *evaluation.Service
	// Parser turns a file into Markdown (POST /api/knowledge/files/markdown; nil: not served).
	Parser MarkdownParser
	// ClientAddr resolves a request's client address (the peer, or the
	// X-Forwarded-For hop of a trusted proxy); logins are throttled by it.
	ClientAddr clientaddr.Resolver
	// Buckets reads bound buckets to verify a binding (nil: not verifiable here).
	Buckets kb.Buckets
	// NotifyToken authenticates bucket notification webhooks (empty: the webhook is off).
	NotifyToken string
	// Settings are users' own settings and images (nil: those routes answer 503).
	Settings *usersettings.Store
	// OIDC is single sign-on (nil or disabled: the OIDC routes say so).
	OIDC *oidc.Service
	// SSEHeartbeat and SSEMaxDuration tune the event streams (defaults 15s and 30 min).
	SSEHeartbeat   time.Duration
	SSEMaxDuration time.Duration
	// SyncWait bounds the blocking invocation routes (agent-call sync,
	// eval/runs, non-streaming /v1/chat/completions); default 300s.
	SyncWait time.Duration
	// Providers are the model providers managed through the API, next to
	// the environment's (nil: those routes answer 503).
	Providers *modelprovider.Store
	// SysConfig is the system settings (nil: /api/system/config answers 503).
	SysConfig *sysconfig.Store
	// Guard refuses user input with a blocked keyword (nil: off).
	Guard *contentguard.Guard
	// Ready are the dependencies /api/system/ready checks, by name (built
	// by main, so that this package holds no driver).
	Ready map[string]func(context.Context) error
	// Info is /api/system/info (nil: the default branding).
	Info map[string]any
	// OCREngine names the configured OCR engine (empty: none), OCRBaseURL
	// its address (GET /api/system/ocr/health probes it).
	OCREngine  string
	OCRBaseURL string
	// Logs are this process's last log lines (GET /api/system/logs; nil: empty).
	Logs *logring.Ring
	// Sandbox is the sandbox provisioner's client: the viewer, workspace,
	// artifact and attachment routes read and write files through its file
	// API (nil: those routes answer 503 sandbox_unavailable).
	Sandbox *sandbox.Client
	// Models answers /api/chat/call (nil: 503 models_unavailable).
	Models invoke.Models
	// ChatImages stores images uploaded for chat messages (nil: 503).
	ChatImages *chatimage.Store
	// Tasks is the task centre over the KB's tables (nil: /api/tasks
	// answers 503); its KBs is set here.
	Tasks *task.Store
	// Dashboard is the superadmin dashboard (nil: /api/dashboard answers 503).
	Dashboard *dashboard.Store
}

// MarkdownParser parses a document to Markdown.
type MarkdownParser interface {
	Parse(ctx context.Context, filename string, r io.ReaderAt, size int64) (docparse.Result, error)
}

// docTypes are the file types the document parsers read (kb.FileTypes).
type docTypes struct{}

func (docTypes) Extensions() []string { return docparse.SupportedExtensions() }

func (docTypes) Detect(name string, head []byte) error {
	_, err := docparse.Detect(name, head)
	return err
}
