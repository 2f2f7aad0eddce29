package kb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// MaxUploadBytes is the largest file an upload accepts.
const MaxUploadBytes = 100 << 20

// ErrTooLarge refuses a file over MaxUploadBytes (413). A reader handed to
// Upload returns it (or wraps it) when its transport refused a larger body.
var ErrTooLarge = failure.New(failure.KindTooLarge, "file_too_large", "files are limited to %d MB", MaxUploadBytes>>20)

// maxBatch bounds the files one request registers, restages or deletes.
const maxBatch = 1000

// Upload is a stored upload, awaiting Register.
type Upload struct {
	Key              string   // the object key; Register's item
	ContentHash      string   // SHA-256 of the content, hex
	Filename         string   // lower-cased
	OriginalFilename string   // as uploaded, without directories
	Size             int64    // bytes stored
	SameNameFiles    []string // files of the KB with the same name (never nil)
}

// Upload stores one file for a later Register in kbID, which sub must be
// allowed to manage. open is called after that check: it returns the file's
// name and content. Unsupported types are refused (415, with the supported
// list), files over MaxUploadBytes too (ErrTooLarge), and the same content
// twice in a KB (409 duplicate_content; the stored object is deleted again).
func (l *Library) Upload(ctx context.Context, sub access.Subject, kbID string,
	open func() (filename string, body io.Reader, err error)) (Upload, error) {
	if _, err := l.store.GetDocuments(ctx, sub, kbID); err != nil {
		return Upload{}, err
	}
	filename, body, err := open()
	if err != nil {
		return Upload{}, err
	}
	name := path.Base(strings.ReplaceAll(filename, "\\", "/"))
	ext := strings.ToLower(path.Ext(name))
	ok := false
	for _, e := range l.types.Extensions() {
		ok = ok || e == ext
	}
	if !ok {
		return Upload{}, failure.New(failure.KindUnsupportedMedia, "unsupported_file_type", "%q is not a supported file type", name).
			With(map[string]any{"supported": l.types.Extensions()})
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(body, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return Upload{}, readError(err)
	}
	head = head[:n]
	if n == 0 {
		return Upload{}, failure.Unprocessable("empty_file", "%s is empty", name)
	}
	if err := l.types.Detect(name, head); err != nil {
		return Upload{}, failure.New(failure.KindUnsupportedMedia, "wrong_file_type", "%v", err).
			With(map[string]any{"supported": l.types.Extensions()})
	}
	sum := sha256.New()
	counted := &countingReader{r: io.TeeReader(io.MultiReader(strings.NewReader(string(head)), body), sum), limit: MaxUploadBytes}
	key := UploadKey(kbID, name, time.Now())
	info, err := l.objects.Put(ctx, key, counted, -1, mime.TypeByExtension(ext))
	if counted.over {
		_ = l.objects.Delete(context.WithoutCancel(ctx), key)
		return Upload{}, ErrTooLarge
	}
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return Upload{}, ErrTooLarge
		}
		if errors.Is(err, blob.ErrInvalidKey) { // the name does not fit the store's key rules (a local store's 255-byte file names)
			return Upload{}, failure.Invalid("invalid_file_name", "the file name cannot be stored: %v", err)
		}
		return Upload{}, fmt.Errorf("store upload: %w", err)
	}
	hash := hex.EncodeToString(sum.Sum(nil))
	dup, err := l.store.fileWithContent(ctx, kbID, hash)
	if err != nil {
		return Upload{}, err
	}
	if dup != "" {
		_ = l.objects.Delete(context.WithoutCancel(ctx), key)
		return Upload{}, failure.Conflict("duplicate_content", "a file with the same content (%s) is already in this knowledge base", dup)
	}
	return Upload{Key: key, ContentHash: hash, Filename: strings.ToLower(name), OriginalFilename: name, Size: info.Size,
		SameNameFiles: l.store.sameNameFiles(ctx, kbID, name)}, nil
}

// readError is a failed read of an upload: ErrTooLarge, or a malformed body.
func readError(err error) error {
	if errors.Is(err, ErrTooLarge) {
		return ErrTooLarge
	}
	return failure.Invalid("invalid_multipart", "cannot read the upload: %v", err)
}

// fileWithContent names a file (not a folder) of kbID with the content hash,
// or "" when there is none.
func (s *Store) fileWithContent(ctx context.Context, kbID, hash string) (string, error) {
	var name string
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT filename FROM knowledge_files WHERE kb_id = $1 AND content_hash = $2
		AND NOT is_folder LIMIT 1), '')`, kbID, hash).Scan(&name)
	return name, err
}

// sameNameFiles lists the files of kbID named name (case-insensitively);
// best effort: an error lists none (the upload stands, the list is advice).
func (s *Store) sameNameFiles(ctx context.Context, kbID, name string) []string {
	ids := []string{}
	rows, err := s.pool.Query(ctx, `SELECT file_id FROM knowledge_files WHERE kb_id = $1 AND filename = lower($2) AND NOT is_folder`, kbID, name)
	if err != nil {
		return ids
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids
}

// countingReader fails a read past limit and says so (over).
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.over = true
		return n, errors.New("file larger than the upload limit")
	}
	return n, err
}

// RegisterInput is what Register adds: uploads (Upload's keys) and how to
// process them.
type RegisterInput struct {
	Items             []string          // Upload keys of this KB, 1 to 1000
	AutoIndex         *bool             // index after parsing (default true)
	ChunkPresetID     string            // chunking preset for these files
	ChunkParserConfig json.RawMessage   // chunking settings for these files
	ContentHashes     map[string]string // item → content hash (Upload's); missing ones are computed
	ParentID          *string           // the folder (nil: the root)
	OCREngine         string
	// Parse starts ingestion (document.uploaded); false only registers the
	// files, which wait for a parse (parse-pending, reparse).
	Parse bool
}

// Register adds uploaded files to kbID, which sub must manage, in one
// transaction (one refused item refuses all), and starts their ingestion
// when in.Parse. The files are returned in the order of in.Items.
func (l *Library) Register(ctx context.Context, sub access.Subject, kbID string, in RegisterInput) ([]File, error) {
	if _, err := in.processing(); err != nil {
		return nil, err
	}
	if _, err := l.store.GetDocuments(ctx, sub, kbID); err != nil {
		return nil, err
	}
	hashes, err := l.uploadHashes(ctx, kbID, in.Items, in.ContentHashes)
	if err != nil {
		return nil, err
	}
	in.ContentHashes = hashes
	var files []File
	err = l.ob.Tx(ctx, l.store.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		files, err = l.RegisterTx(ctx, tx, emit, sub, kbID, in)
		return err
	})
	return files, err
}

// RegisterTx is Register in the caller's transaction, with the content
// hashes in.ContentHashes has (a file without one escapes the
// duplicate-content check of later uploads).
func (l *Library) RegisterTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, sub access.Subject, kbID string, in RegisterInput) ([]File, error) {
	proc, err := in.processing()
	if err != nil {
		return nil, err
	}
	if _, err := l.store.GetDocumentsTx(ctx, tx, sub, kbID); err != nil {
		return nil, err
	}
	nfs := make([]NewFile, 0, len(in.Items))
	batch := ""
	if in.Parse {
		batch = NewBatchID()
	}
	for _, item := range in.Items {
		if !IsUploadKey(kbID, item) {
			return nil, failure.Unprocessable("invalid_items", "item %q is not a file uploaded to this knowledge base", item)
		}
		info, err := l.objects.Stat(ctx, item)
		if errors.Is(err, blob.ErrNotFound) {
			return nil, failure.NotFound("upload_not_found", "uploaded file %q not found; upload it first", item)
		}
		if err != nil {
			return nil, err
		}
		nfs = append(nfs, NewFile{Filename: UploadName(item), ObjectKey: item, ContentHash: in.ContentHashes[item], Size: info.Size,
			ContentType: info.ContentType, ParentID: in.ParentID, CreatedBy: sub.UID, Processing: proc, Batch: batch})
	}
	return l.store.AddFilesTx(ctx, tx, func(ps ...outbox.Pending) error {
		if !in.Parse {
			return nil
		}
		return emit(ps...)
	}, kbID, nfs)
}

// processing checks in and returns the files' processing parameters.
func (in RegisterInput) processing() (Processing, error) {
	if len(in.Items) == 0 || len(in.Items) > maxBatch {
		return Processing{}, failure.Unprocessable("invalid_items", "items must list 1 to 1000 uploaded files")
	}
	var chunking json.RawMessage
	if in.ChunkPresetID != "" || len(in.ChunkParserConfig) > 0 {
		m := map[string]any{}
		if in.ChunkPresetID != "" {
			m["chunk_preset_id"] = chunk.ResolvePreset(in.ChunkPresetID)
		}
		if len(in.ChunkParserConfig) > 0 {
			if _, err := chunk.ParseConfig(in.ChunkParserConfig); err != nil {
				return Processing{}, err
			}
			m["chunk_parser_config"] = in.ChunkParserConfig
		}
		chunking, _ = json.Marshal(m)
	}
	auto := true
	if in.AutoIndex != nil {
		auto = *in.AutoIndex
	}
	return Processing{AutoIndex: auto, Chunking: chunking, OCREngine: in.OCREngine}, nil
}

// uploadHashes returns the content hash of each item: the one the client
// sent (echoing Upload's answer, as the original requires), else the SHA-256
// of the stored upload. Items that are not uploads of this KB are left out;
// RegisterTx refuses them.
func (l *Library) uploadHashes(ctx context.Context, kbID string, items []string, sent map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(items))
	for _, item := range items {
		if h := sent[item]; h != "" {
			out[item] = h
			continue
		}
		if !IsUploadKey(kbID, item) {
			continue
		}
		rc, _, err := l.objects.Get(ctx, item)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read upload %s: %w", item, err)
		}
		sum := sha256.New()
		_, err = io.Copy(sum, rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("hash upload %s: %w", item, err)
		}
		out[item] = hex.EncodeToString(sum.Sum(nil))
	}
	return out, nil
}

// RemoveFiles deletes files and folders (with everything below them) of
// kbID, which sub must manage, and returns the ids deleted. Their rows,
// chunks and keyword entries go in one transaction; their vectors and
// objects after commit (vectors left owed are flushed by the sweep).
func (l *Library) RemoveFiles(ctx context.Context, sub access.Subject, kbID string, fileIDs []string) ([]string, error) {
	if len(fileIDs) == 0 || len(fileIDs) > maxBatch {
		return nil, failure.Unprocessable("invalid_file_ids", "file_ids must list 1 to 1000 files")
	}
	var removed Removed
	err := pgx.BeginFunc(ctx, l.store.pool, func(tx pgx.Tx) error {
		var err error
		removed, err = l.RemoveFilesTx(ctx, tx, sub, kbID, fileIDs)
		return err
	})
	if err != nil {
		return nil, err
	}
	l.cleanup(context.WithoutCancel(ctx), kbID, removed)
	deleted := make([]string, 0, len(removed.Files))
	for _, f := range removed.Files {
		deleted = append(deleted, f.FileID)
	}
	return deleted, nil
}

// RemoveFilesTx is RemoveFiles' transaction; the caller deletes the returned
// objects and flushes the owed vectors (FlushVectorDeletes) after commit.
func (l *Library) RemoveFilesTx(ctx context.Context, tx pgx.Tx, sub access.Subject, kbID string, fileIDs []string) (Removed, error) {
	if _, err := l.store.GetDocumentsTx(ctx, tx, sub, kbID); err != nil {
		return Removed{}, err
	}
	return l.store.DeleteFilesTx(ctx, tx, l.keyword, kbID, fileIDs)
}

// cleanup deletes what a committed deletion left in kbID: the vectors owed,
// the vectors of the graph entities and triples it orphaned, then the
// objects. What fails stays for the sweep (chunk vectors), for reconcile's
// all_vectors (graph vectors: they are not recorded, so a crash between the
// commit and here leaves them too; recall ignores ids no longer in the
// graph), or is logged. Deleting graph vectors is idempotent (unknown ids
// and a missing collection are no error).
func (l *Library) cleanup(ctx context.Context, kbID string, r Removed) {
	if l.vectors != nil {
		if _, err := l.store.FlushVectorDeletes(ctx, l.vectors, kbID); err != nil {
			l.log.Warn("delete vectors (the sweep retries)", "kb", kbID, "error", err)
		}
		if len(r.GraphVectorIDs) > 0 {
			if err := l.vectors.Delete(ctx, GraphCollection(kbID), r.GraphVectorIDs); err != nil {
				l.log.Warn("delete orphaned graph vectors (reconcile all_vectors removes them)", "kb", kbID, "error", err)
			}
		}
	}
	for _, k := range r.ObjectKeys {
		if err := l.objects.Delete(ctx, k); err != nil {
			l.log.Warn("delete object", "key", k, "error", err)
		}
	}
}

// Restage sends settled files of kbID, which sub must manage, back to a
// stage — StatusUploaded (parse again) or StatusParsed (index again, with
// chunking settings params when given) — and reports each file (see
// Store.RestageTx).
func (l *Library) Restage(ctx context.Context, sub access.Subject, kbID string, fileIDs []string, to string,
	params json.RawMessage) ([]map[string]any, error) {
	if len(fileIDs) == 0 || len(fileIDs) > maxBatch {
		return nil, failure.Unprocessable("invalid_file_ids", "file_ids must list 1 to 1000 files")
	}
	var chunking json.RawMessage
	if len(params) > 0 && string(params) != "null" {
		if _, err := ResolveChunking(params); err != nil {
			return nil, err
		}
		chunking = params
	}
	var out []map[string]any
	err := l.ob.Tx(ctx, l.store.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		out, err = l.RestageTx(ctx, tx, emit, sub, kbID, fileIDs, to, chunking)
		return err
	})
	return out, err
}

// RestageTx is Restage in the caller's transaction, chunking already checked.
func (l *Library) RestageTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, sub access.Subject, kbID string, fileIDs []string,
	to string, chunking json.RawMessage) ([]map[string]any, error) {
	if _, err := l.store.GetDocumentsTx(ctx, tx, sub, kbID); err != nil {
		return nil, err
	}
	return l.store.RestageTx(ctx, tx, emit, kbID, fileIDs, to, chunking)
}

// RestagePending sends every file of kbID, which sub must manage, that waits
// for stage to — a parse (StatusUploaded: PendingParseStatuses) or indexing
// (StatusParsed: PendingIndexStatuses, with chunking settings params when
// given) — to it, and returns how many it sent.
func (l *Library) RestagePending(ctx context.Context, sub access.Subject, kbID, to string, params json.RawMessage) (int, error) {
	statuses := PendingParseStatuses
	var chunking json.RawMessage
	if to == StatusParsed {
		statuses = PendingIndexStatuses
		if len(params) > 0 && string(params) != "null" && string(params) != "{}" {
			if _, err := ResolveChunking(params); err != nil {
				return 0, err
			}
			chunking = params
		}
	}
	if _, err := l.store.GetDocuments(ctx, sub, kbID); err != nil {
		return 0, err
	}
	return l.store.restagePending(ctx, func(fn func(pgx.Tx, outbox.Emit) error) error {
		return l.ob.Tx(ctx, l.store.pool, fn)
	}, kbID, statuses, to, chunking)
}
