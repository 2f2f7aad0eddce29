// Package milvus is the scale-out engine of vector.Store: one Milvus
// collection per knowledge base, searched by Milvus with cosine similarity.
//
// Collection layout (as the original's, less the BM25 fields that the keyword
// index keeps elsewhere): id VARCHAR primary key (chunk id), grp VARCHAR (file
// id, INVERTED index, for filters and deletes), embedding FLOAT_VECTOR(dim)
// with an HNSW (default) or IVF_FLAT index, metric COSINE. Names are
// sanitised to Milvus' alphabet by CollectionName.
//
// Consistency: searches use Strong consistency by default, so that a write
// is visible to every later search from any process, as the vector.Store
// contract asks. Config.Consistency "bounded" trades that for latency
// (Milvus' default: a search may miss writes of the last few seconds).
//
// Writes are not transactional: Milvus has none. Upsert validates every item
// before writing anything, then writes in batches; a failure midway leaves
// the earlier batches written (Upsert is idempotent, so callers retry).
//
// It is its own package so that functions wired for the embedded engine do
// not link the Milvus client and its dependencies.
//
// Imported by: function mains (wiring, when configured for Milvus), its
// tests. May import: shared/vector, the Milvus Go client
// (github.com/milvus-io/milvus/client/v2), its proto types,
// github.com/milvus-io/milvus/pkg/v2 (merr: the client's error codes) and the
// standard library.
package milvus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/milvus-io/milvus-proto/go-api/v2/milvuspb"
	"github.com/milvus-io/milvus-proto/go-api/v2/schemapb"
	"github.com/milvus-io/milvus/client/v2/entity"
	"github.com/milvus-io/milvus/client/v2/index"
	"github.com/milvus-io/milvus/client/v2/milvusclient"
	"github.com/milvus-io/milvus/pkg/v2/util/merr"

	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// Field names of every collection.
const (
	FieldID     = "id"
	FieldGroup  = "grp"
	FieldVector = "embedding"
)

// Config says how to reach Milvus and how to index. Only Address is required.
type Config struct {
	Address  string // "host:19530", or "https://…" for Zilliz Cloud
	Username string
	Password string
	APIKey   string // token ("user:password" or a cloud API key), instead of Username/Password
	DBName   string
	TLS      bool

	// Index is "HNSW" (default) or "IVF_FLAT" (the original's choice).
	Index string
	// HNSW: links per node (default 16), build candidate list (default 200),
	// search candidate list (default 128, raised to k).
	HNSWM, HNSWEfConstruction, HNSWEf int
	// IVF_FLAT: clusters (default 1024, as the original) and clusters
	// probed per search (default 32; the original's 10 loses recall).
	IVFNList, IVFNProbe int

	// Consistency is "strong" (default) or "bounded"; see the package doc.
	Consistency string

	// CollectionPrefix is prepended to every collection name, to share one
	// Milvus database between deployments.
	CollectionPrefix string
}

func (c Config) validate() error {
	if c.Address == "" {
		return errors.New("milvus: address is required")
	}
	switch strings.ToUpper(c.Index) {
	case "", "HNSW", "IVF_FLAT":
	default:
		return fmt.Errorf("milvus: index %q is not HNSW or IVF_FLAT", c.Index)
	}
	switch strings.ToLower(c.Consistency) {
	case "", "strong", "bounded":
	default:
		return fmt.Errorf("milvus: consistency %q is not strong or bounded", c.Consistency)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.Index = strings.ToUpper(c.Index)
	if c.Index == "" {
		c.Index = "HNSW"
	}
	if c.HNSWM <= 0 {
		c.HNSWM = 16
	}
	if c.HNSWEfConstruction <= 0 {
		c.HNSWEfConstruction = 200
	}
	if c.HNSWEf <= 0 {
		c.HNSWEf = 128
	}
	if c.IVFNList <= 0 {
		c.IVFNList = 1024
	}
	if c.IVFNProbe <= 0 {
		c.IVFNProbe = 32
	}
	c.Consistency = strings.ToLower(c.Consistency)
	if c.Consistency == "" {
		c.Consistency = "strong"
	}
	return c
}

// Store is the Milvus engine. It is safe for concurrent use.
type Store struct {
	cli *milvusclient.Client
	cfg Config
	cl  entity.ConsistencyLevel

	mu     sync.Mutex
	dims   map[string]int  // collection → dimension, as last described
	loaded map[string]bool // collections this store has seen loaded
}

var _ vector.Store = (*Store)(nil)

// New connects to Milvus. Close releases the connection.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cli, err := milvusclient.New(ctx, &milvusclient.ClientConfig{
		Address:       cfg.Address,
		Username:      cfg.Username,
		Password:      cfg.Password,
		APIKey:        cfg.APIKey,
		DBName:        cfg.DBName,
		EnableTLSAuth: cfg.TLS,
	})
	if err != nil {
		return nil, fmt.Errorf("connect to milvus at %s: %w", cfg.Address, err)
	}
	cl := entity.ClStrong
	if cfg.Consistency == "bounded" {
		cl = entity.ClBounded
	}
	return &Store{cli: cli, cfg: cfg, cl: cl, dims: map[string]int{}, loaded: map[string]bool{}}, nil
}

// Close closes the connection.
func (s *Store) Close(ctx context.Context) error { return s.cli.Close(ctx) }

// CollectionName maps a knowledge-base id to a valid Milvus collection name:
// letters, digits and underscores, starting with a letter or underscore, at
// most 255 characters. Names that already qualify ("kb_3f2a…") are kept; any
// other gets its invalid characters replaced and a hash of the original
// appended, so that different ids never share a collection.
func CollectionName(prefix, name string) string {
	full := prefix + name
	var b strings.Builder
	changed := false
	for i, r := range full {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
		if !ok && i == 0 && r >= '0' && r <= '9' {
			b.WriteString("c_")
			b.WriteRune(r)
			changed = true
			continue
		}
		if !ok {
			r = '_'
			changed = true
		}
		b.WriteRune(r)
	}
	out := b.String()
	if out == "" {
		out, changed = "c", true
	}
	if changed || len(out) > 255 {
		sum := sha256.Sum256([]byte(full))
		suffix := "_" + hex.EncodeToString(sum[:6])
		if len(out) > 255-len(suffix) {
			out = out[:255-len(suffix)]
		}
		out += suffix
	}
	return out
}

func (s *Store) coll(name string) string { return CollectionName(s.cfg.CollectionPrefix, name) }

// EnsureCollection creates the collection with its indexes and loads it.
func (s *Store) EnsureCollection(ctx context.Context, name string, dim int) error {
	if err := vector.CheckCollection(name, dim); err != nil {
		return err
	}
	c := s.coll(name)
	have, err := s.describeDim(ctx, name)
	switch {
	case err == nil:
		if have != dim {
			return vector.DimensionMismatch(name, have, dim)
		}
	case errors.Is(err, vector.ErrCollectionNotFound):
		if err := s.create(ctx, c, dim); err != nil {
			// Another process may have created it meanwhile.
			if have, derr := s.describeDim(ctx, name); derr == nil {
				if have != dim {
					return vector.DimensionMismatch(name, have, dim)
				}
			} else {
				return fmt.Errorf("create milvus collection %s: %w", c, err)
			}
		}
	default:
		return err
	}
	if err := s.ensureIndexes(ctx, c); err != nil {
		return err
	}
	return s.load(ctx, name)
}

func (s *Store) schema(c string, dim int) *entity.Schema {
	return entity.NewSchema().WithName(c).WithAutoID(false).WithDynamicFieldEnabled(false).
		WithField(entity.NewField().WithName(FieldID).WithDataType(entity.FieldTypeVarChar).
			WithMaxLength(2 * vector.MaxNameLength).WithIsPrimaryKey(true).WithIsAutoID(false)).
		WithField(entity.NewField().WithName(FieldGroup).WithDataType(entity.FieldTypeVarChar).
			WithMaxLength(2 * vector.MaxNameLength)).
		WithField(entity.NewField().WithName(FieldVector).WithDataType(entity.FieldTypeFloatVector).
			WithDim(int64(dim)))
}

func (s *Store) vectorIndex() index.Index {
	if s.cfg.Index == "IVF_FLAT" {
		return index.NewIvfFlatIndex(entity.COSINE, s.cfg.IVFNList)
	}
	return index.NewHNSWIndex(entity.COSINE, s.cfg.HNSWM, s.cfg.HNSWEfConstruction)
}

func (s *Store) create(ctx context.Context, c string, dim int) error {
	return s.cli.CreateCollection(ctx, milvusclient.NewCreateCollectionOption(c, s.schema(c, dim)).
		WithConsistencyLevel(s.cl).
		WithIndexOptions(
			milvusclient.NewCreateIndexOption(c, FieldVector, s.vectorIndex()).WithIndexName(FieldVector),
			milvusclient.NewCreateIndexOption(c, FieldGroup, index.NewInvertedIndex()).WithIndexName(FieldGroup),
		))
}

// ensureIndexes creates the indexes a crashed creator may have left out.
func (s *Store) ensureIndexes(ctx context.Context, c string) error {
	names, err := s.cli.ListIndexes(ctx, milvusclient.NewListIndexOption(c))
	if err != nil && !errors.Is(err, merr.ErrIndexNotFound) {
		return fmt.Errorf("list indexes of %s: %w", c, err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for field, idx := range map[string]index.Index{FieldVector: s.vectorIndex(), FieldGroup: index.NewInvertedIndex()} {
		if have[field] {
			continue
		}
		task, err := s.cli.CreateIndex(ctx, milvusclient.NewCreateIndexOption(c, field, idx).WithIndexName(field))
		if err != nil {
			return fmt.Errorf("create index on %s.%s: %w", c, field, err)
		}
		if err := task.Await(ctx); err != nil {
			return fmt.Errorf("create index on %s.%s: %w", c, field, err)
		}
	}
	return nil
}

// load loads the collection into memory (needed before searching) once per
// store; a collection released behind our back is reloaded on demand.
func (s *Store) load(ctx context.Context, name string) error {
	s.mu.Lock()
	done := s.loaded[name]
	s.mu.Unlock()
	if done {
		return nil
	}
	task, err := s.cli.LoadCollection(ctx, milvusclient.NewLoadCollectionOption(s.coll(name)))
	if err == nil {
		err = task.Await(ctx)
	}
	if err != nil {
		return s.mapErr(name, fmt.Errorf("load milvus collection %s: %w", s.coll(name), err))
	}
	s.mu.Lock()
	s.loaded[name] = true
	s.mu.Unlock()
	return nil
}

// describeDim asks Milvus for the collection's dimension and remembers it.
func (s *Store) describeDim(ctx context.Context, name string) (int, error) {
	coll, err := s.cli.DescribeCollection(ctx, milvusclient.NewDescribeCollectionOption(s.coll(name)))
	if err != nil {
		return 0, s.mapErr(name, err)
	}
	for _, f := range coll.Schema.Fields {
		if f.Name == FieldVector {
			d, err := f.GetDim()
			if err != nil {
				return 0, fmt.Errorf("collection %s: %w", s.coll(name), err)
			}
			s.mu.Lock()
			s.dims[name] = int(d)
			s.mu.Unlock()
			return int(d), nil
		}
	}
	return 0, fmt.Errorf("collection %s has no %s field: not created by this store", s.coll(name), FieldVector)
}

// dim returns the collection's dimension, from memory when the caller's
// length agrees with it, else from Milvus (the collection may have been
// re-created with another dimension by another process).
func (s *Store) dim(ctx context.Context, name string, got int) (int, error) {
	s.mu.Lock()
	d, ok := s.dims[name]
	s.mu.Unlock()
	if ok && d == got {
		return d, nil
	}
	return s.describeDim(ctx, name)
}

func (s *Store) forget(name string) {
	s.mu.Lock()
	delete(s.dims, name)
	delete(s.loaded, name)
	s.mu.Unlock()
}

// mapErr turns Milvus' "collection not found" into the coded error.
func (s *Store) mapErr(name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, merr.ErrCollectionNotFound) {
		s.forget(name)
		return vector.CollectionNotFound(name)
	}
	return err
}

// upsertBatch keeps each request far below gRPC's message limit.
const upsertBatch = 1000

// Upsert writes items; see the package doc on atomicity.
func (s *Store) Upsert(ctx context.Context, collection string, items []vector.Item) error {
	if len(items) == 0 {
		return nil
	}
	items = vector.Dedupe(items)
	dim, err := s.dim(ctx, collection, len(items[0].Vector))
	if err != nil {
		return err
	}
	if err := vector.CheckItems(collection, dim, items); err != nil {
		return err
	}
	c := s.coll(collection)
	for start := 0; start < len(items); start += upsertBatch {
		batch := items[start:min(start+upsertBatch, len(items))]
		ids := make([]string, len(batch))
		grps := make([]string, len(batch))
		vecs := make([][]float32, len(batch))
		for i, it := range batch {
			ids[i], grps[i], vecs[i] = it.ID, it.Group, it.Vector
		}
		_, err := s.cli.Upsert(ctx, milvusclient.NewColumnBasedInsertOption(c).
			WithVarcharColumn(FieldID, ids).
			WithVarcharColumn(FieldGroup, grps).
			WithFloatVectorColumn(FieldVector, dim, vecs))
		if err != nil {
			return s.mapErr(collection, fmt.Errorf("upsert into milvus collection %s: %w", c, err))
		}
	}
	return nil
}

// templateDelete is a delete whose filter takes its values as template
// parameters, so ids and groups are data, never expression syntax.
type templateDelete struct {
	collection string
	expr       string
	values     map[string]*schemapb.TemplateValue
}

func (d templateDelete) Request() *milvuspb.DeleteRequest {
	return &milvuspb.DeleteRequest{
		CollectionName:     d.collection,
		Expr:               d.expr,
		ExprTemplateValues: d.values,
	}
}

func stringsValue(v []string) *schemapb.TemplateValue {
	return &schemapb.TemplateValue{Val: &schemapb.TemplateValue_ArrayVal{ArrayVal: &schemapb.TemplateArrayValue{
		Data: &schemapb.TemplateArrayValue_StringData{StringData: &schemapb.StringArray{Data: v}},
	}}}
}

func stringValue(v string) *schemapb.TemplateValue {
	return &schemapb.TemplateValue{Val: &schemapb.TemplateValue_StringVal{StringVal: v}}
}

// Delete removes ids; a missing collection is not an error.
func (s *Store) Delete(ctx context.Context, collection string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.delete(ctx, collection, FieldID+" in {ids}", map[string]*schemapb.TemplateValue{"ids": stringsValue(ids)})
}

// DeleteGroup removes the vectors of one group (a file).
func (s *Store) DeleteGroup(ctx context.Context, collection, group string) error {
	return s.delete(ctx, collection, FieldGroup+" == {grp}", map[string]*schemapb.TemplateValue{"grp": stringValue(group)})
}

func (s *Store) delete(ctx context.Context, collection, expr string, values map[string]*schemapb.TemplateValue) error {
	_, err := s.cli.Delete(ctx, templateDelete{collection: s.coll(collection), expr: expr, values: values})
	err = s.mapErr(collection, err)
	if errors.Is(err, vector.ErrCollectionNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete from milvus collection %s: %w", s.coll(collection), err)
	}
	return nil
}

// maxTopK is Milvus' limit on k.
const maxTopK = 16384

// Search finds the k nearest vectors by cosine similarity.
func (s *Store) Search(ctx context.Context, collection string, query []float32, k int, groups []string) ([]vector.Hit, error) {
	dim, err := s.dim(ctx, collection, len(query))
	if err != nil {
		return nil, err
	}
	if err := vector.CheckQuery(collection, dim, query); err != nil {
		return nil, err
	}
	if k <= 0 || groups != nil && len(groups) == 0 {
		return []vector.Hit{}, nil
	}
	if err := s.load(ctx, collection); err != nil {
		return nil, err
	}
	hits, err := s.search(ctx, collection, query, min(k, maxTopK), groups)
	if errors.Is(err, merr.ErrCollectionNotLoaded) {
		// Released by someone else: load again, once.
		s.forget(collection)
		if err := s.load(ctx, collection); err != nil {
			return nil, err
		}
		hits, err = s.search(ctx, collection, query, min(k, maxTopK), groups)
	}
	if err != nil {
		return nil, s.mapErr(collection, fmt.Errorf("search milvus collection %s: %w", s.coll(collection), err))
	}
	return hits, nil
}

func (s *Store) search(ctx context.Context, collection string, query []float32, k int, groups []string) ([]vector.Hit, error) {
	opt := milvusclient.NewSearchOption(s.coll(collection), k, []entity.Vector{entity.FloatVector(query)}).
		WithANNSField(FieldVector).
		WithConsistencyLevel(s.cl)
	if s.cfg.Index == "IVF_FLAT" {
		opt = opt.WithAnnParam(index.NewIvfAnnParam(s.cfg.IVFNProbe))
	} else {
		opt = opt.WithAnnParam(index.NewHNSWAnnParam(max(s.cfg.HNSWEf, k)))
	}
	if groups != nil {
		opt = opt.WithFilter(FieldGroup+" in {groups}").WithTemplateParam("groups", groups)
	}
	results, err := s.cli.Search(ctx, opt)
	if err != nil {
		return nil, err
	}
	hits := []vector.Hit{}
	for _, rs := range results {
		if rs.Err != nil {
			return nil, rs.Err
		}
		for i := 0; i < rs.ResultCount; i++ {
			id, err := rs.IDs.GetAsString(i)
			if err != nil {
				return nil, err
			}
			hits = append(hits, vector.Hit{ID: id, Score: vector.ClampScore(rs.Scores[i])})
		}
	}
	return hits, nil
}

// DropCollection deletes the collection; a missing one is not an error.
func (s *Store) DropCollection(ctx context.Context, name string) error {
	defer s.forget(name)
	err := s.cli.DropCollection(ctx, milvusclient.NewDropCollectionOption(s.coll(name)))
	if err != nil && !errors.Is(err, merr.ErrCollectionNotFound) {
		return fmt.Errorf("drop milvus collection %s: %w", s.coll(name), err)
	}
	return nil
}

// Describe returns a human-readable summary of the configuration, for logs.
func (s *Store) Describe() string {
	idx := s.cfg.Index + " M=" + strconv.Itoa(s.cfg.HNSWM) + " ef=" + strconv.Itoa(s.cfg.HNSWEf)
	if s.cfg.Index == "IVF_FLAT" {
		idx = "IVF_FLAT nlist=" + strconv.Itoa(s.cfg.IVFNList) + " nprobe=" + strconv.Itoa(s.cfg.IVFNProbe)
	}
	return fmt.Sprintf("milvus %s (%s, COSINE, %s consistency)", s.cfg.Address, idx, s.cfg.Consistency)
}
