package bootstrap

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
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kbtool"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// Knowledge is the knowledge-base part of an App.
type Knowledge struct {
	Blob      blob.Store
	KBs       *kb.Store
	Keyword   *keyword.Index
	Vectors   vector.Store
	Models    *KBModels
	Retriever *kb.Retriever
	Parser    *docparse.Parser
	Buckets   *Buckets

	closeVectors func() // stops the vector store's background index builds
}

// openKnowledge builds the knowledge engines: the object store, the keyword
// index and the vector store (Postgres, searched in process), the embedding
// and rerank models, the document parser.
func (a *App) openKnowledge() error {
	cfg := a.Config
	uri := cfg.BlobURI
	if !strings.Contains(uri, "://") {
		uri = "file://" + absPath(uri)
	}
	store, err := blob.OpenWith(uri, blob.Credentials{AccessKey: cfg.BlobAccessKey, SecretKey: cfg.BlobSecretKey})
	if err != nil {
		return fmt.Errorf("YUXI_BLOB_URI: %w", err)
	}
	models := &KBModels{providers: a.Models, http: &http.Client{Timeout: 2 * time.Minute}}
	k := &Knowledge{Blob: store, Models: models, Buckets: &Buckets{cfg: cfg}}
	k.Keyword = keyword.New(a.Pool, keyword.NewAnalyzer("auto"), keyword.Params{})
	pgVectors := vector.NewPostgres(a.Pool, vector.PostgresOptions{})
	k.Vectors, k.closeVectors = pgVectors, pgVectors.Close
	k.KBs = kb.NewStore(a.Pool, cfg.DefaultEmbedding, models.Dims)
	k.Retriever = kb.NewRetriever(a.Pool, k.Vectors, k.Keyword, models)
	// Without an OCR engine, PDFs keep whatever text layer they have (a blank
	// page is not a scan) and fail only when no page has text; images fail.
	opts := docparse.Options{OCREngine: docparse.EngineDisable}
	if cfg.OCREngine != "" {
		ocr, err := docparse.NewOCR(cfg.OCREngine, cfg.OCRBaseURL, cfg.OCRToken, &http.Client{Timeout: 10 * time.Minute})
		if err != nil {
			return fmt.Errorf("YUXI_OCR_ENGINE: %w", err)
		}
		opts.OCR, opts.OCREngine = ocr, cfg.OCREngine
	}
	k.Parser = docparse.New(docparse.NewPDFTextLayer(), opts)
	a.Knowledge = k
	return nil
}

// KnowledgeTools returns the agent's knowledge-base tools.
func (a *App) KnowledgeTools() []tool.Tool {
	k := a.Knowledge
	return kbtool.Tools(kbtool.Deps{Pool: a.Pool, KBs: k.KBs, Retriever: k.Retriever, ReadMarkdown: func(ctx context.Context, key string) (string, error) {
		rc, _, err := k.Blob.Get(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			return "", failure.Unprocessable("not_parsed", "the parsed document is gone; parse the file again")
		}
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
		return string(b), err
	}})
}

// KBModels builds embedders and rerankers from model specs: the offline
// "builtin:hash-ngram-<dim>" embedder, or any OpenAI-compatible provider's
// /embeddings and /rerank ("provider_id:model_id").
type KBModels struct {
	providers *llm.Registry
	http      *http.Client
	mu        sync.Mutex
	embedders map[string]embed.Embedder
}

const builtinHashing = "builtin:hash-ngram-"

// Dims tells an embedding model's dimension: from the name for the builtin
// embedder, by embedding a probe text for a provider's model.
func (m *KBModels) Dims(spec string) (int, error) {
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
func (m *KBModels) Embedder(spec string, dim int) (embed.Embedder, error) {
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
func (m *KBModels) Reranker(spec string) (embed.Reranker, error) {
	p, model, err := m.provider(spec)
	if err != nil {
		return nil, err
	}
	return embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: p.BaseURL, APIKey: p.APIKey, Model: model, HTTP: m.http})
}

func (m *KBModels) provider(spec string) (llm.Provider, string, error) {
	id, model, err := llm.ParseSpec(spec)
	if err != nil {
		return llm.Provider{}, "", failure.Unprocessable("invalid_model_spec", "%v", err)
	}
	p, ok := m.providers.Provider(id)
	if !ok {
		return llm.Provider{}, "", failure.Unprocessable("model_not_available", "no provider %q is configured (model %s)", id, spec)
	}
	return p, model, nil
}

// Buckets opens buckets bound to knowledge bases for reading.
type Buckets struct{ cfg Config }

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

// FileSweeper recovers stalled ingestion, applies owed vector deletions and
// purges deleted KBs (the dispatcher's sweep).
func (a *App) FileSweeper() FileSweeper { return FileSweeper{a: a} }

// FileSweeper is the knowledge part of the dispatcher's sweep.
type FileSweeper struct{ a *App }

// Sweep implements dispatcher.Files.
func (f FileSweeper) Sweep(ctx context.Context) error {
	recs, err := f.a.Knowledge.KBs.RecoverStuckFiles(ctx, f.a.Outbox, kb.SweepConfig{ParseLease: f.a.Config.FileLease,
		IndexLease: f.a.Config.FileLease, Grace: f.a.Config.FileGrace})
	for _, r := range recs {
		f.a.Log.Info("sweep recovered file", "kb", r.KBID, "file", r.FileID, "status", r.Status, "action", r.Action)
	}
	if err != nil {
		return err
	}
	_, err = f.a.Knowledge.KBs.FlushVectorDeletes(ctx, f.a.Knowledge.Vectors, "")
	n, perr := f.a.Knowledge.KBs.PurgeDeleted(ctx, f.a.Knowledge.Vectors, f.a.Knowledge.Blob, "")
	if n > 0 {
		f.a.Log.Info("sweep purged deleted knowledge bases", "count", n)
	}
	return errors.Join(err, perr)
}
