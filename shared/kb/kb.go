// Package kb is the knowledge-base domain: document knowledge bases with
// their share_config permissions and retrieval parameters, files with the
// ingestion status machine (uploaded → parsing → parsed | error_parsing →
// indexing → indexed | error_indexing), bucket bindings, content-addressed
// chunks, and retrieval (vector, keyword, hybrid, rerank) over them.
//
// Every read and write re-checks the caller's access at the point of effect:
// a KB the caller cannot read is indistinguishable from a missing one.
//
// The use cases an API serves are Library's methods; the object-store layout
// of a KB (every key) and its image URL are defined once, in keys.go.
//
// Imported by: functions/intake (routes), functions/doc-parse,
// functions/kb-index, shared/kbtool, shared/bootstrap/knowledge, tests.
// May import: events, shared/access, shared/blob, shared/blob/notify,
// shared/failure, shared/outbox, shared/postgres, shared/chunk,
// shared/keyword, shared/vector, shared/embed, shared/telemetry,
// shared/kbconnect, shared/secret, pgx.
package kb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kbconnect"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// TypeDocument is the document KB type. The original names it "milvus"
// (after its engine); the name is kept for compatibility.
const TypeDocument = "milvus"

// Errors.
var (
	ErrNotFound     = failure.NotFound("kb_not_found", "knowledge base not found")
	ErrManage       = failure.Forbidden("kb_manage_forbidden", "you may read this knowledge base but not change it")
	ErrFileNotFound = failure.NotFound("file_not_found", "file not found in this knowledge base")
)

// KB is a knowledge base.
type KB struct {
	KBID               string          `json:"kb_id"`
	DBID               string          `json:"db_id"` // the original's name for kb_id
	Name               string          `json:"name"`
	Description        string          `json:"description"`
	KBType             string          `json:"kb_type"`
	EmbeddingModelSpec string          `json:"embedding_model_spec"`
	EmbeddingDim       int             `json:"embedding_dim"`
	LLMModelSpec       *string         `json:"llm_model_spec"`
	QueryParams        json.RawMessage `json:"query_params"`
	AdditionalParams   json.RawMessage `json:"additional_params"`
	ShareConfig        json.RawMessage `json:"share_config"`
	CreatedBy          string          `json:"created_by"`
	IndexVersion       int64           `json:"-"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
	FileCount          int             `json:"file_count"`
	SupportsDocuments  bool            `json:"supports_documents"`
	// Permission is the caller's access: "read" or "manage".
	Permission string `json:"permission"`
}

const kbCols = kbSettingsCols + `(SELECT count(*) FROM knowledge_files f WHERE f.kb_id = knowledge_bases.kb_id AND NOT f.is_folder)`

// kbSettingsCols are kbCols but the file count (their last column, to append).
const kbSettingsCols = `kb_id, name, description, kb_type, embedding_model_spec, embedding_dim, llm_model_spec, query_params,
	additional_params, share_config, created_by, index_version, created_at, updated_at, `

func scanKB(row pgx.Row) (KB, error) {
	var k KB
	var share []byte
	err := row.Scan(&k.KBID, &k.Name, &k.Description, &k.KBType, &k.EmbeddingModelSpec, &k.EmbeddingDim, &k.LLMModelSpec,
		&k.QueryParams, &k.AdditionalParams, &share, &k.CreatedBy, &k.IndexVersion, &k.CreatedAt, &k.UpdatedAt, &k.FileCount)
	k.ShareConfig = json.RawMessage("null")
	if share != nil {
		k.ShareConfig = share
	}
	k.DBID, k.SupportsDocuments = k.KBID, k.KBType == TypeDocument
	redactConnector(&k)
	return k, err
}

// Level resolves sub's access to k: superadmins and creators manage; others
// get what share_config grants, capped by role (plain users at most read).
func Level(sub access.Subject, k KB) access.Level {
	share, err := access.Parse(k.ShareConfig)
	if err != nil {
		share = &access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "user"}}
	}
	ceiling := access.Read
	if sub.Role == "admin" || sub.Role == "superadmin" {
		ceiling = access.Manage
	}
	if share == nil {
		// Without a share_config a KB is private to its creator (and superadmins).
		share = &access.ShareConfig{Version: 2, ReadScope: access.Scope{AccessLevel: "user"}}
	}
	return access.Resolve(sub, k.CreatedBy, share, ceiling)
}

// Store reads and writes knowledge bases, their files, chunks and owed
// cleanups. It has one API shape (River's InsertTx idea): a method X runs on
// the store's own pool — in its own transaction when it writes more than one
// row — and XTx does the same work in the caller's transaction, to compose
// with other writes. A write that emits events, or that a use case wraps
// with access checks and cleanup after commit, exists only as XTx; its X is
// Library's (Register, FinishParse, Restage, RemoveFiles, MoveFile,
// EditMarkdown, DeleteKB, ApplyBucketChange …), which runs it in its own
// (outbox) transaction. The pool is not handed out.
type Store struct {
	pool *pgxpool.Pool
	// DefaultEmbedding is the embedding model of new KBs that name none.
	defaultEmbedding string
	dims             func(spec string) (int, error)
	graph            GraphCleaner
	onDelete         []FileDeletionHook
	secrets          Sealer // seals connector tokens (UseSecrets)
}

// FileDeletionHook updates what another package keeps about files (the
// mind map's leaves, shared/mindmap) in the transaction that deletes them.
type FileDeletionHook interface {
	FilesDeletedTx(ctx context.Context, tx pgx.Tx, kbID string, fileIDs []string) error
}

// OnFilesDeleted adds h to the hooks every file deletion runs in its
// transaction (set at start-up, before the store is used).
func (s *Store) OnFilesDeleted(h FileDeletionHook) { s.onDelete = append(s.onDelete, h) }

// GraphCleaner removes what the knowledge graph holds of deleted files and
// knowledge bases, in the deleting transaction (shared/graph's Postgres
// engine), so that a deletion and its graph's go together. RemoveFilesTx
// returns the ids, in GraphCollection(kbID), of the vectors of the entities
// and triples it removed (nothing mentions them any more): the deletion's
// cleanup deletes them after commit.
type GraphCleaner interface {
	RemoveFilesTx(ctx context.Context, tx pgx.Tx, kbID string, fileIDs []string) (vectorIDs []string, err error)
	RemoveKBTx(ctx context.Context, tx pgx.Tx, kbID string) error
}

// CleanGraphWith makes deletions remove the files' and knowledge bases'
// graph through c in their transaction (without it the graph is left alone).
func (s *Store) CleanGraphWith(c GraphCleaner) { s.graph = c }

// NewStore returns a store. defaultEmbedding is the embedding model spec of
// KBs created without one; dims tells an embedding model's dimension.
func NewStore(pool *pgxpool.Pool, defaultEmbedding string, dims func(spec string) (int, error)) *Store {
	return &Store{pool: pool, defaultEmbedding: defaultEmbedding, dims: dims}
}

// Get returns KB kbID if sub may read it (ErrNotFound otherwise), with sub's permission.
func (s *Store) Get(ctx context.Context, sub access.Subject, kbID string) (KB, error) {
	return s.get(ctx, s.pool, sub, kbID)
}

func (s *Store) get(ctx context.Context, db postgres.DB, sub access.Subject, kbID string) (KB, error) {
	k, err := scanKB(db.QueryRow(ctx, `SELECT `+kbCols+` FROM knowledge_bases WHERE kb_id = $1`, kbID))
	if errors.Is(err, pgx.ErrNoRows) {
		return KB{}, ErrNotFound
	}
	if err != nil {
		return KB{}, fmt.Errorf("load knowledge base %s: %w", kbID, err)
	}
	l := Level(sub, k)
	if l == access.None {
		return KB{}, ErrNotFound
	}
	k.Permission = l.String()
	return k, nil
}

// GetManaged is Get for an action that needs manage access (403 when sub may only read).
func (s *Store) GetManaged(ctx context.Context, sub access.Subject, kbID string) (KB, error) {
	return s.getManaged(ctx, s.pool, sub, kbID)
}

// GetManagedTx is GetManaged in tx.
func (s *Store) GetManagedTx(ctx context.Context, tx pgx.Tx, sub access.Subject, kbID string) (KB, error) {
	return s.getManaged(ctx, tx, sub, kbID)
}

func (s *Store) getManaged(ctx context.Context, db postgres.DB, sub access.Subject, kbID string) (KB, error) {
	k, err := s.get(ctx, db, sub, kbID)
	if err != nil {
		return KB{}, err
	}
	if k.Permission != access.Manage.String() {
		return KB{}, ErrManage
	}
	return k, nil
}

// Load reads a KB without an access check (for functions acting on events
// that were authorised when they were produced).
func (s *Store) Load(ctx context.Context, kbID string) (KB, error) {
	return s.load(ctx, s.pool, kbID)
}

// LoadSettings is Load without the file count (FileCount is 0): a KB's
// settings (retrieval options, models) read in a time that does not grow
// with its files, for what acts on them (an evaluation run or tick) rather
// than answering with the KB. Counting a 5k-file KB's files was most of a
// scheduler tick.
func (s *Store) LoadSettings(ctx context.Context, kbID string) (KB, error) {
	k, err := scanKB(s.pool.QueryRow(ctx, `SELECT `+kbSettingsCols+`0 FROM knowledge_bases WHERE kb_id = $1`, kbID))
	if errors.Is(err, pgx.ErrNoRows) {
		return KB{}, ErrNotFound
	}
	return k, err
}

// LoadTx is Load in tx.
func (s *Store) LoadTx(ctx context.Context, tx pgx.Tx, kbID string) (KB, error) {
	return s.load(ctx, tx, kbID)
}

func (s *Store) load(ctx context.Context, db postgres.DB, kbID string) (KB, error) {
	k, err := scanKB(db.QueryRow(ctx, `SELECT `+kbCols+` FROM knowledge_bases WHERE kb_id = $1`, kbID))
	if errors.Is(err, pgx.ErrNoRows) {
		return KB{}, ErrNotFound
	}
	return k, err
}

// List returns the KBs sub may read, newest first.
func (s *Store) List(ctx context.Context, sub access.Subject) ([]KB, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+kbCols+` FROM knowledge_bases ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []KB{}
	for rows.Next() {
		k, err := scanKB(rows)
		if err != nil {
			return nil, err
		}
		if l := Level(sub, k); l != access.None {
			k.Permission = l.String()
			out = append(out, k)
		}
	}
	return out, rows.Err()
}

// CreateInput is POST /api/knowledge/databases.
type CreateInput struct {
	Name               string          `json:"name"`
	DatabaseName       string          `json:"database_name"` // the original's field name
	Description        string          `json:"description"`
	KBType             string          `json:"kb_type"`
	EmbeddingModelSpec string          `json:"embedding_model_spec"`
	EmbedModelName     string          `json:"embed_model_name"` // the original's older field name
	EmbeddingDim       int             `json:"embedding_dim"`
	LLMModelSpec       *string         `json:"llm_model_spec"`
	AdditionalParams   json.RawMessage `json:"additional_params"`
	QueryParams        json.RawMessage `json:"query_params"`
	ShareConfig        json.RawMessage `json:"share_config"`
}

func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Create makes a document KB (or, for a connector kb_type, a read-only
// connector KB) owned by sub (admins only; checked by the caller's route).
func (s *Store) Create(ctx context.Context, sub access.Subject, in CreateInput) (KB, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = strings.TrimSpace(in.DatabaseName)
	}
	if name == "" || len(name) > 200 {
		return KB{}, failure.Unprocessable("invalid_kb", "name must be 1 to 200 characters")
	}
	switch {
	case in.KBType == "" || in.KBType == TypeDocument || in.KBType == "document":
	case kbconnect.Supported(in.KBType):
		return s.createConnector(ctx, sub, name, in)
	default:
		return KB{}, failure.Unprocessable("unsupported_kb_type", "kb_type %q is not supported; use %q (document knowledge base) or %q (read-only connector)",
			in.KBType, TypeDocument, kbconnect.Dify)
	}
	spec := in.EmbeddingModelSpec
	if spec == "" {
		spec = in.EmbedModelName
	}
	if spec == "" {
		spec = s.defaultEmbedding
	}
	dim := in.EmbeddingDim
	if dim == 0 && s.dims != nil {
		d, err := s.dims(spec)
		if err != nil {
			return KB{}, err
		}
		dim = d
	}
	if dim <= 0 || dim > 8192 {
		return KB{}, failure.Unprocessable("invalid_embedding_dim", "embedding_dim must be between 1 and 8192 (got %d for %s)", dim, spec)
	}
	add, err := normalizeAdditional(in.AdditionalParams)
	if err != nil {
		return KB{}, err
	}
	qp, err := normalizeQueryParams(in.QueryParams, spec)
	if err != nil {
		return KB{}, err
	}
	share, err := shareValue(in.ShareConfig)
	if err != nil {
		return KB{}, err
	}
	id := newID("kb_")
	k, err := scanKB(s.pool.QueryRow(ctx, `INSERT INTO knowledge_bases (kb_id, name, description, kb_type, embedding_model_spec,
		embedding_dim, llm_model_spec, query_params, additional_params, share_config, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING `+kbCols,
		id, name, in.Description, TypeDocument, spec, dim, in.LLMModelSpec, qp, add, share, sub.UID))
	return created(k, err, name)
}

// shareValue validates a create request's share_config (nil: private to its creator).
func shareValue(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if _, err := access.Parse(raw); err != nil {
		return nil, err
	}
	return []byte(raw), nil
}

// created answers the INSERT of a new KB named name, which sub manages.
func created(k KB, err error, name string) (KB, error) {
	if postgres.IsUniqueViolation(err, "knowledge_bases_name_key") {
		return KB{}, failure.Conflict("kb_name_taken", "a knowledge base named %q already exists", name)
	}
	if err != nil {
		return KB{}, fmt.Errorf("create knowledge base: %w", err)
	}
	k.Permission = access.Manage.String()
	return k, nil
}

// UpdateInput is PUT /api/knowledge/databases/{kb_id}. Nil fields are unchanged.
type UpdateInput struct {
	Name             *string          `json:"name"`
	Description      *string          `json:"description"`
	LLMModelSpec     *string          `json:"llm_model_spec"`
	AdditionalParams *json.RawMessage `json:"additional_params"`
	ShareConfig      *json.RawMessage `json:"share_config"`
}

// UnmarshalJSON tells "share_config": null — make the KB private to its
// creator again, revoking every share — from an absent share_config, which
// leaves it unchanged. encoding/json sets a pointer field to nil for both,
// which would silently ignore a revocation.
func (u *UpdateInput) UnmarshalJSON(b []byte) error {
	type plain UpdateInput
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err == nil {
		if v, ok := keys["share_config"]; ok && strings.TrimSpace(string(v)) == "null" {
			null := json.RawMessage("null")
			p.ShareConfig = &null
		}
	}
	*u = UpdateInput(p)
	return nil
}

// Update changes a KB sub may manage. additional_params are merged key by
// key into the stored ones (the chunk preset is kept unless replaced).
func (s *Store) Update(ctx context.Context, sub access.Subject, kbID string, in UpdateInput) (KB, error) {
	var out KB
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		k, err := s.GetManagedTx(ctx, tx, sub, kbID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM knowledge_bases WHERE kb_id = $1 FOR UPDATE`, kbID); err != nil {
			return err
		}
		name, desc := k.Name, k.Description
		if in.Name != nil {
			name = strings.TrimSpace(*in.Name)
			if name == "" || len(name) > 200 {
				return failure.Unprocessable("invalid_kb", "name must be 1 to 200 characters")
			}
		}
		if in.Description != nil {
			desc = *in.Description
		}
		add := k.AdditionalParams
		var sealed *string // a new connector token
		if in.AdditionalParams != nil && k.KBType != TypeDocument {
			if add, sealed, err = s.connectorPatch(k, *in.AdditionalParams); err != nil {
				return err
			}
		} else if in.AdditionalParams != nil {
			patch, err := normalizeAdditional(*in.AdditionalParams)
			if err != nil {
				return err
			}
			add = mergeObjects(k.AdditionalParams, patch)
		}
		var share any = []byte(k.ShareConfig)
		if string(k.ShareConfig) == "null" {
			share = nil
		}
		if in.ShareConfig != nil {
			share = nil
			if string(*in.ShareConfig) != "null" {
				if _, err := access.Parse(*in.ShareConfig); err != nil {
					return err
				}
				share = []byte(*in.ShareConfig)
			}
		}
		llm := k.LLMModelSpec
		if in.LLMModelSpec != nil {
			llm = in.LLMModelSpec
		}
		_, err = tx.Exec(ctx, `UPDATE knowledge_bases SET name = $2, description = $3, additional_params = $4, share_config = $5,
			llm_model_spec = $6, connector_secret = COALESCE($7, connector_secret), updated_at = now() WHERE kb_id = $1`,
			kbID, name, desc, add, share, llm, sealed)
		if postgres.IsUniqueViolation(err, "knowledge_bases_name_key") {
			return failure.Conflict("kb_name_taken", "a knowledge base named %q already exists", name)
		}
		if err != nil {
			return err
		}
		// Read back without the access check: a manager may narrow the
		// share_config so that it no longer admits them; the change stands
		// and the answer says what they are left with.
		if out, err = s.LoadTx(ctx, tx, kbID); err != nil {
			return err
		}
		out.Permission = Level(sub, out).String()
		return nil
	})
	return out, err
}

// DeleteTx removes a KB sub may manage with its files and chunks, and records
// its vector collection and objects as owed (knowledge_base_purges) in tx;
// the caller drops the keyword index in tx and, after commit, removes the
// owed things with PurgeDeleted (the sweep does if it cannot). Library.DeleteKB
// is the whole use case in its own transaction.
func (s *Store) DeleteTx(ctx context.Context, tx pgx.Tx, sub access.Subject, kbID string) (KB, error) {
	k, err := s.GetManagedTx(ctx, tx, sub, kbID)
	if err != nil {
		return KB{}, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM knowledge_bases WHERE kb_id = $1`, kbID); err != nil {
		return KB{}, err
	}
	if s.graph != nil {
		if err := s.graph.RemoveKBTx(ctx, tx, kbID); err != nil {
			return KB{}, fmt.Errorf("remove the knowledge graph: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO knowledge_base_purges (kb_id, object_prefix) VALUES ($1, $2)
		ON CONFLICT (kb_id) DO NOTHING`, kbID, ObjectPrefix(kbID)); err != nil {
		return KB{}, err
	}
	return k, nil
}

// mergeObjects merges patch's top-level keys into base (null deletes a key).
func mergeObjects(base, patch json.RawMessage) json.RawMessage {
	var b, p map[string]json.RawMessage
	_ = json.Unmarshal(base, &b)
	_ = json.Unmarshal(patch, &p)
	if b == nil {
		b = map[string]json.RawMessage{}
	}
	for k, v := range p {
		if string(v) == "null" {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	out, _ := json.Marshal(b)
	return out
}
