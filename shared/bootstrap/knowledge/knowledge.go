// Package knowledge opens the knowledge-base engines on a bootstrap.Core: the
// object store, the keyword index, the vector store (Postgres, searched in
// process), the embedding and rerank models, the KB store and retriever, the
// buckets bound to knowledge bases, the agent's knowledge tools, the
// dispatcher's file sweep and the RAG evaluation use cases. It does not open the document parser (package
// parser): the functions that never parse must not link it.
//
// Imported by: the mains of intake, dispatcher, tool-invoke, doc-parse,
// kb-index and evaluate, infra/local, tests and benchmarks.
// May import: shared/bootstrap, shared/* (never shared/docparse) and the standard library.
package knowledge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/chatimage"
	"github.com/yuxi-serverless/yuxi/shared/dashboard"
	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/graph/neo4j"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kbassist"
	"github.com/yuxi-serverless/yuxi/shared/kbconnect"
	"github.com/yuxi-serverless/yuxi/shared/kbtool"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/langfuse"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/mindmap"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// Engines are the opened knowledge-base engines.
type Engines struct {
	Blob      blob.Store
	KBs       *kb.Store
	Keyword   *keyword.Index
	Vectors   vector.Store
	Models    *Models
	Retriever *kb.Retriever
	Buckets   *Buckets
	// Graph is the knowledge graph's engine: the embedded PostgreSQL one,
	// or Neo4j with YUXI_GRAPH_ENGINE=neo4j.
	Graph graph.Engine
	// Outputs saves into a run's sandbox outputs (download_kb_file); set it
	// before Tools when a provisioner is configured.
	Outputs kbtool.Outputs

	core          *bootstrap.Core
	tempSweptAt   atomic.Int64 // unix nanos of the last temp-object sweep (FileSweeper)
	uploadSweptAt atomic.Int64 // unix nanos of the last sweep of unregistered uploads and unsent chat images
}

// Open builds the engines on core's pool and model providers (embedding and
// rerank models). core.Close stops their background work.
func Open(core *bootstrap.Core) (*Engines, error) {
	cfg := core.Config
	uri := cfg.BlobURI
	if !strings.Contains(uri, "://") {
		uri = "file://" + absPath(uri)
	}
	store, err := blob.OpenWith(uri, blob.Credentials{AccessKey: cfg.BlobAccessKey, SecretKey: cfg.BlobSecretKey})
	if err != nil {
		return nil, fmt.Errorf("YUXI_BLOB_URI: %w", err)
	}
	m := &Models{providers: core.Models, http: &http.Client{Timeout: 2 * time.Minute}}
	e := &Engines{Blob: store, Models: m, Buckets: &Buckets{cfg: cfg}, core: core}
	e.Keyword = keyword.New(core.Pool, keyword.NewAnalyzer("auto"), keyword.Params{})
	pgVectors := vector.NewPostgres(core.Pool, vector.PostgresOptions{})
	e.Vectors = pgVectors
	core.OnClose(pgVectors.Close) // its background index builds
	e.KBs = kb.NewStore(core.Pool, cfg.DefaultEmbedding, m.Dims)
	e.KBs.UseSecrets(core.Secrets) // connector tokens
	if err := e.openGraph(); err != nil {
		return nil, err
	}
	e.KBs.OnFilesDeleted(e.Mindmaps()) // a deletion removes its leaves of the mind map in its transaction
	e.Retriever = kb.NewRetriever(core.Pool, e.Vectors, e.Keyword, m)
	gr := graph.NewRetrieval(e.Graph)
	gr.UseVectors(e.graphVectors())       // entities recalled by meaning as well as by name
	e.Retriever.UseGraph(gr)              // use_graph_retrieval
	connectors := cfg.Outbound().Client() // read-only connector KBs, SSRF-guarded
	connectors.Timeout = time.Minute
	e.Retriever.UseConnectors(&kbconnect.Client{HTTP: connectors}, core.Secrets)
	return e, nil
}

// openGraph opens the configured graph engine and makes deletions remove
// their graph: in their transaction with the embedded engine, before their
// commit with Neo4j (graph.ExternalCleaner).
func (e *Engines) openGraph() error {
	cfg := e.core.Config
	if cfg.GraphEngine != "neo4j" {
		pg := graph.NewPostgres(e.core.Pool)
		e.Graph = pg
		e.KBs.CleanGraphWith(pg)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := neo4j.Open(ctx, neo4j.Config{URI: cfg.Neo4jURI, Username: cfg.Neo4jUsername, Password: cfg.Neo4jPassword, Database: cfg.Neo4jDatabase})
	if err != nil {
		return fmt.Errorf("YUXI_GRAPH_ENGINE=neo4j: %w", err)
	}
	e.core.OnClose(func() { _ = n.Close(context.Background()) })
	e.Graph = n
	e.KBs.CleanGraphWith(graph.ExternalCleaner{Engine: n})
	return nil
}

// GraphBuilder returns the knowledge graph's builder (the kb-graph
// function's use case and the graph-build routes'); kbs checks access for
// the routes (nil in the function, which serves no route). crash is called
// at named crash points (tests).
func (e *Engines) GraphBuilder(kbs graph.ManageKBs, crash func(string)) *graph.Builder {
	b := graph.NewBuilder(e.core.Pool, e.Graph, e.KBs, e.core.Providers, e.core.Outbox, kbs)
	b.Extractor.Crash = crash
	b.Vectors = e.graphVectors() // unique entities and triples get vectors
	return b
}

// graphVectors is the graph's vector index (graph.VectorIndex) over the
// knowledge bases' vector store.
func (e *Engines) graphVectors() graph.VectorIndex {
	return graphVectors{store: e.Vectors, kbs: e.KBs, models: e.Models}
}

// Assist returns the sample-question and description helpers (the
// knowledge routes of shared/kbassist).
func (e *Engines) Assist() *kbassist.Service {
	return &kbassist.Service{Pool: e.core.Pool, KBs: e.KBs, Files: e.KBs, Models: e.core.Providers}
}

// Mindmaps returns the mind-map use cases (the mind-map routes and the
// agent's get_mindmap), generating with the managed model providers.
func (e *Engines) Mindmaps() *mindmap.Service {
	return &mindmap.Service{Pool: e.core.Pool, KBs: e.KBs, Files: e.KBs, Models: e.core.Providers}
}

// Tools returns the agent's knowledge-base tools.
func (e *Engines) Tools() []tool.Tool {
	return kbtool.Tools(kbtool.Deps{Pool: e.core.Pool, KBs: e.KBs, Retriever: e.Retriever, Mindmaps: e.Mindmaps(), ReadMarkdown: func(ctx context.Context, key string) (string, error) {
		rc, _, err := e.Blob.Get(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			return "", failure.Unprocessable("not_parsed", "the parsed document is gone; parse the file again")
		}
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
		return string(b), err
	}, Outputs: e.Outputs, ReadObject: func(ctx context.Context, key string, max int64) ([]byte, error) {
		rc, info, err := e.Blob.Get(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			return nil, failure.NotFound("file_not_found", "the stored original is gone")
		}
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		if info.Size > max {
			return nil, failure.Unprocessable("file_too_large", "the file is %d bytes; download_kb_file copies up to %d", info.Size, max)
		}
		return io.ReadAll(io.LimitReader(rc, max))
	}})
}

// Models builds embedders and rerankers from model specs: the offline
// "builtin:hash-ngram-<dim>" embedder, or any OpenAI-compatible provider's
// /embeddings and /rerank ("provider_id:model_id").
type Models struct {
	providers *llm.Registry
	http      *http.Client
	mu        sync.Mutex
	embedders map[string]embed.Embedder
}

const builtinHashing = "builtin:hash-ngram-"

// Dims tells an embedding model's dimension: from the name for the builtin
// embedder, by embedding a probe text for a provider's model.
func (m *Models) Dims(spec string) (int, error) {
	if d, ok := strings.CutPrefix(spec, builtinHashing); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 8 || n > 8192 {
			return 0, failure.Unprocessable("invalid_embedding_model", "builtin embedder dimension must be 8–8192, got %q", d)
		}
		return n, nil
	}
	em, err := m.Embedder(spec, 0)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := em.Embed(ctx, []string{"dimension probe"})
	if err != nil {
		return 0, failure.Unprocessable("embedding_model_unavailable", "cannot reach embedding model %s: %v", spec, err)
	}
	return len(vs[0]), nil
}

// Embedder returns the embedder of spec, expecting dim dimensions (0: learn).
func (m *Models) Embedder(spec string, dim int) (embed.Embedder, error) {
	key := fmt.Sprintf("%s#%d", spec, dim)
	m.mu.Lock()
	defer m.mu.Unlock()
	if em, ok := m.embedders[key]; ok {
		return em, nil
	}
	var em embed.Embedder
	if d, ok := strings.CutPrefix(spec, builtinHashing); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 8 || n > 8192 || (dim != 0 && dim != n) {
			return nil, failure.Unprocessable("invalid_embedding_model", "bad builtin embedder %q for %d dimensions", spec, dim)
		}
		em = embed.NewHashing(n)
	} else {
		p, model, err := m.provider(spec)
		if err != nil {
			return nil, err
		}
		oa, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: p.BaseURL, APIKey: p.APIKey, Model: model, Dim: dim, HTTP: m.http})
		if err != nil {
			return nil, err
		}
		em = oa
	}
	if m.embedders == nil {
		m.embedders = map[string]embed.Embedder{}
	}
	m.embedders[key] = em
	return em, nil
}

// Reranker returns the reranker of spec ("provider_id:model_id").
func (m *Models) Reranker(spec string) (embed.Reranker, error) {
	p, model, err := m.provider(spec)
	if err != nil {
		return nil, err
	}
	return embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: p.BaseURL, APIKey: p.APIKey, Model: model, HTTP: m.http})
}

func (m *Models) provider(spec string) (llm.Provider, string, error) {
	if !strings.ContainsAny(spec, ":/") {
		return llm.Provider{}, "", failure.Unprocessable("invalid_model_spec", "model spec %q must be provider_id:model_id", spec)
	}
	// provider_id:model_id, or the original's provider_id/model_id.
	id, model, err := m.providers.ParseSpec(spec)
	if err != nil {
		return llm.Provider{}, "", err
	}
	p, ok := m.providers.Provider(id)
	if !ok {
		return llm.Provider{}, "", failure.Unprocessable("model_not_available", "no provider %q is configured (model %s)", id, spec)
	}
	return p, model, nil
}

// Buckets opens buckets bound to knowledge bases for reading.
type Buckets struct{ cfg bootstrap.Config }

// Open returns a store over bucket (S3 API; GCS through its S3-interoperable
// endpoint, storage.googleapis.com unless YUXI_SOURCE_GCS_ENDPOINT says otherwise).
func (b *Buckets) Open(provider, bucket string) (blob.Store, error) {
	c := b.cfg
	switch provider {
	case "s3":
		return blob.NewS3(blob.S3Config{Endpoint: c.SourceS3Endpoint, Region: c.SourceS3Region, AccessKey: c.SourceS3AccessKey,
			SecretKey: c.SourceS3SecretKey, Bucket: bucket, UseSSL: c.SourceS3SSL})
	case "gcs":
		return blob.NewS3(blob.S3Config{Endpoint: c.SourceGCSEndpoint, AccessKey: c.SourceGCSAccessKey,
			SecretKey: c.SourceGCSSecretKey, Bucket: bucket, UseSSL: c.SourceGCSSSL})
	}
	return nil, fmt.Errorf("unknown bucket provider %q", provider)
}

func absPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	return filepath.Join(wd, p)
}

// Evaluation returns the RAG evaluation use cases over the engines, with
// YUXI_EVAL_BATCH_SIZE and YUXI_EVAL_CONCURRENCY (and YUXI_CRASH_AT's crash
// points).
func (e *Engines) Evaluation() *evaluation.Service {
	c := e.core.Config
	d := evaluation.Deps{Pool: e.core.Pool, Outbox: e.core.Outbox, KBs: e.KBs, Retriever: e.Retriever, Models: e.core.Providers,
		Config: evaluation.Config{BatchSize: c.EvalBatchSize, Concurrency: c.EvalConcurrency, Crash: c.Crasher()}, Log: e.core.Log, Outbound: c.Outbound()}
	if lf := langfuse.New(c.LangfuseBaseURL, c.LangfusePublicKey, c.LangfuseSecretKey); lf != nil {
		d.Langfuse = lf
	}
	return evaluation.New(d)
}

// FileSweeper is the knowledge part of the dispatcher's sweep: it recovers
// stalled ingestion, applies owed vector deletions, purges deleted KBs and
// removes uploads older than YUXI_UPLOAD_GRACE that were never registered
// in a KB or sent in a chat message; it also compacts the dashboard's
// rollup rows.
func (e *Engines) FileSweeper() FileSweeper { return FileSweeper{e: e} }

// FileSweeper implements dispatcher.Files.
type FileSweeper struct{ e *Engines }

// Sweep implements dispatcher.Files.
func (f FileSweeper) Sweep(ctx context.Context) error {
	c, e := f.e.core, f.e
	recs, err := e.KBs.RecoverStuckFiles(ctx, c.Outbox, kb.SweepConfig{ParseLease: c.Config.FileLease,
		IndexLease: c.Config.FileLease, Grace: c.Config.FileGrace})
	for _, r := range recs {
		c.Log.Info("sweep recovered file", "kb", r.KBID, "file", r.FileID, "status", r.Status, "action", r.Action)
	}
	if err != nil {
		return err
	}
	_, err = e.KBs.FlushVectorDeletes(ctx, e.Vectors, "")
	n, perr := e.KBs.PurgeDeleted(ctx, e.Vectors, e.Blob, "")
	if n > 0 {
		c.Log.Info("sweep purged deleted knowledge bases", "count", n)
	}
	return errors.Join(err, perr, f.removeTemp(ctx), f.removeUnused(ctx))
}

// removeUnused deletes KB uploads never registered (kb.Store.SweepUploads)
// and chat images never sent (chatimage.Store.Sweep) once they are older
// than YUXI_UPLOAD_GRACE, at most once per YUXI_FILE_GRACE since it lists
// the upload prefixes.
func (f FileSweeper) removeUnused(ctx context.Context) error {
	c, e := f.e.core, f.e
	now := time.Now()
	last := e.uploadSweptAt.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < c.Config.FileGrace {
		return nil
	}
	if !e.uploadSweptAt.CompareAndSwap(last, now.UnixNano()) {
		return nil
	}
	n, err := e.KBs.SweepUploads(ctx, e.Blob, c.Config.UploadGrace, now)
	if n > 0 {
		c.Log.Info("sweep removed uploads never added to a knowledge base", "count", n)
	}
	m, ierr := chatimage.New(c.Pool, e.Blob).Sweep(ctx, c.Config.UploadGrace, now)
	if m > 0 {
		c.Log.Info("sweep removed chat images never sent", "count", m)
	}
	_, cerr := dashboard.New(c.Pool).Compact(ctx) // the backends' dashboard rollup rows into one
	return errors.Join(err, ierr, cerr)
}

// tempRemover is an object store that can leave temp objects behind when its
// process dies mid-write (blob.Local). The S3 store cannot: an object appears
// only when its upload completes.
type tempRemover interface {
	RemoveTemp(ctx context.Context, olderThan time.Duration) (int, error)
}

// removeTemp deletes temp objects older than YUXI_FILE_LEASE (a write that
// old belongs to a dead process: a live one keeps touching its file), at
// most once per YUXI_FILE_GRACE since it walks the whole store.
func (f FileSweeper) removeTemp(ctx context.Context) error {
	c := f.e.core
	tr, ok := f.e.Blob.(tempRemover)
	if !ok {
		return nil
	}
	now := time.Now()
	last := f.e.tempSweptAt.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < c.Config.FileGrace {
		return nil
	}
	if !f.e.tempSweptAt.CompareAndSwap(last, now.UnixNano()) {
		return nil // another sweep of this process is at it
	}
	n, err := tr.RemoveTemp(ctx, c.Config.FileLease)
	if n > 0 {
		c.Log.Info("sweep removed temp objects left by a dead process", "count", n)
	}
	return err
}
