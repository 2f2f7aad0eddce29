package kb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/blob/notify"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Source binds a bucket (and key prefix) to a KB: objects created there are
// ingested, objects deleted there are removed.
type Source struct {
	ID        int64     `json:"id"`
	KBID      string    `json:"kb_id"`
	Provider  string    `json:"provider"` // s3 | gcs
	Bucket    string    `json:"bucket"`
	Prefix    string    `json:"prefix"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// Verification: notifications reach the KB only once the binder proved
	// write access to the bucket by writing VerifyToken to VerifyKey there
	// and calling POST …/sources/{id}/verify (VerifiedAt is then set).
	VerifyKey   string     `json:"verification_key"`
	VerifyToken string     `json:"verification_token"`
	VerifiedAt  *time.Time `json:"verified_at"`
}

// sourceCols are the columns scanSource reads.
const sourceCols = `id, kb_id, provider, bucket, prefix, created_by, created_at, verify_token, verified_at`

func scanSource(row pgx.Row) (Source, error) {
	var src Source
	err := row.Scan(&src.ID, &src.KBID, &src.Provider, &src.Bucket, &src.Prefix, &src.CreatedBy, &src.CreatedAt, &src.VerifyToken, &src.VerifiedAt)
	src.VerifyKey = VerifyKey(src.Prefix, src.ID)
	return src, err
}

// VerifyKey is the object a binder writes to prove write access to the
// bucket of source id: under its prefix, so that a prefix-scoped writer
// can prove it too.
func VerifyKey(prefix string, id int64) string {
	return prefix + ".yuxi-verify-" + strconv.FormatInt(id, 10)
}

// SourceURI names an object of a bound bucket: "s3://bucket/key".
func SourceURI(provider, bucket, key string) string { return provider + "://" + bucket + "/" + key }

// ParseSourceURI splits a source URI.
func ParseSourceURI(uri string) (provider, bucket, key string, err error) {
	p, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "", "", "", fmt.Errorf("bad source uri %q", uri)
	}
	b, k, ok := strings.Cut(rest, "/")
	if !ok || b == "" || k == "" {
		return "", "", "", fmt.Errorf("bad source uri %q", uri)
	}
	return p, b, k, nil
}

// AddSource binds a bucket to a KB sub manages.
func (s *Store) AddSource(ctx context.Context, sub access.Subject, kbID, provider, bucket, prefix string) (Source, error) {
	if _, err := s.GetDocuments(ctx, sub, kbID); err != nil {
		return Source{}, err
	}
	if provider != "s3" && provider != "gcs" {
		return Source{}, failure.Unprocessable("invalid_source", "provider must be s3 or gcs")
	}
	if bucket == "" || len(bucket) > 255 || strings.ContainsAny(bucket, "/ ") {
		return Source{}, failure.Unprocessable("invalid_source", "bucket must be a bucket name")
	}
	prefix = strings.TrimPrefix(prefix, "/")
	if len(prefix) > 1024 || strings.Contains(prefix, "..") {
		return Source{}, failure.Unprocessable("invalid_source", "prefix must be a key prefix")
	}
	token := make([]byte, 24)
	if _, err := rand.Read(token); err != nil {
		return Source{}, err
	}
	return scanSource(s.pool.QueryRow(ctx, `INSERT INTO knowledge_sources (kb_id, provider, bucket, prefix, created_by, verify_token)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (kb_id, provider, bucket, prefix) DO UPDATE SET created_by = knowledge_sources.created_by
		RETURNING `+sourceCols, kbID, provider, bucket, prefix, sub.UID, hex.EncodeToString(token)))
}

// Sources lists a KB's bindings (read access).
func (s *Store) Sources(ctx context.Context, sub access.Subject, kbID string) ([]Source, error) {
	if _, err := s.Get(ctx, sub, kbID); err != nil {
		return nil, err
	}
	return sourcesWhere(ctx, s.pool, `kb_id = $1`, kbID)
}

// RemoveSource unbinds a bucket (files already ingested stay).
func (s *Store) RemoveSource(ctx context.Context, sub access.Subject, kbID string, id int64) error {
	if _, err := s.GetDocuments(ctx, sub, kbID); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM knowledge_sources WHERE kb_id = $1 AND id = $2`, kbID, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return failure.NotFound("source_not_found", "source %d not found", id)
	}
	return nil
}

func sourcesWhere(ctx context.Context, db postgres.DB, where string, args ...any) ([]Source, error) {
	rows, err := db.Query(ctx, `SELECT `+sourceCols+` FROM knowledge_sources WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Source{}
	for rows.Next() {
		src, err := scanSource(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, rows.Err()
}

// BucketChange is the platform event for one decoded bucket notification,
// with its deduplication key: a redelivered notification is one event. The
// notification's own id is part of the key, so an object deleted and written
// again with the same content (same ETag, no version id) is news.
func BucketChange(c notify.Change) (events.BucketObjectChanged, string) {
	ev := events.BucketObjectChanged{Provider: c.Provider, Bucket: c.Bucket, Key: c.Key, Size: c.Size, ETag: c.ETag,
		Version: c.Version, Op: c.Op}
	if !c.Time.IsZero() {
		ev.Time = c.Time.UTC().Format(time.RFC3339Nano)
	}
	key := fmt.Sprintf("bucket:%s:%s:%s:%s:%s:%s:%s", c.Provider, c.Bucket, c.Key, c.Version, c.ETag, c.Op, c.EventID)
	if len(key) > 1000 {
		sum := sha256.Sum256([]byte(key))
		key = "bucket:" + hex.EncodeToString(sum[:])
	}
	return ev, key
}

// ChangeOutcome reports what a bucket change did to one KB.
type ChangeOutcome struct {
	KBID   string `json:"kb_id"`
	FileID string `json:"file_id,omitempty"`
	Action string `json:"action"` // added | updated | unchanged | deleted | ignored
	Reason string `json:"reason,omitempty"`
}

// ApplyChangeTx ingests or removes a bucket object for every KB bound to its
// bucket and prefix, in tx (Library.ApplyBucketChange runs it in its own). It is idempotent: a repeated notification of the
// same object version changes nothing; a new version re-parses the file
// (unchanged chunks keep their ids and vectors). supported tells whether an
// object's file name can be parsed. Deleted files are returned for the
// caller's post-commit cleanup.
func (s *Store) ApplyChangeTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, kw KeywordWriter, ch events.BucketObjectChanged,
	supported func(filename string) bool) ([]ChangeOutcome, []Removed, error) {
	// Only bindings that proved write access to the bucket (VerifySource)
	// receive its notifications: binding another department's bucket
	// ingests nothing.
	sources, err := sourcesWhere(ctx, tx, `provider = $1 AND bucket = $2 AND starts_with($3, prefix) AND verified_at IS NOT NULL`,
		ch.Provider, ch.Bucket, ch.Key)
	if err != nil {
		return nil, nil, err
	}
	uri := SourceURI(ch.Provider, ch.Bucket, ch.Key)
	if len(sources) > 0 {
		// Notifications of one object are applied one at a time: concurrent
		// first deliveries would otherwise both insert the file, and all
		// but one fail on knowledge_files_source.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('kb-source:' || $1, 0))`, uri); err != nil {
			return nil, nil, err
		}
	}
	version := ch.Version
	if version == "" {
		version = ch.ETag
	}
	var out []ChangeOutcome
	var removed []Removed
	seen := map[string]bool{}
	for _, src := range sources {
		if seen[src.KBID] {
			continue // two prefixes of one KB match: one file
		}
		seen[src.KBID] = true
		var cur *File
		f, err := scanFile(tx.QueryRow(ctx, `SELECT `+fileCols+` FROM knowledge_files WHERE kb_id = $1 AND source_uri = $2 FOR UPDATE`, src.KBID, uri))
		if err == nil {
			cur = &f
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, err
		}
		if ch.Op == "deleted" {
			if cur == nil {
				out = append(out, ChangeOutcome{KBID: src.KBID, Action: "ignored", Reason: "not ingested"})
				continue
			}
			if newerGenerationHeld(ch, cur) {
				out = append(out, ChangeOutcome{KBID: src.KBID, FileID: cur.FileID, Action: "ignored", Reason: "a newer generation is ingested"})
				continue
			}
			r, err := s.DeleteFilesTx(ctx, tx, kw, src.KBID, []string{cur.FileID})
			if err != nil {
				return nil, nil, err
			}
			removed = append(removed, r)
			out = append(out, ChangeOutcome{KBID: src.KBID, FileID: cur.FileID, Action: "deleted"})
			continue
		}
		name := path.Base(ch.Key)
		if !supported(name) {
			out = append(out, ChangeOutcome{KBID: src.KBID, Action: "ignored", Reason: "unsupported file type"})
			continue
		}
		if cur != nil {
			if cur.SourceVersion != nil && *cur.SourceVersion == version && version != "" {
				out = append(out, ChangeOutcome{KBID: src.KBID, FileID: cur.FileID, Action: "unchanged"})
				continue
			}
			// A new version: parse again from the start.
			if _, err := tx.Exec(ctx, `UPDATE knowledge_files SET status = 'uploaded', source_version = NULLIF($2, ''), file_size = $3,
				error_message = NULL, stage_started_at = NULL, stage_attempts = 0, updated_at = clock_timestamp() WHERE file_id = $1`,
				cur.FileID, version, ch.Size); err != nil {
				return nil, nil, err
			}
			if err := emit(outbox.Pending{Payload: events.DocumentUploaded{KBID: src.KBID, FileID: cur.FileID},
				DedupeKey: fmt.Sprintf("uploaded:%s:v:%s", cur.FileID, version)}); err != nil {
				return nil, nil, err
			}
			out = append(out, ChangeOutcome{KBID: src.KBID, FileID: cur.FileID, Action: "updated"})
			continue
		}
		files, err := s.AddFilesTx(ctx, tx, emit, src.KBID, []NewFile{{Filename: name, ObjectKey: uri, Size: ch.Size,
			Source: "bucket", SourceURI: uri, Version: version, CreatedBy: src.CreatedBy, Processing: Processing{AutoIndex: true}}})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, ChangeOutcome{KBID: src.KBID, FileID: files[0].FileID, Action: "added"})
	}
	return out, removed, nil
}

// newerGenerationHeld reports a Cloud Storage deletion of an older generation
// than the one ingested: GCS notifies the overwritten generation as deleted
// when an object is overwritten, before or after the new one's finalize.
// (S3 version ids are not ordered, and a delete marker's id is not the
// deleted object's, so S3 deletions always apply.)
func newerGenerationHeld(ch events.BucketObjectChanged, cur *File) bool {
	if ch.Provider != "gcs" || cur.SourceVersion == nil {
		return false
	}
	held, err := strconv.ParseInt(*cur.SourceVersion, 10, 64)
	if err != nil {
		return false
	}
	deleted, err := strconv.ParseInt(ch.Version, 10, 64)
	return err == nil && held > deleted
}

// Buckets opens a bound bucket for reading (the platform's source
// credentials); VerifySource reads the verification object through it.
type Buckets interface {
	Open(provider, bucket string) (blob.Store, error)
}

// ErrSourceUnverified: the verification object is missing or holds another token.
var ErrSourceUnverified = failure.Unprocessable("source_unverified",
	"the bucket does not hold the verification object with this source's token")

// VerifySource checks that the bucket of source id holds the source's
// verification object (VerifyKey, content VerifyToken) and marks the source
// verified: from then on the bucket's notifications reach the KB. Writing
// that object proves the binder may write to the bucket; another
// department's admin who binds the bucket cannot.
func (l *Library) VerifySource(ctx context.Context, sub access.Subject, kbID string, id int64) (Source, error) {
	if _, err := l.store.GetDocuments(ctx, sub, kbID); err != nil {
		return Source{}, err
	}
	src, err := scanSource(l.store.pool.QueryRow(ctx, `SELECT `+sourceCols+` FROM knowledge_sources WHERE kb_id = $1 AND id = $2`, kbID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Source{}, failure.NotFound("source_not_found", "source %d not found", id)
	}
	if err != nil {
		return Source{}, err
	}
	if l.buckets == nil {
		return Source{}, failure.New(failure.KindUnavailable, "buckets_not_configured", "this process cannot read bound buckets")
	}
	store, err := l.buckets.Open(src.Provider, src.Bucket)
	if err != nil {
		return Source{}, fmt.Errorf("open bucket %s: %w", src.Bucket, err)
	}
	rc, _, err := store.Get(ctx, src.VerifyKey)
	if errors.Is(err, blob.ErrNotFound) {
		return Source{}, ErrSourceUnverified.With(map[string]any{"verification_key": src.VerifyKey})
	}
	if err != nil {
		return Source{}, failure.Unprocessable("source_unreachable", "cannot read %s from bucket %s: %v", src.VerifyKey, src.Bucket, err)
	}
	body, err := io.ReadAll(io.LimitReader(rc, 4096))
	rc.Close()
	if err != nil {
		return Source{}, failure.Unprocessable("source_unreachable", "cannot read %s from bucket %s: %v", src.VerifyKey, src.Bucket, err)
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(string(body))), []byte(src.VerifyToken)) != 1 {
		return Source{}, ErrSourceUnverified.With(map[string]any{"verification_key": src.VerifyKey})
	}
	return scanSource(l.store.pool.QueryRow(ctx, `UPDATE knowledge_sources SET verified_at = COALESCE(verified_at, now())
		WHERE id = $1 RETURNING `+sourceCols, id))
}
