package kb

import (
	"context"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/blob/notify"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// Library is the knowledge-base use cases an API serves — upload, register,
// restage, delete and purge, the folder tree, Markdown edits, content and
// retrieval, KB deletion, bucket notifications — over a Store and the engines
// they touch. Each use case checks the caller's access itself, runs its own
// transaction (a …Tx variant takes the caller's, for composing) and cleans up
// objects and vectors after commit; what such a cleanup cannot do stays owed
// (knowledge_vector_deletes, knowledge_base_purges) and the sweep finishes it.
type Library struct {
	store   *Store
	objects Objects
	ob      Outbox
	keyword KeywordIndex
	vectors VectorStore
	ret     *Retriever
	types   FileTypes
	buckets Buckets
	log     *slog.Logger
}

// Objects is the object store as the use cases use it (blob.Store).
type Objects interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (blob.Info, error)
	Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error)
	Stat(ctx context.Context, key string) (blob.Info, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string) ([]blob.Info, error)
}

// Outbox runs a transaction whose events are published after commit (outbox.Outbox).
type Outbox interface {
	Tx(ctx context.Context, pool interface {
		Begin(context.Context) (pgx.Tx, error)
	}, fn func(tx pgx.Tx, emit outbox.Emit) error) error
}

// KeywordIndex is the keyword index as the use cases change it.
type KeywordIndex interface {
	Apply(ctx context.Context, tx pgx.Tx, indexID string, remove []string, add []keyword.Doc) error
	DropIndex(ctx context.Context, tx pgx.Tx, indexID string) error
}

// VectorStore is the vector store as the use cases change it.
type VectorStore interface {
	Delete(ctx context.Context, collection string, ids []string) error
	DropCollection(ctx context.Context, name string) error
}

// FileTypes tells which files can be parsed (the document parsers').
type FileTypes interface {
	// Extensions lists the parseable extensions (".pdf", …).
	Extensions() []string
	// Detect checks a file's first bytes against its name's type.
	Detect(name string, head []byte) error
}

// LibraryDeps are a Library's collaborators. Store is required; a Library
// without the others serves only the use cases that do not need them.
type LibraryDeps struct {
	Store     *Store
	Objects   Objects
	Outbox    Outbox
	Keyword   KeywordIndex
	Vectors   VectorStore
	Retriever *Retriever
	Types     FileTypes
	// Buckets reads bound buckets (VerifySource); nil: sources cannot be verified here.
	Buckets Buckets
	Log     *slog.Logger
}

// NewLibrary returns the use cases over d.
func NewLibrary(d LibraryDeps) *Library {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Library{store: d.Store, objects: d.Objects, ob: d.Outbox, keyword: d.Keyword, vectors: d.Vectors,
		ret: d.Retriever, types: d.Types, buckets: d.Buckets, log: d.Log}
}

// KB returns KB kbID if sub may read it (ErrNotFound otherwise).
func (l *Library) KB(ctx context.Context, sub access.Subject, kbID string) (KB, error) {
	return l.store.Get(ctx, sub, kbID)
}

// DeleteKB deletes a KB sub may manage: its rows and keyword index in one
// transaction, then — after commit — its vector collection and objects
// (PurgeDeleted). A purge that fails stays owed and the sweep finishes it;
// the deletion has happened either way.
func (l *Library) DeleteKB(ctx context.Context, sub access.Subject, kbID string) (KB, error) {
	var k KB
	err := pgx.BeginFunc(ctx, l.store.pool, func(tx pgx.Tx) error {
		var err error
		k, err = l.DeleteKBTx(ctx, tx, sub, kbID)
		return err
	})
	if err != nil {
		return KB{}, err
	}
	if _, err := l.store.PurgeDeleted(context.WithoutCancel(ctx), l.vectors, l.objects, kbID); err != nil {
		l.log.Warn("purge deleted KB", "kb", kbID, "error", err)
	}
	return k, nil
}

// DeleteKBTx is DeleteKB's transaction: the KB's rows go, its purge is owed
// and its keyword index is dropped, in tx. The caller purges after commit
// (PurgeDeleted), or leaves it to the sweep.
func (l *Library) DeleteKBTx(ctx context.Context, tx pgx.Tx, sub access.Subject, kbID string) (KB, error) {
	k, err := l.store.DeleteTx(ctx, tx, sub, kbID)
	if err != nil {
		return KB{}, err
	}
	return k, l.keyword.DropIndex(ctx, tx, kbID)
}

// RecordBucketChanges turns decoded bucket notifications into
// io.yuxi.bucket.object.changed.v1 events for doc-parse, in one transaction.
// A notification delivered again is the same event (BucketChange's key).
func (l *Library) RecordBucketChanges(ctx context.Context, changes []notify.Change) error {
	return l.ob.Tx(ctx, l.store.pool, func(_ pgx.Tx, emit outbox.Emit) error {
		return l.RecordBucketChangesTx(emit, changes)
	})
}

// RecordBucketChangesTx emits the events of RecordBucketChanges in the
// caller's transaction (emit writes in it).
func (l *Library) RecordBucketChangesTx(emit outbox.Emit, changes []notify.Change) error {
	for _, c := range changes {
		ev, key := BucketChange(c)
		if err := emit(outbox.Pending{Payload: ev, DedupeKey: key}); err != nil {
			return err
		}
	}
	return nil
}

// ApplyBucketChange applies one bucket change to every KB bound to its
// bucket (Store.ApplyChangeTx) in one transaction, then deletes what it removed:
// vectors and objects of deleted files. supported tells whether an object's
// file name can be parsed. The outcomes are returned even with an error
// (they describe the attempt, which did not commit).
func (l *Library) ApplyBucketChange(ctx context.Context, ch events.BucketObjectChanged,
	supported func(filename string) bool) ([]ChangeOutcome, error) {
	var outcomes []ChangeOutcome
	var removed []Removed
	err := l.ob.Tx(ctx, l.store.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		outcomes, removed, err = l.store.ApplyChangeTx(ctx, tx, emit, l.keyword, ch, supported)
		return err
	})
	if err != nil {
		return outcomes, err
	}
	for _, r := range removed {
		if len(r.Files) > 0 {
			l.cleanup(context.WithoutCancel(ctx), r.Files[0].KBID, r)
		}
	}
	return outcomes, nil
}

// FinishParse records a parsed file (Store.FinishParseTx) in its own outbox
// transaction: document.parsed is published after commit. ErrStageLost: the
// claimed parsing attempt f no longer holds the file.
func (l *Library) FinishParse(ctx context.Context, f File, markdownKey string, images []Image) error {
	return l.ob.Tx(ctx, l.store.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		return l.store.FinishParseTx(ctx, tx, emit, f, markdownKey, images)
	})
}
