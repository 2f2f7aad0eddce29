// Package vector stores the embedding vectors of knowledge-base chunks and
// finds the ones nearest to a query by cosine similarity: the vector half of
// knowledge-base retrieval.
//
// A collection holds one knowledge base's vectors (its name is the kb_id);
// every vector has the chunk id as its ID and the file id as its Group, so a
// search can be limited to some files and a file's vectors deleted at once.
//
// Two engines implement Store and are chosen by configuration in main:
//
//   - Postgres (this package, NewPostgres), the embedded default: vectors are
//     rows in PostgreSQL, the source of truth, and are searched in-process
//     from a per-process cache — exactly, or through an HNSW graph once a
//     collection is large. See postgres.go for the cache and index policy.
//   - Milvus (package shared/vector/milvus), the scale-out engine. It lives
//     in its own package so that functions wired for the embedded engine do
//     not link the Milvus client.
//
// The contract both honour is written down as tests in shared/vector/vectortest.
//
// Imported by: shared/kb (retrieval and indexing), function mains (wiring),
// shared/vector/milvus, shared/vector/vectortest. May import: shared/failure,
// shared/postgres, pgx, golang.org/x/sys/cpu and the standard library.
package vector

import (
	"context"
	"fmt"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Item is one vector to store.
type Item struct {
	ID     string    // chunk id; unique within the collection
	Group  string    // file id, for filters and DeleteGroup
	Vector []float32 // any length ≠ 0; compared by cosine, so its norm does not matter
}

// Hit is one search result.
type Hit struct {
	ID    string
	Score float64 // cosine similarity in [-1, 1], higher is nearer
}

// Store keeps collections of vectors and searches them.
//
// Contract (tested by vectortest.Run for every engine):
//   - EnsureCollection is idempotent; asking for another dimension than the
//     existing collection's fails with ErrDimensionMismatch.
//   - Upsert is idempotent by ID (the last write wins, group included). A
//     vector of the wrong length fails the whole call with
//     ErrDimensionMismatch and writes nothing.
//   - Upsert and Search on a missing collection fail with
//     ErrCollectionNotFound; Delete, DeleteGroup and DropCollection on a
//     missing collection (or of missing ids) succeed and do nothing.
//   - Search returns at most k hits ordered by descending Score. groups nil
//     means every group; a non-nil slice limits hits to those groups (an empty
//     slice matches nothing). An empty collection yields no hits, not an error.
//   - A write is visible to every later Search, in any process (the Milvus
//     engine documents its consistency level).
type Store interface {
	EnsureCollection(ctx context.Context, name string, dim int) error
	Upsert(ctx context.Context, collection string, items []Item) error
	Delete(ctx context.Context, collection string, ids []string) error
	DeleteGroup(ctx context.Context, collection, group string) error
	Search(ctx context.Context, collection string, query []float32, k int, groups []string) ([]Hit, error)
	DropCollection(ctx context.Context, name string) error
}

// Error codes returned by every engine.
const (
	CodeDimensionMismatch  = "embedding_dimension_mismatch"
	CodeCollectionNotFound = "vector_collection_not_found"
	CodeInvalid            = "vector_invalid"
)

// Sentinels for errors.Is: failure.Error matches on kind and code, so the
// detailed errors built by DimensionMismatch and CollectionNotFound match them.
var (
	ErrDimensionMismatch  = failure.Unprocessable(CodeDimensionMismatch, "vector dimension does not match the collection")
	ErrCollectionNotFound = failure.NotFound(CodeCollectionNotFound, "vector collection not found")
)

// DimensionMismatch reports a vector or collection of the wrong dimension.
func DimensionMismatch(collection string, want, got int) error {
	return failure.Unprocessable(CodeDimensionMismatch,
		"collection %q holds vectors of dimension %d, got %d (the knowledge base's embedding model changed?)",
		collection, want, got).With(map[string]any{"collection": collection, "dim": want, "got": got})
}

// CollectionNotFound reports a missing collection.
func CollectionNotFound(collection string) error {
	return failure.NotFound(CodeCollectionNotFound, "vector collection %q does not exist", collection)
}

// MaxNameLength bounds collection names (and item ids and groups) so that every
// engine can store them.
const MaxNameLength = 255

// MaxDim is the largest dimension accepted (Milvus' limit is 32768).
const MaxDim = 32768

// CheckCollection validates a collection name and dimension.
func CheckCollection(name string, dim int) error {
	if err := checkName("collection name", name); err != nil {
		return err
	}
	if dim <= 0 || dim > MaxDim {
		return failure.Invalid(CodeInvalid, "vector dimension %d out of range 1..%d", dim, MaxDim)
	}
	return nil
}

// CheckItems validates items for a collection of dimension dim: non-empty
// ids and groups of bounded length, finite components, and the right
// dimension (ErrDimensionMismatch otherwise). It returns the first problem.
func CheckItems(collection string, dim int, items []Item) error {
	for i := range items {
		it := &items[i]
		if err := checkName("item id", it.ID); err != nil {
			return err
		}
		if len(it.Group) > MaxNameLength {
			return failure.Invalid(CodeInvalid, "item %q: group longer than %d bytes", it.ID, MaxNameLength)
		}
		if len(it.Vector) != dim {
			return DimensionMismatch(collection, dim, len(it.Vector))
		}
		if !finite(it.Vector) {
			return failure.Invalid(CodeInvalid, "item %q: vector has a NaN or infinite component", it.ID)
		}
	}
	return nil
}

// CheckQuery validates a query vector against the collection's dimension.
func CheckQuery(collection string, dim int, query []float32) error {
	if len(query) != dim {
		return DimensionMismatch(collection, dim, len(query))
	}
	if !finite(query) {
		return failure.Invalid(CodeInvalid, "query vector has a NaN or infinite component")
	}
	return nil
}

func checkName(what, s string) error {
	if s == "" {
		return failure.Invalid(CodeInvalid, "%s is empty", what)
	}
	if len(s) > MaxNameLength {
		return failure.Invalid(CodeInvalid, "%s longer than %d bytes", what, MaxNameLength)
	}
	return nil
}

// Dedupe returns items with one entry per ID, the last one winning, in the
// order of first appearance. Engines use it so that a batch repeating an ID
// behaves like the same writes done one after the other.
func Dedupe(items []Item) []Item {
	seen := make(map[string]int, len(items))
	out := make([]Item, 0, len(items))
	for _, it := range items {
		if i, ok := seen[it.ID]; ok {
			out[i] = it
			continue
		}
		seen[it.ID] = len(out)
		out = append(out, it)
	}
	return out
}

// ClampScore keeps a float32 cosine computed from unit vectors inside [-1, 1].
func ClampScore(s float32) float64 {
	switch {
	case s > 1:
		return 1
	case s < -1:
		return -1
	}
	return float64(s)
}

func wrap(op, collection string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := failure.As(err); ok {
		return err
	}
	return fmt.Errorf("vector %s %s: %w", op, collection, err)
}
