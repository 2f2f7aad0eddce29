package graph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// ExtractorConfig is a knowledge base's graph extractor
// (graph_extractor_configs, migration 0062, owned here).
type ExtractorConfig struct {
	LLMModelSpec  string    `json:"llm_model_spec"`
	EntityTypes   []string  `json:"entity_types"`
	RelationTypes []string  `json:"relation_types"`
	Concurrency   int       `json:"concurrency"`
	Version       int64     `json:"version"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func (c ExtractorConfig) schema() Schema {
	return Schema{EntityTypes: c.EntityTypes, RelationTypes: c.RelationTypes, Version: c.Version}
}

// sameRules: two configurations extract the same graph (concurrency aside).
func (c ExtractorConfig) sameRules(o ExtractorConfig) bool {
	return c.LLMModelSpec == o.LLMModelSpec && slices.Equal(c.EntityTypes, o.EntityTypes) && slices.Equal(c.RelationTypes, o.RelationTypes)
}

// Files is what graph building needs of the knowledge-base store (kb.Store).
type Files interface {
	LoadFile(ctx context.Context, fileID string) (kb.File, error)
	FileChunks(ctx context.Context, fileID string) ([]kb.ChunkView, error)
	IndexedFileIDs(ctx context.Context, kbID string) ([]string, error)
	ChunkCount(ctx context.Context, kbID string) (int64, error)
}

// ChatModels resolves a model spec (llm.Registry).
type ChatModels interface {
	ChatModel(spec string) (llm.ChatModel, string, error)
}

// Outbox writes events in a transaction (outbox.Outbox).
type Outbox interface {
	Tx(ctx context.Context, pool interface {
		Begin(context.Context) (pgx.Tx, error)
	}, fn func(tx pgx.Tx, emit outbox.Emit) error) error
}

// Builder builds knowledge bases' graphs from their indexed files (the
// kb-graph function's use case) and is the use cases of the graph-build
// routes.
type Builder struct {
	Pool      *pgxpool.Pool
	Engine    Engine
	Extractor *Extractor
	Files     Files
	Models    ChatModels
	Outbox    Outbox
	KBs       ManageKBs
	// Vectors embeds the entities and triples a build writes (vectors.go;
	// nil: no graph vectors, recall by name only).
	Vectors VectorIndex
}

// ManageKBs is KBs plus the manage check of the graph-build routes that
// change a graph (kb.Store.GetManaged: 403 when the subject only reads).
type ManageKBs interface {
	KBs
	GetManaged(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
}

// NewBuilder returns a builder over the embedded engine's tables in pool.
func NewBuilder(pool *pgxpool.Pool, engine Engine, files Files, models ChatModels, ob Outbox, kbs ManageKBs) *Builder {
	return &Builder{Pool: pool, Engine: engine, Extractor: NewExtractor(pool, engine), Files: files, Models: models, Outbox: ob, KBs: kbs}
}

// Config returns a knowledge base's extractor (ok false: none configured).
func (b *Builder) Config(ctx context.Context, kbID string) (ExtractorConfig, bool, error) {
	var c ExtractorConfig
	err := b.Pool.QueryRow(ctx, `SELECT llm_model_spec, entity_types, relation_types, concurrency, version, updated_at
		FROM graph_extractor_configs WHERE kb_id = $1`, kbID).Scan(&c.LLMModelSpec, &c.EntityTypes, &c.RelationTypes, &c.Concurrency, &c.Version, &c.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, err
}

// BuildFile brings the graph of one file up to date with its committed
// chunks (on io.yuxi.document.indexed.v1). Nothing happens when the
// knowledge base has no extractor or the file is not indexed (a later
// indexed event follows); a file that is gone loses its graph. Chunks are
// extracted as Extractor.ExtractFile does: only those not yet done, at the
// configured concurrency, each retried; an error means the delivery should
// be retried (done chunks are kept).
func (b *Builder) BuildFile(ctx context.Context, kbID, fileID string) (ExtractResult, error) {
	var res ExtractResult
	cfg, ok, err := b.Config(ctx, kbID)
	if err != nil || !ok {
		return res, err
	}
	f, err := b.Files.LoadFile(ctx, fileID)
	if errors.Is(err, kb.ErrFileNotFound) || (err == nil && f.KBID != kbID) {
		return res, b.Engine.DeleteFile(ctx, kbID, fileID)
	}
	if err != nil {
		return res, err
	}
	if f.Status != kb.StatusIndexed {
		return res, nil
	}
	views, err := b.Files.FileChunks(ctx, fileID)
	if err != nil {
		return res, err
	}
	chunks := make([]ChunkText, len(views))
	for i, v := range views {
		chunks[i] = ChunkText{ID: v.ChunkID, Content: v.Content}
	}
	model, modelID, err := b.Models.ChatModel(cfg.LLMModelSpec)
	if err != nil {
		return res, failure.Unprocessable("graph_model_unavailable", "graph extractor model %s: %v", cfg.LLMModelSpec, err)
	}
	res, err = b.Extractor.ExtractFile(ctx, kbID, fileID, chunks, cfg.schema(), model, modelID, cfg.Concurrency)
	if err != nil {
		return res, err
	}
	// The file may have been deleted while its chunks were extracted: its
	// deletion removed the graph it had then, not what was written since.
	if _, err := b.Files.LoadFile(ctx, fileID); errors.Is(err, kb.ErrFileNotFound) {
		return res, b.Engine.DeleteFile(ctx, kbID, fileID)
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	if err := b.indexChunks(ctx, kbID, ids); err != nil {
		return res, err
	}
	// The build changed the graph: settle it (statistics, visibility map)
	// before it is queried. On failure the delivery is retried; the retry
	// finds every chunk done and writes nothing.
	if res.Extracted+res.Removed > 0 {
		return res, Settle(ctx, b.Engine)
	}
	return res, nil
}

// ConfigInput is the body of POST …/graph-build/config.
type ConfigInput struct {
	LLMModelSpec  string   `json:"llm_model_spec"`
	EntityTypes   []string `json:"entity_types"`
	RelationTypes []string `json:"relation_types"`
	Concurrency   int      `json:"concurrency"`
	// Build: start building the graph of the indexed files now (default true).
	Build *bool `json:"build"`
}

// ConfigResult answers a configuration change.
type ConfigResult struct {
	Config ExtractorConfig `json:"config"`
	// Reset: the change of model or schema reset the graph built so far.
	Reset   bool   `json:"reset"`
	Warning string `json:"warning,omitempty"`
	// Queued: indexed files whose extraction was started.
	Queued int `json:"queued"`
}

func cleanTypes(in []string) ([]string, error) {
	out := []string{}
	for _, t := range in {
		t = strings.TrimSpace(t)
		if t == "" || slices.Contains(out, t) {
			continue
		}
		if len(t) > 64 {
			return nil, failure.Invalid("invalid_schema", "type %.20q… is longer than 64 characters", t)
		}
		out = append(out, t)
	}
	if len(out) > 100 {
		return nil, failure.Invalid("invalid_schema", "at most 100 types")
	}
	return out, nil
}

func (b *Builder) capable(ctx context.Context, sub access.Subject, kbID string) error {
	return (&Service{Engine: b.Engine, KBs: b.KBs}).readable(ctx, sub, kbID)
}

// manageable: the subject may manage the knowledge base, which has a graph.
func (b *Builder) manageable(ctx context.Context, sub access.Subject, kbID string) error {
	if strings.TrimSpace(kbID) == "" {
		return failure.Invalid("kb_id_required", "kb_id is required")
	}
	k, err := b.KBs.GetManaged(ctx, sub, kbID)
	if err != nil {
		return err
	}
	if !graphCapable(k) {
		return failure.NotFound("graph_unsupported", "knowledge base %s (%s) has no graph", kbID, k.KBType)
	}
	return nil
}

// Configure sets a knowledge base's extractor (manage access). Changing the model or the entity/relation types warns and resets
// the graph (entities extracted under other rules would mix with the new
// ones); changing only the concurrency keeps it. Unless in.Build is false,
// the indexed files are then queued for extraction.
func (b *Builder) Configure(ctx context.Context, sub access.Subject, kbID string, in ConfigInput) (ConfigResult, error) {
	var res ConfigResult
	if err := b.manageable(ctx, sub, kbID); err != nil {
		return res, err
	}
	spec := strings.TrimSpace(in.LLMModelSpec)
	if spec == "" {
		return res, failure.Invalid("llm_model_spec_required", "llm_model_spec is required")
	}
	if _, _, err := b.Models.ChatModel(spec); err != nil {
		return res, failure.Invalid("invalid_llm_model_spec", "unknown model %q: %v", spec, err)
	}
	if in.Concurrency == 0 {
		in.Concurrency = 4
	}
	if in.Concurrency < 1 || in.Concurrency > 32 {
		return res, failure.Invalid("invalid_concurrency", "concurrency must be between 1 and 32")
	}
	ents, err := cleanTypes(in.EntityTypes)
	if err != nil {
		return res, err
	}
	rels, err := cleanTypes(in.RelationTypes)
	if err != nil {
		return res, err
	}
	next := ExtractorConfig{LLMModelSpec: spec, EntityTypes: ents, RelationTypes: rels, Concurrency: in.Concurrency}
	err = pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
		var cur ExtractorConfig
		err := tx.QueryRow(ctx, `SELECT llm_model_spec, entity_types, relation_types, version FROM graph_extractor_configs
			WHERE kb_id = $1 FOR UPDATE`, kbID).Scan(&cur.LLMModelSpec, &cur.EntityTypes, &cur.RelationTypes, &cur.Version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case !cur.sameRules(next):
			res.Reset = true
			res.Warning = "the extractor's model or schema changed: the knowledge graph built so far was reset and is rebuilt from the indexed files"
		}
		return tx.QueryRow(ctx, `INSERT INTO graph_extractor_configs (kb_id, llm_model_spec, entity_types, relation_types, concurrency)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (kb_id) DO UPDATE SET llm_model_spec = EXCLUDED.llm_model_spec, entity_types = EXCLUDED.entity_types,
				relation_types = EXCLUDED.relation_types, concurrency = EXCLUDED.concurrency,
				version = graph_extractor_configs.version + CASE WHEN $6 THEN 1 ELSE 0 END, updated_at = now()
			RETURNING version, updated_at`, kbID, spec, ents, rels, in.Concurrency, res.Reset).Scan(&next.Version, &next.UpdatedAt)
	})
	if err != nil {
		return res, err
	}
	res.Config = next
	if res.Reset {
		if err := b.reset(ctx, kbID); err != nil {
			return res, err
		}
		res.Config.Version++ // reset bumped it again
	}
	if in.Build == nil || *in.Build {
		if res.Queued, err = b.queue(ctx, kbID); err != nil {
			return res, err
		}
	}
	return res, nil
}

// GetConfig returns a knowledge base's extractor (null when none).
func (b *Builder) GetConfig(ctx context.Context, sub access.Subject, kbID string) (*ExtractorConfig, error) {
	if err := b.capable(ctx, sub, kbID); err != nil {
		return nil, err
	}
	c, ok, err := b.Config(ctx, kbID)
	if err != nil || !ok {
		return nil, err
	}
	return &c, nil
}

// reset empties the graph and the extraction progress. It bumps the
// configuration's version first, under the graph lock an extraction's
// commit takes: an extraction still running under the old version can no
// longer mark chunks done and removes what it wrote (Extractor.commit).
func (b *Builder) reset(ctx context.Context, kbID string) error {
	err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
		if err := lockKB(ctx, tx, kbID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE graph_extractor_configs SET version = version + 1, updated_at = now() WHERE kb_id = $1`, kbID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM graph_chunk_extractions WHERE kb_id = $1`, kbID)
		return err
	})
	if err != nil {
		return err
	}
	return b.Engine.DeleteKB(ctx, kbID)
}

// queue emits io.yuxi.document.indexed.v1 for every indexed file of the
// knowledge base, in one transaction (kb-graph extracts what is not done).
func (b *Builder) queue(ctx context.Context, kbID string) (int, error) {
	ids, err := b.Files.IndexedFileIDs(ctx, kbID)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return b.queueFiles(ctx, kbID, ids)
}

// queueFiles emits io.yuxi.document.indexed.v1 for each of ids, in one
// transaction.
func (b *Builder) queueFiles(ctx context.Context, kbID string, ids []string) (int, error) {
	stamp := time.Now().UnixNano()
	err := b.Outbox.Tx(ctx, b.Pool, func(_ pgx.Tx, emit outbox.Emit) error {
		for _, id := range ids {
			if err := emit(outbox.Pending{Payload: events.DocumentIndexed{KBID: kbID, FileID: id},
				DedupeKey: fmt.Sprintf("graph-build:%s:%d", id, stamp)}); err != nil {
				return err
			}
		}
		return nil
	})
	return len(ids), err
}

// Index (POST …/graph-build/index) queues the extraction of every indexed
// file; chunks already extracted are skipped by kb-graph.
func (b *Builder) Index(ctx context.Context, sub access.Subject, kbID string) (int, error) {
	if err := b.manageable(ctx, sub, kbID); err != nil {
		return 0, err
	}
	if _, ok, err := b.Config(ctx, kbID); err != nil {
		return 0, err
	} else if !ok {
		return 0, failure.Conflict("graph_not_configured", "configure the graph extractor first (POST …/graph-build/config)")
	}
	return b.queue(ctx, kbID)
}

// Reset (POST …/graph-build/reset) removes the knowledge base's graph and
// extraction progress; the extractor configuration stays.
func (b *Builder) Reset(ctx context.Context, sub access.Subject, kbID string) error {
	if err := b.manageable(ctx, sub, kbID); err != nil {
		return err
	}
	return b.reset(ctx, kbID)
}

// BuildStatus is the answer of GET …/graph-build/status.
type BuildStatus struct {
	Configured   bool             `json:"configured"`
	Config       *ExtractorConfig `json:"config"`
	Status       string           `json:"status"` // not_configured | empty | building | done | partial
	TotalChunks  int64            `json:"total_chunks"`
	DoneChunks   int64            `json:"done_chunks"`
	FailedChunks int64            `json:"failed_chunks"`
	Graph        Stats            `json:"graph"`
}

// Status reports how far a knowledge base's graph is built: its committed
// chunks against the chunks extracted (done or failed).
func (b *Builder) Status(ctx context.Context, sub access.Subject, kbID string) (BuildStatus, error) {
	var st BuildStatus
	if err := b.capable(ctx, sub, kbID); err != nil {
		return st, err
	}
	c, ok, err := b.Config(ctx, kbID)
	if err != nil {
		return st, err
	}
	if ok {
		st.Configured, st.Config = true, &c
	}
	if st.TotalChunks, err = b.Files.ChunkCount(ctx, kbID); err != nil {
		return st, err
	}
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed')
		FROM graph_chunk_extractions WHERE kb_id = $1`, kbID).Scan(&st.DoneChunks, &st.FailedChunks); err != nil {
		return st, err
	}
	if st.Graph, err = b.Engine.Stats(ctx, kbID); err != nil {
		return st, err
	}
	st.Status = buildState(ok, st.TotalChunks, st.DoneChunks, st.FailedChunks)
	return st, nil
}

// FailedChunk is one sample of GET …/graph-build/failed-chunks.
type FailedChunk struct {
	ChunkID   string    `json:"chunk_id"`
	FileID    string    `json:"file_id"`
	Attempts  int       `json:"attempts"`
	Error     string    `json:"error"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FailedChunks lists up to limit chunks whose extraction failed, latest first.
func (b *Builder) FailedChunks(ctx context.Context, sub access.Subject, kbID string, limit int) ([]FailedChunk, error) {
	if err := b.capable(ctx, sub, kbID); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	rows, err := b.Pool.Query(ctx, `SELECT chunk_id, file_id, attempts, error, updated_at FROM graph_chunk_extractions
		WHERE kb_id = $1 AND status = 'failed' ORDER BY updated_at DESC, chunk_id LIMIT $2`, kbID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (FailedChunk, error) {
		var f FailedChunk
		err := r.Scan(&f.ChunkID, &f.FileID, &f.Attempts, &f.Error, &f.UpdatedAt)
		return f, err
	})
}
