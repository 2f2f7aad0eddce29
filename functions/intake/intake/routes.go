package intake

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Access is who may call a route. The server checks it before the handler
// runs: 401 without a valid token or API key, 403 below the role.
type Access string

const (
	// Public routes take no token; a handler that needs a secret of its own
	// (the bucket webhook) checks it and says so in its Check.
	Public     Access = "public"
	User       Access = "user"
	Admin      Access = "admin"
	SuperAdmin Access = "superadmin"
)

// Check names the resource check a handler makes after the role check, so
// that the two-account suite knows what a second account must be refused.
type Check string

const (
	NoCheck     Check = ""
	OwnThread   Check = "thread_owner"  // {thread_id} belongs to the caller
	OwnRun      Check = "run_owner"     // {run_id} belongs to the caller
	OwnRequest  Check = "request_owner" // {request_id} belongs to the caller
	OwnAPIKey   Check = "api_key_owner" // {api_key_id} belongs to the caller (a superadmin reaches every key)
	ReadAgent   Check = "agent_read"    // {agent_id} is visible to the caller
	ManageAgent Check = "agent_manage"  // {agent_id} may be changed by the caller
	ReadKB      Check = "kb_read"       // {kb_id} is shared with the caller
	ManageKB    Check = "kb_manage"     // {kb_id} may be managed by the caller
	// ReadKBQuery: the knowledge base named by ?kb_id= is shared with the
	// caller (the original's /api/graph/* routes take it as a query parameter).
	ReadKBQuery  Check = "kb_read_query"
	NotifyToken  Check = "notify_token"  // the bucket-notification shared secret
	AgentsInBody Check = "agent_in_body" // the agent (and thread) named in the body are the caller's
	ManageUser   Check = "user_manage"   // {user_id} is managed by the caller (an admin: users of its department)
	Superadmin   Check = "superadmin"    // only the superadmin reaches it (the role check is the resource check)
	CLISession   Check = "cli_session"   // {user_code} is a pending CLI login or one the caller approved
	RunInBody    Check = "run_in_body"   // the run named in the body is the caller's
	// ReadDataset and ManageDataset: {dataset_id}'s knowledge base is shared
	// with the caller (read), or may be managed by them.
	ReadDataset   Check = "dataset_read"
	ManageDataset Check = "dataset_manage"
	// ReadSchedule and ManageSchedule: {schedule_id} is a schedule of one of
	// the caller's suites, or (admins) its knowledge base is shared with the
	// caller (read), or may be managed by them.
	ReadSchedule   Check = "schedule_read"
	ManageSchedule Check = "schedule_manage"
	// ThreadInQuery: the thread named by ?thread_id= (or the body's
	// thread_id) is the caller's; the viewer's and mentions' paths are
	// resolved inside that thread's files only.
	ThreadInQuery Check = "thread_query"
	// OwnWorkspace: paths are resolved inside the caller's own workspace
	// (the scope is the caller's uid; `..` and absolute paths elsewhere are
	// refused), and the knowledge view passes every KB's read check.
	OwnWorkspace Check = "workspace_owner"
	// OwnTmpAttachment: the body's object_name is one of the caller's own
	// temporary attachments.
	OwnTmpAttachment Check = "tmp_attachment_owner"
	// ReadSkill and ManageSkill: {slug} is a shared skill the caller may
	// read (share_config; built-in skills: everyone), or manage.
	ReadSkill   Check = "skill_read"
	ManageSkill Check = "skill_manage"
	// OwnSkillDraft: {draft_id} is an install draft the caller made.
	OwnSkillDraft Check = "skill_draft_owner"
	// OwnPersonalSkill: {slug} is looked up in the caller's own workspace only.
	OwnPersonalSkill Check = "personal_skill_owner"
	// OwnMessage: {message_id} is a message of one of the caller's threads.
	OwnMessage Check = "message_owner"
	// OwnProject: {project_id} is one of the caller's projects.
	OwnProject Check = "project_owner"
	// KBInBody: the knowledge base named by the body's kb_id may be
	// managed by the caller (checked before anything is fetched or read).
	KBInBody Check = "kb_manage_body"
)

// handler is a route's code: it writes its answer, or returns an error that
// the server writes once (see writeError).
type handler func(w http.ResponseWriter, r *http.Request, p auth.Principal) error

// Route is one entry of the API table.
type Route struct {
	Method string
	Path   string
	Access Access
	Check  Check
	h      handler
}

// Pattern is the route's ServeMux pattern.
func (rt Route) Pattern() string { return rt.Method + " " + rt.Path }

// Routes is the whole API, one line a route: method, path, who may call it,
// the resource check its handler makes, and the handler. Tests walk it.
func (s *Server) Routes() []Route {
	rs := []Route{
		{"GET", "/api/system/health", Public, NoCheck, s.health},
		// System (routes_system.go).
		{"GET", "/api/system/ready", Public, NoCheck, s.ready},
		{"GET", "/api/system/discovery", Public, NoCheck, s.discovery},
		{"GET", "/api/system/config", User, NoCheck, s.getConfig},
		{"POST", "/api/system/config", Admin, NoCheck, s.updateConfigSingle},
		{"POST", "/api/system/config/update", Admin, NoCheck, s.updateConfigBatch},
		{"GET", "/api/system/config/options", Admin, NoCheck, s.configOptions},
		{"PUT", "/api/system/config/options/{key}", Admin, NoCheck, s.putConfigOption},
		{"GET", "/api/system/info", Public, NoCheck, s.info},
		{"POST", "/api/system/info/reload", Admin, NoCheck, s.reloadInfo},
		// Model providers (routes_providers.go): instance-wide, the Admin role is the check (as the original).
		{"GET", "/api/system/model-providers", Admin, NoCheck, s.listProviders},
		{"POST", "/api/system/model-providers", Admin, NoCheck, s.createProvider},
		{"GET", "/api/system/model-providers/models/v2", User, NoCheck, s.modelsV2},
		{"GET", "/api/system/model-providers/models/status", Admin, NoCheck, s.modelStatus},
		{"POST", "/api/system/model-providers/models/cache/refresh", Admin, NoCheck, s.refreshModelCache},
		{"GET", "/api/system/model-providers/{provider_id}", Admin, NoCheck, s.getProvider},
		{"PUT", "/api/system/model-providers/{provider_id}", Admin, NoCheck, s.updateProvider},
		{"DELETE", "/api/system/model-providers/{provider_id}", Admin, NoCheck, s.deleteProvider},
		{"GET", "/api/system/model-providers/{provider_id}/remote-models", Admin, NoCheck, s.remoteModels},
		{"GET", "/api/system/ocr/options", User, NoCheck, s.ocrOptions},
		{"GET", "/api/system/ocr/health", User, NoCheck, s.ocrHealth},
		// Process logs name every tenant's threads, KBs and errors: the
		// superadmin's (the original let any admin read them).
		{"GET", "/api/system/logs", SuperAdmin, Superadmin, s.systemLogs},

		// Auth and users (routes_auth.go).
		{"GET", "/api/auth/check-first-run", Public, NoCheck, s.checkFirstRun},
		{"POST", "/api/auth/initialize", Public, NoCheck, s.initializeAdmin},
		{"POST", "/api/auth/token", Public, NoCheck, s.loginForToken},
		{"GET", "/api/auth/me", User, NoCheck, s.readMe},
		{"POST", "/api/auth/users", Admin, NoCheck, s.createUser},
		{"GET", "/api/auth/users", Admin, NoCheck, s.listUsers},

		// Users, profiles, impersonation (routes_users.go).
		{"GET", "/api/auth/users/access-options", Admin, NoCheck, s.userAccessOptions},
		{"GET", "/api/auth/users/{user_id}", Admin, ManageUser, s.getUser},
		{"PUT", "/api/auth/users/{user_id}", Admin, ManageUser, s.updateUser},
		{"DELETE", "/api/auth/users/{user_id}", Admin, ManageUser, s.deleteUser},
		{"POST", "/api/auth/validate-username", Admin, NoCheck, s.validateUsername},
		{"GET", "/api/auth/check-uid/{uid}", Admin, NoCheck, s.checkUID}, // {uid} is a candidate login id
		{"PUT", "/api/auth/profile", User, NoCheck, s.updateProfile},
		{"POST", "/api/auth/upload-avatar", User, NoCheck, s.uploadAvatar},
		{"POST", "/api/auth/impersonate/{user_id}", SuperAdmin, Superadmin, s.impersonate},

		// Departments (routes_dept.go).
		{"GET", "/api/departments", Admin, NoCheck, s.listDepartments},
		{"POST", "/api/departments", SuperAdmin, Superadmin, s.createDepartment},
		{"GET", "/api/departments/{department_id}", SuperAdmin, Superadmin, s.getDepartment},
		{"PUT", "/api/departments/{department_id}", SuperAdmin, Superadmin, s.updateDepartment},
		{"DELETE", "/api/departments/{department_id}", SuperAdmin, Superadmin, s.deleteDepartment},

		// CLI device login (routes_cli_login.go).
		{"POST", "/api/auth/cli/sessions", Public, NoCheck, s.createCLISession},
		{"GET", "/api/auth/cli/sessions/{user_code}", User, CLISession, s.getCLISession},
		{"POST", "/api/auth/cli/sessions/{user_code}/approve", User, CLISession, s.approveCLISession},
		{"POST", "/api/auth/cli/sessions/token", Public, NoCheck, s.exchangeCLISession},

		// OIDC login (routes_oidc.go).
		{"GET", "/api/auth/oidc/config", Public, NoCheck, s.oidcConfig},
		{"GET", "/api/auth/oidc/login-url", Public, NoCheck, s.oidcLoginURL},
		{"GET", "/api/auth/oidc/callback", Public, NoCheck, s.oidcCallback},
		{"POST", "/api/auth/oidc/exchange-code", Public, NoCheck, s.oidcExchangeCode},

		// The caller's own settings and images (routes_user_settings.go).
		{"GET", "/api/user/config", User, NoCheck, s.getUserConfig},
		{"PUT", "/api/user/config", User, NoCheck, s.updateUserConfig},
		{"GET", "/api/user/agent-env", User, NoCheck, s.getAgentEnv},
		{"PUT", "/api/user/agent-env", User, NoCheck, s.updateAgentEnv},
		{"POST", "/api/user/upload-image", User, NoCheck, s.uploadUserImage},
		{"GET", userImagesPrefix + "{image_key...}", Public, NoCheck, s.userImage}, // the key is the capability

		// API keys (routes_apikey.go).
		{"GET", "/api/user/apikey", User, NoCheck, s.listAPIKeys},
		{"GET", "/api/user/apikey/{$}", User, NoCheck, s.listAPIKeys},
		{"POST", "/api/user/apikey", User, NoCheck, s.createAPIKey},
		{"POST", "/api/user/apikey/{$}", User, NoCheck, s.createAPIKey},
		{"GET", "/api/user/apikey/{api_key_id}", User, OwnAPIKey, s.getAPIKey},
		{"PUT", "/api/user/apikey/{api_key_id}", User, OwnAPIKey, s.updateAPIKey},
		{"DELETE", "/api/user/apikey/{api_key_id}", User, OwnAPIKey, s.deleteAPIKey},

		// Agents and tools (routes_agent.go).
		{"GET", "/api/agent/backends", User, NoCheck, s.listBackends},
		{"GET", "/api/agent/backends/{backend_id}", User, NoCheck, s.getBackend}, // a backend is code, the same for everyone
		{"GET", "/api/agent", User, NoCheck, s.listAgents},
		{"GET", "/api/agent/default", User, NoCheck, s.defaultAgent},
		{"POST", "/api/agent", User, NoCheck, s.createAgent},
		{"GET", "/api/agent/{agent_id}", User, ReadAgent, s.getAgent},
		{"PUT", "/api/agent/{agent_id}", User, ManageAgent, s.updateAgent},
		{"DELETE", "/api/agent/{agent_id}", User, ManageAgent, s.deleteAgent},
		{"POST", "/api/agent/{agent_id}/set_default", SuperAdmin, ReadAgent, s.setDefaultAgent}, // the instance default: superadmin only
		{"GET", "/api/system/tools", User, NoCheck, s.listTools},
		{"GET", "/api/system/tools/options", User, NoCheck, s.toolOptions},

		// Threads (routes_thread.go).
		{"POST", "/api/chat/thread", User, AgentsInBody, s.createThread},
		{"GET", "/api/chat/threads", User, NoCheck, s.listThreads},
		{"PUT", "/api/chat/thread/{thread_id}", User, OwnThread, s.updateThread},
		{"DELETE", "/api/chat/thread/{thread_id}", User, OwnThread, s.deleteThread},
		{"GET", "/api/chat/thread/{thread_id}/history", User, OwnThread, s.threadHistory},
		// Chat (routes_chat.go).
		{"POST", "/api/chat/call", User, NoCheck, s.chatCall},
		{"GET", "/api/chat/thread/{thread_id}/state", User, OwnThread, s.threadState},
		{"GET", "/api/chat/threads/search", User, NoCheck, s.searchThreads}, // the caller's own threads only
		{"POST", "/api/chat/thread/{thread_id}/viewed", User, OwnThread, s.markViewed},
		{"POST", "/api/chat/message/{message_id}/feedback", User, OwnMessage, s.submitFeedback},
		{"GET", "/api/chat/message/{message_id}/feedback", User, OwnMessage, s.getFeedback},
		{"POST", "/api/chat/image/upload", User, NoCheck, s.uploadChatImage},
		// Projects (routes_chat.go): the caller's own.
		{"GET", "/api/projects", User, NoCheck, s.listProjects},
		{"POST", "/api/projects", User, NoCheck, s.createProject},
		{"GET", "/api/projects/history-candidates", User, NoCheck, s.projectHistoryCandidates},
		{"DELETE", "/api/projects/{project_id}", User, OwnProject, s.deleteProject}, // not in the original: removes the managed folder

		// Runs and the request queue (routes_run.go).
		{"POST", "/api/agent/runs", User, AgentsInBody, s.submitRun},
		{"GET", "/api/agent/runs/{run_id}", User, OwnRun, s.getRun},
		{"GET", "/api/agent/runs/{run_id}/result", User, OwnRun, s.runResult},
		{"POST", "/api/agent/runs/{run_id}/cancel", User, OwnRun, s.cancelRun},
		{"GET", "/api/agent/runs/{run_id}/events", User, OwnRun, s.runEvents},
		{"GET", "/api/agent/requests/{request_id}", User, OwnRequest, s.getRequest},
		{"POST", "/api/agent/requests/{request_id}/cancel", User, OwnRequest, s.cancelRequest},
		{"POST", "/api/agent/requests/{request_id}/steer", User, OwnRequest, s.steerRequest},
		{"GET", "/api/agent/requests/{request_id}/events", User, OwnRequest, s.requestEvents},
		{"GET", "/api/agent/thread/{thread_id}/requests", User, OwnThread, s.threadRequests},
		{"POST", "/api/agent/thread/{thread_id}/requests/continue", User, OwnThread, s.continueRequests},
		{"GET", "/api/agent/thread/{thread_id}/active_run", User, OwnThread, s.activeRun},

		// Agents for other programs (routes_invoke.go), through the same intake.
		{"POST", "/api/agent-invocation/agent-call/runs", User, AgentsInBody, s.agentCall},
		{"POST", "/api/agent-invocation/agent-call/runs/result", User, RunInBody, s.agentCallResult},
		{"POST", "/api/agent-invocation/channel/messages", User, AgentsInBody, s.channelMessage},
		{"POST", "/api/agent-invocation/eval/runs", User, AgentsInBody, s.evalRun},

		// OpenAI-compatible endpoint (routes_openai.go): agents as models.
		{"GET", "/v1/models", User, NoCheck, s.v1Models},
		{"POST", "/v1/chat/completions", User, AgentsInBody, s.v1ChatCompletions},
	}
	// Files on the sandbox provisioner's volume (routes_files.go).
	rs = append(rs, s.fileRoutes()...)
	// The superadmin dashboard (routes_dashboard.go).
	rs = append(rs, s.dashboardRoutes()...)
	if s.d.KBs != nil {
		rs = append(rs, s.knowledgeRoutes()...)
		rs = append(rs, s.mindmapRoutes()...)
		rs = append(rs, s.kbAssistRoutes()...) // routes_kb_assist.go
		rs = append(rs, s.evaluationRoutes()...)
		rs = append(rs, s.taskRoutes()...)
		rs = append(rs, s.suiteRoutes()...) // routes_suites.go
	}
	if s.d.MCP != nil {
		rs = append(rs, s.mcpRoutes()...)
	}
	if s.d.Skills != nil {
		rs = append(rs, s.skillRoutes()...)
	}
	if s.d.Budgets != nil {
		rs = append(rs, s.budgetRoutes()...)
	}
	rs = append(rs, s.secretRoutes()...) // routes_secrets.go: key rotation
	return rs
}

// knowledgeRoutes: document knowledge bases (/api/knowledge…), handled in
// routes_kb_<resource>.go (bases, documents, tree, content, query, sources,
// external) by shared/kb's Library. Management routes need the admin role
// and the KB permission, as the original; any user reaches the KBs shared
// with them through the external routes and the agent tools.
func (s *Server) knowledgeRoutes() []Route {
	return []Route{
		{"GET", "/api/knowledge/databases", Admin, NoCheck, s.listKBs},
		{"GET", "/api/graph/list", Admin, NoCheck, s.listGraphs},
		{"GET", "/api/graph/subgraph", Admin, ReadKBQuery, s.graphSubgraph},
		{"GET", "/api/graph/labels", Admin, ReadKBQuery, s.graphLabels},
		{"GET", "/api/graph/stats", Admin, ReadKBQuery, s.graphStats},
		{"GET", "/api/knowledge/databases/{kb_id}/graph-build/status", Admin, ReadKB, s.graphBuildStatus},
		{"GET", "/api/knowledge/databases/{kb_id}/graph-build/config", Admin, ReadKB, s.graphBuildGetConfig},
		{"POST", "/api/knowledge/databases/{kb_id}/graph-build/config", Admin, ManageKB, s.graphBuildConfigure},
		{"POST", "/api/knowledge/databases/{kb_id}/graph-build/index", Admin, ManageKB, s.graphBuildIndex},
		{"GET", "/api/knowledge/databases/{kb_id}/graph-build/failed-chunks", Admin, ReadKB, s.graphBuildFailedChunks},
		{"POST", "/api/knowledge/databases/{kb_id}/graph-build/reset", Admin, ManageKB, s.graphBuildReset},
		{"POST", "/api/knowledge/databases", Admin, NoCheck, s.createKB},
		{"GET", "/api/knowledge/databases/accessible", User, NoCheck, s.accessibleKBs},
		{"GET", "/api/knowledge/databases/{kb_id}", Admin, ReadKB, s.getKB},
		{"PUT", "/api/knowledge/databases/{kb_id}", Admin, ManageKB, s.updateKB},
		{"DELETE", "/api/knowledge/databases/{kb_id}", Admin, ManageKB, s.deleteKB},
		{"GET", "/api/knowledge/databases/{kb_id}/documents", Admin, ReadKB, s.listDocuments},
		{"GET", "/api/knowledge/databases/{kb_id}/documents/search", Admin, ReadKB, s.searchDocuments},
		{"POST", "/api/knowledge/databases/{kb_id}/documents", Admin, ManageKB, s.addDocuments},
		{"POST", "/api/knowledge/databases/{kb_id}/documents/add", Admin, ManageKB, s.addDocumentsOnly},
		{"POST", "/api/knowledge/databases/{kb_id}/documents/parse", Admin, ManageKB, s.reparseDocuments},
		{"POST", "/api/knowledge/databases/{kb_id}/documents/index", Admin, ManageKB, s.reindexDocuments},
		{"GET", "/api/knowledge/databases/{kb_id}/documents/{doc_id}", Admin, ReadKB, s.getDocument},
		{"GET", "/api/knowledge/databases/{kb_id}/documents/{doc_id}/basic", Admin, ReadKB, s.getDocumentBasic},
		{"GET", "/api/knowledge/databases/{kb_id}/documents/{doc_id}/content", Admin, ReadKB, s.getDocumentContent},
		{"PUT", "/api/knowledge/databases/{kb_id}/documents/{doc_id}/content", Admin, ManageKB, s.putDocumentContent},
		{"GET", "/api/knowledge/databases/{kb_id}/documents/{doc_id}/download", Admin, ReadKB, s.downloadDocument},
		{"DELETE", "/api/knowledge/databases/{kb_id}/documents/{doc_id}", Admin, ManageKB, s.deleteDocument},
		{"DELETE", "/api/knowledge/databases/{kb_id}/documents/batch", Admin, ManageKB, s.deleteDocuments},
		{"POST", "/api/knowledge/databases/{kb_id}/documents/parse-pending", Admin, ManageKB, s.parsePending},
		{"POST", "/api/knowledge/databases/{kb_id}/documents/index-pending", Admin, ManageKB, s.indexPending},
		{"GET", "/api/knowledge/databases/{kb_id}/documents/exists", Admin, ReadKB, s.documentExists},
		{"PUT", "/api/knowledge/databases/{kb_id}/documents/{doc_id}/move", Admin, ManageKB, s.moveDocument},
		{"POST", "/api/knowledge/databases/{kb_id}/folders", Admin, ManageKB, s.createFolder},
		{"PUT", "/api/knowledge/databases/{kb_id}/folders/{folder_id}/rename", Admin, ManageKB, s.renameFolder},
		{"GET", "/api/knowledge/databases/{kb_id}/images/{object_path...}", User, ReadKB, s.kbImage},
		{"POST", "/api/knowledge/databases/{kb_id}/query", Admin, ReadKB, s.queryKB},
		{"POST", "/api/knowledge/databases/{kb_id}/query-test", Admin, ReadKB, s.queryTest},
		{"GET", "/api/knowledge/databases/{kb_id}/query-params", Admin, ReadKB, s.getQueryParams},
		{"PUT", "/api/knowledge/databases/{kb_id}/query-params", Admin, ManageKB, s.putQueryParams},
		{"GET", "/api/knowledge/databases/{kb_id}/events", Admin, ReadKB, s.kbEvents},
		{"GET", "/api/knowledge/databases/{kb_id}/sources", Admin, ReadKB, s.listSources}, // Store.Sources needs read access
		{"POST", "/api/knowledge/databases/{kb_id}/sources", Admin, ManageKB, s.addSource},
		{"DELETE", "/api/knowledge/databases/{kb_id}/sources/{source_id}", Admin, ManageKB, s.removeSource},
		{"POST", "/api/knowledge/databases/{kb_id}/sources/{source_id}/verify", Admin, ManageKB, s.verifySource},
		{"POST", "/api/knowledge/files/upload", Admin, ManageKB, s.uploadFile},
		{"GET", "/api/knowledge/files/supported-types", Admin, NoCheck, s.supportedTypes},
		{"POST", "/api/knowledge/files/markdown", Admin, NoCheck, s.markdownFile},
		{"GET", "/api/knowledge/chunk-presets", Admin, NoCheck, s.chunkPresets},
		{"GET", "/api/knowledge/types", Admin, NoCheck, s.kbTypes},
		{"POST", "/api/knowledge/notifications", Public, NotifyToken, s.bucketNotification},
		{"GET", "/api/knowledge/databases/external", User, NoCheck, s.externalKBs},
		// The CLI's routes, served from their own mux (see externalPrefix).
		{"GET", externalPrefix + "{kb_id}/files", User, ReadKB, s.externalFiles},
		{"POST", externalPrefix + "{kb_id}/retrieve", User, ReadKB, s.externalRetrieve},
		{"GET", externalPrefix + "{kb_id}/files/{file_id}/open", User, ReadKB, s.externalOpen},
		{"POST", externalPrefix + "{kb_id}/files/{file_id}/find", User, ReadKB, s.externalFind},
	}
}

// evaluationRoutes: RAG evaluation of knowledge bases (/api/evaluation…),
// handled in routes_evaluation.go by shared/evaluation. As the original,
// every RAG route needs the admin role and then the KB's permission (for
// /api/evaluation/datasets/{dataset_id}…, the dataset's KB); schedules and
// history also serve users' own suites.
func (s *Server) evaluationRoutes() []Route {
	return []Route{
		{"POST", "/api/evaluation/databases/{kb_id}/datasets/upload", Admin, ManageKB, s.uploadDataset},
		{"GET", "/api/evaluation/databases/{kb_id}/datasets", Admin, ReadKB, s.listDatasets},
		{"GET", "/api/evaluation/databases/{kb_id}/datasets/{dataset_id}", Admin, ReadKB, s.getDataset},
		{"GET", "/api/evaluation/datasets/{dataset_id}/download", Admin, ReadDataset, s.downloadDataset},
		{"DELETE", "/api/evaluation/datasets/{dataset_id}", Admin, ManageDataset, s.deleteDataset},
		{"POST", "/api/evaluation/databases/{kb_id}/datasets/generate", Admin, ManageKB, s.generateDataset},
		{"POST", "/api/evaluation/databases/{kb_id}/datasets/{dataset_id}/resume", Admin, ManageKB, s.resumeDataset},
		{"POST", "/api/evaluation/databases/{kb_id}/runs", Admin, ManageKB, s.startEvaluationRun},
		{"GET", "/api/evaluation/databases/{kb_id}/runs", Admin, ReadKB, s.listEvaluationRuns},
		{"GET", "/api/evaluation/databases/{kb_id}/runs/{run_id}", Admin, ReadKB, s.getEvaluationRun},
		{"DELETE", "/api/evaluation/databases/{kb_id}/runs/{run_id}", Admin, ManageKB, s.deleteEvaluationRun},
		// Beyond the original: schedules with gates, and metric history. Any
		// user schedules their own suites; RAG (KB) targets need the admin
		// role and then the KB's permission, checked by shared/evaluation.
		{"GET", "/api/evaluation/schedules", User, NoCheck, s.listSchedules},   // the caller's suites' schedules; an admin's: also of KBs it reads
		{"POST", "/api/evaluation/schedules", User, NoCheck, s.createSchedule}, // the body's suite_id is the caller's, or kb_id managed by an admin
		{"GET", "/api/evaluation/schedules/{schedule_id}", User, ReadSchedule, s.getSchedule},
		{"PUT", "/api/evaluation/schedules/{schedule_id}", User, ManageSchedule, s.updateSchedule},
		{"DELETE", "/api/evaluation/schedules/{schedule_id}", User, ManageSchedule, s.deleteSchedule},
		{"GET", "/api/evaluation/history", User, NoCheck, s.evaluationHistory}, // ?target= a suite (or its schedule) of the caller's; a KB or its schedule: admins
	}
}

// externalPrefix starts the CLI's knowledge routes. Their patterns overlap
// …/databases/{kb_id}/… ambiguously for ServeMux (…/external/{kb_id}/files
// against …/{kb_id}/documents/{doc_id}), so they live on their own mux and
// Handler sends every path under the prefix there.
const externalPrefix = "/api/knowledge/databases/external/"

// Handler returns the routed API.
func (s *Server) Handler() http.Handler {
	mux, ext := http.NewServeMux(), http.NewServeMux()
	for _, rt := range s.Routes() {
		m := mux
		if strings.HasPrefix(rt.Path, externalPrefix) {
			m = ext
		}
		m.Handle(rt.Pattern(), s.serve(rt))
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, s.log, failure.NotFound("route_not_found", "no route %s %s", r.Method, r.URL.Path))
	}
	mux.HandleFunc("/api/", notFound)
	mux.HandleFunc(openAIPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeOpenAIError(w, s.log, failure.NotFound("route_not_found", "no route %s %s", r.Method, r.URL.Path))
	})
	ext.HandleFunc("/", notFound)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := refuseUncleanPath(r); err != nil {
			writeError(w, s.log, err)
			return
		}
		if strings.HasPrefix(r.URL.Path, externalPrefix) {
			ext.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// serve runs rt's access check, then its handler, and writes the handler's
// error once. An error after the answer has started (a stream that broke)
// can only be logged.
func (s *Server) serve(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.d.Telemetry != nil {
			ctx, inv := s.d.Telemetry.StartHTTP(r.Context(), rt.Method, rt.Path, r.Header.Get("Traceparent"))
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			defer func() { inv.End(strconv.Itoa(sw.status/100)+"xx", sw.status >= 500, nil) }()
			w, r = sw, r.WithContext(ctx)
		}
		writeErr := writeError
		if isOpenAIPath(rt.Path) {
			writeErr = writeOpenAIError
		}
		p, err := s.authorize(r, rt.Access)
		if err == nil {
			err = checkPathParams(r, rt.Path)
		}
		if err == nil {
			err = checkQuery(r)
		}
		if err != nil {
			writeErr(w, s.log, err)
			return
		}
		tw := &trackingWriter{ResponseWriter: w}
		if err := rt.h(tw, r, p); err != nil {
			if tw.started {
				s.log.Warn("route failed after its answer started", "route", rt.Pattern(), "error", err)
				return
			}
			writeErr(w, s.log, err)
		}
	})
}

// authorize authenticates the caller of a route of the given access.
func (s *Server) authorize(r *http.Request, a Access) (auth.Principal, error) {
	if a == Public {
		return auth.Principal{}, nil
	}
	p, err := s.d.Auth.Authenticate(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		return p, err
	}
	switch {
	case a == Admin && !p.IsAdmin():
		return p, failure.Forbidden("admin_required", "this action needs the admin role")
	case a == SuperAdmin && !p.IsSuperadmin():
		return p, failure.Forbidden("superadmin_required", "this action needs the superadmin role")
	}
	return p, nil
}

// trackingWriter notes whether a handler has started its answer.
type trackingWriter struct {
	http.ResponseWriter
	started bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.started = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.started = true
	return t.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (t *trackingWriter) Flush() {
	t.started = true
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap serves http.ResponseController.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// statusWriter remembers the status a route answered, for its span and
// metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
