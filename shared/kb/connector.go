package kb

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kbconnect"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/secret"
)

// ErrReadOnly answers every document route (upload, register, parse, index,
// edit, folders, buckets) of a read-only connector KB.
var ErrReadOnly = failure.Unprocessable("kb_read_only",
	"this knowledge base is a read-only connector: it answers queries but holds no documents")

// Sealer seals and opens secrets at rest (*secret.Keyring; nil refuses).
type Sealer interface {
	Seal(plaintext, associatedData string) (string, error)
	Open(sealed, associatedData string) (string, error)
	Reseal(sealed, associatedData string) (string, bool, error)
}

// UseSecrets makes the store seal connector tokens with keys (without it,
// creating a connector KB answers 503 encryption_key_missing).
func (s *Store) UseSecrets(keys Sealer) { s.secrets = keys }

// UseConnectors makes the retriever answer connector KBs through c,
// opening their tokens with keys.
func (r *Retriever) UseConnectors(c *kbconnect.Client, keys Sealer) { r.conn, r.secrets = c, keys }

// connectorAD binds a sealed token to its KB row.
func connectorAD(kbID string) string { return "knowledge_base:" + kbID + ":connector_secret" }

// sealer returns keys, or a ring that refuses when none is configured (a
// nil *secret.Keyring answers secret.ErrNoKey).
func sealer(keys Sealer) Sealer {
	if keys == nil {
		return (*secret.Keyring)(nil)
	}
	return keys
}

// ResealSecrets seals again, under the current key, the connector tokens
// that a previous key sealed (after a key rotation); failed names the KBs
// whose tokens do not open with any configured key.
func (s *Store) ResealSecrets(ctx context.Context) (resealed int, failed []string, err error) {
	keys := sealer(s.secrets)
	if _, err := keys.Seal("", "probe"); err != nil {
		return 0, nil, err // no key configured: nothing can be sealed
	}
	return postgres.ResealColumn(ctx, s.pool, postgres.SealedColumn{Table: "knowledge_bases", Key: "kb_id", Column: "connector_secret"},
		func(id, sealed string) (string, bool, error) { return keys.Reseal(sealed, connectorAD(id)) })
}

// createConnector makes a read-only connector KB of in.KBType, its
// connection parameters validated against the connector's schema.
func (s *Store) createConnector(ctx context.Context, sub access.Subject, name string, in CreateInput) (KB, error) {
	raw := map[string]any{}
	if len(in.AdditionalParams) > 0 && string(in.AdditionalParams) != "null" {
		if err := json.Unmarshal(in.AdditionalParams, &raw); err != nil {
			return KB{}, failure.Unprocessable("invalid_additional_params", "additional_params must be a JSON object")
		}
	}
	public, token, err := kbconnect.Normalize(in.KBType, raw)
	if err != nil {
		return KB{}, err
	}
	add, _ := json.Marshal(public)
	share, err := shareValue(in.ShareConfig)
	if err != nil {
		return KB{}, err
	}
	id := newID("kb_")
	sealed, err := sealer(s.secrets).Seal(token, connectorAD(id))
	if err != nil {
		return KB{}, err
	}
	k, err := scanKB(s.pool.QueryRow(ctx, `INSERT INTO knowledge_bases (kb_id, name, description, kb_type, embedding_model_spec,
		embedding_dim, additional_params, share_config, created_by, connector_secret)
		VALUES ($1, $2, $3, $4, '', 0, $5, $6, $7, $8) RETURNING `+kbCols,
		id, name, in.Description, in.KBType, add, share, sub.UID, sealed))
	return created(k, err, name)
}

// redactConnector marks the secret fields of a connector KB's additional_params.
func redactConnector(k *KB) {
	if k.KBType == TypeDocument {
		return
	}
	m := map[string]any{}
	_ = json.Unmarshal(k.AdditionalParams, &m)
	k.AdditionalParams, _ = json.Marshal(kbconnect.Redact(k.KBType, m))
}

// getDocuments is getManaged for a change to kbID's documents: a connector
// KB answers ErrReadOnly.
func (s *Store) getDocuments(ctx context.Context, db postgres.DB, sub access.Subject, kbID string) (KB, error) {
	k, err := s.getManaged(ctx, db, sub, kbID)
	if err == nil && !k.SupportsDocuments {
		return KB{}, ErrReadOnly
	}
	return k, err
}

// GetDocuments is GetManaged for a change to the KB's documents (ErrReadOnly for a connector KB).
func (s *Store) GetDocuments(ctx context.Context, sub access.Subject, kbID string) (KB, error) {
	return s.getDocuments(ctx, s.pool, sub, kbID)
}

// GetDocumentsTx is GetDocuments in tx.
func (s *Store) GetDocumentsTx(ctx context.Context, tx pgx.Tx, sub access.Subject, kbID string) (KB, error) {
	return s.getDocuments(ctx, tx, sub, kbID)
}

// connectorQuery answers a query on connector KB k through its remote service.
func (r *Retriever) connectorQuery(ctx context.Context, k KB, query string, opt Retrieval) ([]Result, error) {
	if r.conn == nil {
		return nil, failure.New(failure.KindUnavailable, "connectors_unavailable", "this process does not reach %s knowledge bases", k.KBType)
	}
	var sealed *string
	err := r.db.QueryRow(ctx, `SELECT connector_secret FROM knowledge_bases WHERE kb_id = $1`, k.KBID).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	token := ""
	if sealed != nil {
		if token, err = sealer(r.secrets).Open(*sealed, connectorAD(k.KBID)); err != nil {
			return nil, err
		}
	}
	params := map[string]any{}
	_ = json.Unmarshal(k.AdditionalParams, &params)
	hits, err := r.conn.Retrieve(ctx, kbconnect.Source{Kind: k.KBType, Params: params, Secret: token}, query,
		kbconnect.Options{TopK: opt.FinalTopK, SearchMode: opt.SearchMode, ScoreThreshold: opt.SimilarityThreshold})
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(hits))
	for _, h := range hits {
		md := map[string]any{"source": h.DocumentName, "file_id": h.DocumentID, "chunk_id": h.ID, "kb_type": k.KBType}
		for key, v := range h.Metadata {
			if _, ok := md[key]; !ok {
				md[key] = v
			}
		}
		out = append(out, Result{ID: h.ID, KBID: k.KBID, FileID: h.DocumentID, Content: h.Content, Metadata: md, Score: h.Score})
	}
	return out, nil
}

// connectorPatch merges patch into connector KB k's connection parameters
// and validates the result: a secret field set to a new value (not the
// redaction marker) is sealed and returned; secret fields never reach
// additional_params.
func (s *Store) connectorPatch(k KB, patch json.RawMessage) (json.RawMessage, *string, error) {
	p := map[string]any{}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, nil, failure.Unprocessable("invalid_additional_params", "additional_params must be a JSON object")
	}
	merged := map[string]any{}
	_ = json.Unmarshal(k.AdditionalParams, &merged)
	for key, v := range p {
		if v == nil {
			delete(merged, key)
			continue
		}
		merged[key] = v
	}
	// The stored parameters carry the redaction marker; a secret not given
	// anew under any of its names keeps the stored one.
	for key, v := range merged {
		if v == kbconnect.Redacted {
			delete(merged, key)
		}
	}
	for _, f := range kbconnect.Schema(k.KBType) {
		if !f.Secret {
			continue
		}
		given := false
		for _, n := range append([]string{f.Name}, f.Aliases...) {
			if str, ok := merged[n].(string); ok && str != "" {
				given = true
			}
		}
		if !given {
			merged[f.Name] = kbconnect.Redacted
		}
	}
	public, token, err := kbconnect.Normalize(k.KBType, merged)
	if err != nil {
		return nil, nil, err
	}
	add, _ := json.Marshal(public)
	if token == kbconnect.Redacted {
		return add, nil, nil
	}
	sealed, err := sealer(s.secrets).Seal(token, connectorAD(k.KBID))
	if err != nil {
		return nil, nil, err
	}
	return add, &sealed, nil
}

// TypeInfo describes a kb_type for the create form (GET /api/knowledge/types).
type TypeInfo struct {
	Type              string            `json:"type"`
	Name              string            `json:"name"`
	Description       string            `json:"description"`
	SupportsDocuments bool              `json:"supports_documents"`
	ReadOnly          bool              `json:"read_only"`
	CreateParams      []kbconnect.Field `json:"create_params"`
}

// Types lists the supported kb_types; a connector's create_params are the
// schema its connection parameters (additional_params) are rendered from.
func Types() []TypeInfo {
	return []TypeInfo{
		{Type: TypeDocument, Name: "Document knowledge base", SupportsDocuments: true, CreateParams: []kbconnect.Field{},
			Description: "Files parsed to Markdown, chunked, searched by vector, BM25 keyword or hybrid retrieval."},
		{Type: kbconnect.Dify, Name: "Dify dataset", ReadOnly: true, CreateParams: kbconnect.Schema(kbconnect.Dify),
			Description: "Read-only connector: queries an existing Dify dataset through its retrieve API; no upload or indexing."},
		{Type: kbconnect.Notion, Name: "Notion pages", ReadOnly: true, CreateParams: kbconnect.Schema(kbconnect.Notion),
			Description: "Read-only connector: searches the pages shared with a Notion integration; no upload or indexing."},
	}
}
