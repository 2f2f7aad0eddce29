// Package intake is the public HTTP API of the platform: auth, API keys,
// agents, threads, run submission, run and request SSE, results, and
// knowledge bases (their use cases are shared/kb's Library). It is the
// handler package of the intake function; its main adapts it to HTTP, a
// Lambda Function URL or functions-framework.
//
// Imported by: functions/intake (main), infra/local, tests.
// May import: events, shared/* (not pgx: the stores in shared/ own the SQL).
package intake

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kbimport"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/task"
	"github.com/yuxi-serverless/yuxi/shared/userfiles"
)

// Server is the HTTP API.
type Server struct {
	d   Deps
	log *slog.Logger
	// kb runs the knowledge routes' use cases (nil when d.KBs is).
	kb *kb.Library
	// graph runs the /api/graph/* use cases (nil: not configured).
	graph *graph.Service
	// graphBuild runs the graph-build use cases (nil: not configured).
	graphBuild *graph.Builder
	// inv runs the invocation routes' use cases (agent-call, channels, eval, /v1).
	inv *invoke.Service
	// files runs the file routes' use cases (viewer, workspace, artifacts, attachments).
	files *userfiles.Service
	// tasks is the task centre (nil: /api/tasks answers 503).
	tasks *task.Store
	// imports runs fetch-url and import-workspace (nil when d.KBs is).
	imports *kbimport.Service
}

// New returns the API server. Every dependency is built by main and passed in.
func New(d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.MaxBodyBytes <= 0 {
		d.MaxBodyBytes = 1 << 20
	}
	inv := invoke.Deps{Queue: d.Queue, Runs: d.Runs, Threads: d.Threads, Agents: d.Agents, Hub: d.Hub, SyncWait: d.SyncWait, Models: d.Models}
	if d.Guard != nil {
		inv.Guard = d.Guard
	}
	s := &Server{d: d, log: d.Log, inv: invoke.New(inv)}
	if d.Evaluation != nil { // agent evaluation suites run through the same invocation path
		s.d.Evaluation = d.Evaluation.WithAgents(s.inv)
	}
	fc := userfiles.Config{Threads: d.Threads, Blob: d.Blob, Parser: d.Parser}
	if d.Sandbox != nil {
		fc.Sandbox = d.Sandbox
		if d.Threads != nil { // projects own a folder on the provisioner's volume
			s.d.Threads = d.Threads.WithProjectFolders(sandbox.ProjectFolders{Client: d.Sandbox})
		}
	}
	s.files = userfiles.New(fc)
	if d.KBs != nil {
		s.kb = kb.NewLibrary(kb.LibraryDeps{Store: d.KBs, Objects: d.Blob, Outbox: d.Outbox, Keyword: d.Keyword,
			Vectors: d.Vectors, Retriever: d.Retriever, Types: docTypes{}, Buckets: d.Buckets, Log: d.Log})
		if d.Graph != nil {
			s.graph = &graph.Service{Engine: d.Graph, KBs: kbAccess{lib: s.kb, store: d.KBs}}
		}
		if d.GraphBuild != nil {
			b := *d.GraphBuild
			b.KBs = kbAccess{lib: s.kb, store: d.KBs}
			s.graphBuild = &b
		}
		if d.Tasks != nil {
			s.tasks = d.Tasks.With(d.KBs).WithOwners(taskOwners(s.d.Evaluation, s.graphBuild))
		}
		s.imports = &kbimport.Service{Uploads: s.kb, HTTP: d.Outbound}
		if d.Sandbox != nil {
			s.imports.Workspace = s.files
		}
	}
	return s
}

// taskOwners are the task centre's owners that are wired (a nil pointer
// must not become a non-nil interface).
func taskOwners(ev *evaluation.Service, gb *graph.Builder) (task.Evaluations, task.GraphBuilds) {
	var e task.Evaluations
	var g task.GraphBuilds
	if ev != nil {
		e = ev
	}
	if gb != nil {
		g = gb
	}
	return e, g
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	return nil
}

// kbAccess joins the library's read check and the store's list for graph.Service.
type kbAccess struct {
	lib   *kb.Library
	store *kb.Store
}

func (a kbAccess) KB(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error) {
	return a.lib.KB(ctx, sub, kbID)
}

func (a kbAccess) List(ctx context.Context, sub access.Subject) ([]kb.KB, error) {
	return a.store.List(ctx, sub)
}

func (a kbAccess) GetManaged(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error) {
	return a.store.GetManaged(ctx, sub, kbID)
}
