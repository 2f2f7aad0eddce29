// Package parsedoc is the handler of the doc-parse function: it turns a
// stored file into Markdown (plus extracted images) and, for files to be
// indexed, hands it on to kb-index. It also applies bucket notifications:
// objects created in a bound bucket become files, deleted objects are removed.
//
// The file's status moves uploaded → parsing → parsed | error_parsing. The
// parsing stage is a lease on the file row: a redelivered event finds it held
// or done and does nothing; a worker that died leaves a stale stage that the
// next delivery (or the dispatcher's sweep) takes over. Bad input (corrupt,
// encrypted, empty, unsupported) ends in error_parsing with its message and is
// acknowledged; passing faults are retried, a bounded number of times.
//
// Imported by: functions/doc-parse (main), infra/local, tests.
// May import: events, shared/*, the CloudEvents SDK (not pgx: kb.Store and
// kb.Library own the transactions).
package parsedoc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/blob/notify"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// Parser turns a document into Markdown.
type Parser interface {
	Parse(ctx context.Context, filename string, r io.ReaderAt, size int64) (docparse.Result, error)
}

// Buckets opens a bound bucket for reading.
type Buckets interface {
	Open(provider, bucket string) (blob.Store, error)
}

// Notifier announces file status changes to watchers of a KB.
type Notifier = kb.Notifier

// Config tunes the handler.
type Config struct {
	Lease       time.Duration // parsing stage lease (default 15 min)
	MaxBytes    int64         // largest file parsed (default 100 MiB)
	MaxAttempts int           // passing faults retried this often, then error_parsing (default 5)
	Crash       func(point string)
}

// Handler handles document.uploaded and bucket notifications.
type Handler struct {
	kbs     *kb.Store
	store   blob.Store
	buckets Buckets
	parser  Parser
	lib     *kb.Library
	stage   kb.Stage
	cfg     Config
	log     *slog.Logger
}

// New returns the handler. buckets and notify may be nil.
func New(kbs *kb.Store, ob *outbox.Outbox, store blob.Store, buckets Buckets, parser Parser, kw kb.KeywordIndex,
	vectors kb.VectorStore, notify Notifier, cfg Config, log *slog.Logger) *Handler {
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Minute
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 100 << 20
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if log == nil {
		log = slog.Default()
	}
	return &Handler{kbs: kbs, store: store, buckets: buckets, parser: parser, cfg: cfg, log: log,
		lib:   kb.NewLibrary(kb.LibraryDeps{Store: kbs, Objects: store, Outbox: ob, Keyword: kw, Vectors: vectors, Log: log}),
		stage: kb.Stage{Store: kbs, Notify: notify, MaxAttempts: cfg.MaxAttempts, Log: log}}
}

// Register adds the handlers to a function router.
func (h *Handler) Register(r *faas.Router) {
	faas.On(r, h.Uploaded)
	faas.On(r, h.BucketChanged)
	faas.OnType(r, events.TypeGCSObjectFinalized, h.gcs("created"))
	faas.OnType(r, events.TypeGCSObjectDeleted, h.gcs("deleted"))
	r.Translate(Translate)
}

// Translate reads bucket notifications the cloud delivers to the function
// itself rather than to the webhook — S3 event records invoking a Lambda
// function directly or through SQS or SNS, EventBridge "Object Created" /
// "Object Deleted" events — as bucket changes (see faas.Translator).
func Translate(raw []byte) ([]cloudevents.Event, bool, error) {
	changes, err := notify.Decode(raw)
	if errors.Is(err, notify.ErrUnknownFormat) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	out := make([]cloudevents.Event, 0, len(changes))
	for _, c := range changes {
		p, key := kb.BucketChange(c)
		ev, err := events.New(events.Source("doc-parse"), key, p, "")
		if err != nil {
			return nil, true, err
		}
		out = append(out, ev)
	}
	return out, true, nil
}

func (h *Handler) crash(point string) {
	if h.cfg.Crash != nil {
		h.cfg.Crash(point)
	}
}

// Uploaded parses one file.
func (h *Handler) Uploaded(ctx context.Context, in events.DocumentUploaded) error {
	f, err := h.kbs.ClaimParse(ctx, in.FileID, h.cfg.Lease)
	switch {
	case errors.Is(err, kb.ErrFileNotFound):
		return nil // deleted meanwhile
	case errors.Is(err, kb.ErrBusy), errors.Is(err, kb.ErrNotReady):
		return nil // another delivery holds it, or it is past this stage
	case err != nil:
		return err
	}
	h.stage.Status(ctx, f, kb.StatusParsing, "")
	h.crash("parse.claimed")
	res, err := h.parse(ctx, f)
	if err != nil {
		return h.stage.Fail(ctx, f, err)
	}
	mdKey, imgs, err := h.save(ctx, f, res)
	if err != nil {
		return h.stage.Fail(ctx, f, err)
	}
	h.crash("parse.before_commit")
	err = h.lib.FinishParse(ctx, f, mdKey, imgs)
	if errors.Is(err, kb.ErrStageLost) {
		return h.lost(ctx, f, mdKey, imgs)
	}
	if err != nil {
		return h.stage.Fail(ctx, f, err)
	}
	h.stage.Status(ctx, f, kb.StatusParsed, "")
	return nil
}

// lost cleans up after a parse whose file changed hands before its commit.
// If another attempt holds the file, it writes the same keys: they stay. If
// the file is gone, the objects just written are deleted, and if its KB is
// gone (perhaps purged already) its purge is owed again.
func (h *Handler) lost(ctx context.Context, f kb.File, mdKey string, imgs []kb.Image) error {
	if _, err := h.kbs.LoadFile(ctx, f.FileID); !errors.Is(err, kb.ErrFileNotFound) {
		return nil
	}
	if owed, err := h.kbs.OwePurgeIfGone(ctx, f.KBID); err != nil || owed {
		return err
	}
	keys := []string{mdKey}
	for _, im := range imgs {
		keys = append(keys, im.ObjectKey)
	}
	for _, k := range keys {
		if err := h.store.Delete(ctx, k); err != nil {
			h.log.Warn("delete the objects of a deleted file", "key", k, "error", err)
		}
	}
	return nil
}

// parse reads the object and parses it.
func (h *Handler) parse(ctx context.Context, f kb.File) (docparse.Result, error) {
	if f.ObjectKey == nil {
		return docparse.Result{}, failure.Unprocessable("object_missing", "the file has no stored object")
	}
	src := h.store
	key := *f.ObjectKey
	if f.Source == "bucket" {
		provider, bucket, k, err := kb.ParseSourceURI(key)
		if err != nil {
			return docparse.Result{}, failure.Unprocessable("object_missing", "%v", err)
		}
		if h.buckets == nil {
			return docparse.Result{}, failure.Unprocessable("bucket_not_configured", "no access to %s buckets is configured", provider)
		}
		if src, err = h.buckets.Open(provider, bucket); err != nil {
			return docparse.Result{}, err
		}
		key = k
	}
	rc, info, err := src.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return docparse.Result{}, failure.Unprocessable("object_missing", "the stored object %s is gone", key)
	}
	if err != nil {
		return docparse.Result{}, fmt.Errorf("read %s: %w", key, err)
	}
	defer rc.Close()
	if info.Size > h.cfg.MaxBytes {
		return docparse.Result{}, failure.New(failure.KindTooLarge, "file_too_large", "the file has %d bytes; the limit is %d", info.Size, h.cfg.MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(rc, h.cfg.MaxBytes+1))
	if err != nil {
		return docparse.Result{}, fmt.Errorf("read %s: %w", key, err)
	}
	if int64(len(data)) > h.cfg.MaxBytes {
		return docparse.Result{}, failure.New(failure.KindTooLarge, "file_too_large", "the file is larger than %d bytes", h.cfg.MaxBytes)
	}
	return h.parser.Parse(ctx, f.Filename, bytes.NewReader(data), int64(len(data)))
}

// save writes the Markdown and images (at kb.MarkdownKey and kb.ImageKey);
// image links point at the authorised image route (kb.ImageURL).
func (h *Handler) save(ctx context.Context, f kb.File, res docparse.Result) (string, []kb.Image, error) {
	md := res.Markdown
	var imgs []kb.Image
	for i, im := range res.Images {
		name := path.Base(strings.ReplaceAll(im.Name, "\\", "/"))
		if name == "" || name == "." || name == "/" {
			name = fmt.Sprintf("image-%d", i+1)
		}
		key := kb.ImageKey(f.KBID, f.FileID, i+1, name)
		if _, err := h.store.Put(ctx, key, bytes.NewReader(im.Data), int64(len(im.Data)), im.ContentType); err != nil {
			return "", nil, fmt.Errorf("store image %s: %w", im.Name, err)
		}
		imgs = append(imgs, kb.Image{ObjectKey: key, ContentType: im.ContentType, Size: int64(len(im.Data))})
		// The parser links images by name: "](name)", "](<name>)" for names
		// with spaces or parentheses, or an HTML src attribute.
		link := kb.ImageURL(f.KBID, key)
		md = strings.NewReplacer("]("+im.Name+")", "]("+link+")", "](<"+im.Name+">)", "]("+link+")",
			`src="`+im.Name+`"`, `src="`+link+`"`).Replace(md)
	}
	key := kb.MarkdownKey(f.KBID, f.FileID)
	if _, err := h.store.Put(ctx, key, strings.NewReader(md), int64(len(md)), "text/markdown; charset=utf-8"); err != nil {
		return "", nil, fmt.Errorf("store markdown: %w", err)
	}
	return key, imgs, nil
}

// BucketChanged applies a bucket notification to every KB bound to the bucket.
// The bucket is asked first whether the notification still holds:
// notifications arrive late, out of order and more than once, and a deletion
// of an object that exists again (or never went) must not empty the index.
func (h *Handler) BucketChanged(ctx context.Context, in events.BucketObjectChanged) error {
	if reason, err := h.outdated(ctx, in); err != nil {
		return err
	} else if reason != "" {
		h.log.Info("bucket change ignored", "provider", in.Provider, "bucket", in.Bucket, "key", in.Key, "op", in.Op, "reason", reason)
		return nil
	}
	outcomes, err := h.lib.ApplyBucketChange(ctx, in, supported)
	for _, o := range outcomes {
		h.log.Info("bucket change applied", "provider", in.Provider, "bucket", in.Bucket, "key", in.Key, "op", in.Op,
			"kb", o.KBID, "file", o.FileID, "action", o.Action, "reason", o.Reason)
	}
	return err
}

// outdated checks a bucket change against the bucket: a deletion of an
// object that exists, or a creation of one that is gone, is outdated (the
// later notification of the object's current state does the work). Without
// access to the bucket, or a definite answer from it, the notification is
// taken as it is.
func (h *Handler) outdated(ctx context.Context, in events.BucketObjectChanged) (string, error) {
	if h.buckets == nil {
		return "", nil
	}
	src, err := h.buckets.Open(in.Provider, in.Bucket)
	if err != nil {
		return "", nil //nolint:nilerr // no access: parsing reports it for a creation; a deletion applies
	}
	_, err = src.Stat(ctx, in.Key)
	gone := errors.Is(err, blob.ErrNotFound)
	switch {
	case err == nil && in.Op == "deleted":
		return "the object still exists", nil
	case gone && in.Op != "deleted":
		return "the object is gone", nil
	case err != nil && !gone:
		// No definite answer — S3 answers 403, not 404, for a missing key
		// to a reader without s3:ListBucket — so the notification is taken
		// as it is, as it would be without access to the bucket.
		h.log.Warn("bucket change not checked against the bucket", "bucket", in.Bucket, "key", in.Key, "op", in.Op, "error", err)
	}
	return "", nil
}

// gcs adapts a Cloud Storage object event to a bucket change.
func (h *Handler) gcs(op string) func(ctx context.Context, in events.GCSObject) error {
	return func(ctx context.Context, in events.GCSObject) error {
		if strings.HasSuffix(in.Name, "/") {
			return nil // a folder placeholder
		}
		var size int64
		_, _ = fmt.Sscan(in.Size, &size)
		return h.BucketChanged(ctx, events.BucketObjectChanged{Provider: "gcs", Bucket: in.Bucket, Key: in.Name, Size: size,
			ETag: in.ETag, Version: in.Generation, Op: op, Time: in.Updated})
	}
}

// supported tells whether a file name has a parseable extension.
func supported(filename string) bool {
	ext := strings.ToLower(path.Ext(filename))
	for _, e := range docparse.SupportedExtensions() {
		if e == ext {
			return true
		}
	}
	return false
}
