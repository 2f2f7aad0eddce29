package kb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// File statuses.
const (
	StatusUploaded      = "uploaded"
	StatusParsing       = "parsing"
	StatusParsed        = "parsed"
	StatusErrorParsing  = "error_parsing"
	StatusIndexing      = "indexing"
	StatusIndexed       = "indexed"
	StatusErrorIndexing = "error_indexing"
)

// File is a knowledge_files row.
type File struct {
	FileID           string          `json:"file_id"`
	KBID             string          `json:"kb_id"`
	ParentID         *string         `json:"parent_id"`
	Filename         string          `json:"filename"`
	OriginalFilename string          `json:"original_filename"`
	FileType         string          `json:"file_type"`
	ObjectKey        *string         `json:"-"`
	MarkdownKey      *string         `json:"-"`
	ContentHash      *string         `json:"content_hash"`
	FileSize         *int64          `json:"file_size"`
	ContentType      *string         `json:"content_type"`
	Status           string          `json:"status"`
	ErrorMessage     *string         `json:"error_message"`
	ChunkCount       int             `json:"chunk_count"`
	TokenCount       int             `json:"token_count"`
	ProcessingParams json.RawMessage `json:"processing_params"`
	IsFolder         bool            `json:"is_folder"`
	Source           string          `json:"source"`
	SourceURI        *string         `json:"source_uri"`
	SourceVersion    *string         `json:"-"`
	StageStartedAt   *time.Time      `json:"-"`
	StageAttempts    int             `json:"stage_attempts"`
	CreatedBy        *string         `json:"created_by"`
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
	// IngestBatch is the ingestion batch (task) the file was last sent
	// through; nil: none.
	IngestBatch *string `json:"-"`
}

const fileCols = `file_id, kb_id, parent_id, filename, original_filename, file_type, object_key, markdown_key, content_hash,
	file_size, content_type, status, error_message, chunk_count, token_count, processing_params, is_folder, source,
	source_uri, source_version, stage_started_at, stage_attempts, created_by, created_at, updated_at, ingest_batch`

func scanFile(row pgx.Row) (File, error) {
	var f File
	err := row.Scan(&f.FileID, &f.KBID, &f.ParentID, &f.Filename, &f.OriginalFilename, &f.FileType, &f.ObjectKey, &f.MarkdownKey,
		&f.ContentHash, &f.FileSize, &f.ContentType, &f.Status, &f.ErrorMessage, &f.ChunkCount, &f.TokenCount, &f.ProcessingParams,
		&f.IsFolder, &f.Source, &f.SourceURI, &f.SourceVersion, &f.StageStartedAt, &f.StageAttempts, &f.CreatedBy, &f.CreatedAt, &f.UpdatedAt, &f.IngestBatch)
	return f, err
}

func queryFiles(ctx context.Context, db postgres.DB, sql string, args ...any) ([]File, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []File{}
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// LoadFile reads a file by id, without an access check.
func (s *Store) LoadFile(ctx context.Context, fileID string) (File, error) {
	f, err := scanFile(s.pool.QueryRow(ctx, `SELECT `+fileCols+` FROM knowledge_files WHERE file_id = $1`, fileID))
	if errors.Is(err, pgx.ErrNoRows) {
		return File{}, ErrFileNotFound
	}
	return f, err
}

// GetFile returns a file of a KB sub may read.
func (s *Store) GetFile(ctx context.Context, sub access.Subject, kbID, fileID string) (KB, File, error) {
	k, err := s.Get(ctx, sub, kbID)
	if err != nil {
		return KB{}, File{}, err
	}
	f, err := s.LoadFile(ctx, fileID)
	if err != nil || f.KBID != kbID {
		return KB{}, File{}, ErrFileNotFound
	}
	return k, f, nil
}

// Processing is a file's processing_params.
type Processing struct {
	AutoIndex bool            `json:"auto_index"`
	Chunking  json.RawMessage `json:"chunking,omitempty"`
	OCREngine string          `json:"ocr_engine,omitempty"`
}

// Processing decodes the file's processing_params.
func (f File) Processing() Processing {
	p := Processing{AutoIndex: true}
	_ = json.Unmarshal(f.ProcessingParams, &p)
	return p
}

// NewFile describes a file to register.
type NewFile struct {
	Filename    string
	ObjectKey   string
	ContentHash string
	Size        int64
	ContentType string
	ParentID    *string
	Source      string // upload (default) | bucket
	SourceURI   string
	Version     string
	CreatedBy   string
	Processing  Processing
	// Batch is the ingestion batch (task id, GET /api/tasks/{task_id}) the
	// file is registered in; empty: none (documents/add, bucket files).
	Batch string
}

// AddFilesTx registers stored objects as files of kbID (status uploaded) and
// emits document.uploaded for each, in tx. The same content twice in one KB
// is a conflict (409 duplicate_content), as in the original. Library.Register
// is the use case in its own transaction.
func (s *Store) AddFilesTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, kbID string, files []NewFile) ([]File, error) {
	out := make([]File, 0, len(files))
	for _, nf := range files {
		name := path.Base(strings.ReplaceAll(nf.Filename, "\\", "/"))
		if name == "" || name == "." || name == "/" || len(name) > 255 {
			return nil, failure.Unprocessable("invalid_filename", "invalid file name %q", nf.Filename)
		}
		if nf.ParentID != nil {
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM knowledge_files WHERE file_id = $1 AND kb_id = $2 AND is_folder)`,
				*nf.ParentID, kbID).Scan(&ok); err != nil {
				return nil, err
			}
			if !ok {
				return nil, failure.NotFound("folder_not_found", "parent folder %s not found in this knowledge base", *nf.ParentID)
			}
		}
		proc, _ := json.Marshal(nf.Processing)
		source := nf.Source
		if source == "" {
			source = "upload"
		}
		f, err := scanFile(tx.QueryRow(ctx, `INSERT INTO knowledge_files (file_id, kb_id, parent_id, filename, original_filename,
			file_type, object_key, content_hash, file_size, content_type, status, processing_params, source, source_uri,
			source_version, created_by, ingest_batch)
			VALUES ($1, $2, $3, lower($4), $4, $5, $6, NULLIF($7, ''), $8, NULLIF($9, ''), 'uploaded', $10, $11, NULLIF($12, ''), NULLIF($13, ''), $14,
			NULLIF($15, ''))
			RETURNING `+fileCols,
			newID("file_"), kbID, nf.ParentID, name, strings.TrimPrefix(strings.ToLower(path.Ext(name)), "."), nf.ObjectKey,
			nf.ContentHash, nf.Size, nf.ContentType, proc, source, nf.SourceURI, nf.Version, nf.CreatedBy, nf.Batch))
		if postgres.IsUniqueViolation(err, "knowledge_files_content") {
			return nil, failure.Conflict("duplicate_content", "a file with the same content as %q is already in this knowledge base", name)
		}
		if err != nil {
			return nil, fmt.Errorf("add file %s: %w", name, err)
		}
		if err := emit(outbox.Pending{Payload: events.DocumentUploaded{KBID: kbID, FileID: f.FileID},
			DedupeKey: fmt.Sprintf("uploaded:%s:0", f.FileID)}); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if _, err := tx.Exec(ctx, `UPDATE knowledge_bases SET updated_at = now() WHERE kb_id = $1`, kbID); err != nil {
		return nil, err
	}
	return out, nil
}

// Claim results.
var (
	// ErrBusy: another worker holds the file's stage (its lease has not expired).
	ErrBusy = errors.New("file stage is held by another worker")
	// ErrNotReady: the file is not in a state this stage starts from.
	ErrNotReady = errors.New("file is not ready for this stage")
)

// ClaimParse moves an uploaded file (or one whose parsing worker died: its
// stage is older than lease) to parsing. It returns the claimed file, whose
// StageAttempts and StageStartedAt fence the stage's completion: FinishParseTx,
// FailStage and ReleaseStage act only while the file is still in the stage
// that claim started.
//
// StageAttempts counts the attempts of the current stage (the retry budget
// of the functions and the sweep): claims and reclaims increment it,
// ReleaseStage keeps it, and a stage's completion (FinishParseTx,
// CommitIndexTx) or a RestageTx starts the next stage's count from zero.
// Because the count restarts, it alone cannot tell one stage's attempt 1
// from a later stage's attempt 1; StageStartedAt (set by every claim) can.
func (s *Store) ClaimParse(ctx context.Context, fileID string, lease time.Duration) (File, error) {
	return s.claim(ctx, fileID, StatusParsing, []string{StatusUploaded}, lease)
}

// ClaimIndex moves a parsed file (or one whose indexing worker died) to indexing.
func (s *Store) ClaimIndex(ctx context.Context, fileID string, lease time.Duration) (File, error) {
	return s.claim(ctx, fileID, StatusIndexing, []string{StatusParsed}, lease)
}

func (s *Store) claim(ctx context.Context, fileID, to string, from []string, lease time.Duration) (File, error) {
	// A cancelled batch's file starts no new stage; a stage already running
	// (and taken over after its lease) finishes.
	f, err := scanFile(s.pool.QueryRow(ctx, `UPDATE knowledge_files SET status = $2, stage_started_at = clock_timestamp(),
		stage_attempts = stage_attempts + 1, error_message = NULL, updated_at = clock_timestamp()
		WHERE file_id = $1 AND NOT is_folder
		  AND ((status = ANY($3) AND ingest_cancelled_at IS NULL) OR (status = $2 AND stage_started_at < clock_timestamp() - $4::interval))
		RETURNING `+fileCols, fileID, to, from, lease.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := s.LoadFile(ctx, fileID)
		if err != nil {
			return File{}, err
		}
		if cur.Status == to {
			return cur, ErrBusy
		}
		return cur, ErrNotReady
	}
	return f, err
}

// FailStage ends a claimed stage with an error status and message (a
// permanent failure: bad input, not a passing fault). f's stage fence (see
// ClaimParse) keeps a stale worker from overwriting a newer attempt; false
// means the stage was no longer f's.
func (s *Store) FailStage(ctx context.Context, f File, message string) (bool, error) {
	to := StatusErrorParsing
	if f.Status == StatusIndexing {
		to = StatusErrorIndexing
	}
	tag, err := s.pool.Exec(ctx, `UPDATE knowledge_files SET status = $3, error_message = $4, stage_started_at = NULL, updated_at = clock_timestamp()
		WHERE file_id = $1 AND status = $2 AND stage_attempts = $5 AND stage_started_at = $6`,
		f.FileID, f.Status, to, storableMessage(message, 2000), f.StageAttempts, f.StageStartedAt)
	return tag.RowsAffected() == 1, err
}

// storableMessage makes message fit a text column: valid UTF-8 without NUL
// bytes (parser errors may quote raw file bytes), at most max bytes, cut on
// a character boundary.
func storableMessage(message string, max int) string {
	message = strings.ReplaceAll(strings.ToValidUTF8(message, "\uFFFD"), "\x00", "")
	if len(message) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(message[cut]) {
			cut--
		}
		message = message[:cut]
	}
	return message
}

// ReleaseStage gives a claimed stage back after a passing fault so that a
// retried delivery can claim it at once.
func (s *Store) ReleaseStage(ctx context.Context, f File) error {
	back := StatusUploaded
	if f.Status == StatusIndexing {
		back = StatusParsed
	}
	_, err := s.pool.Exec(ctx, `UPDATE knowledge_files SET status = $3, stage_started_at = NULL, updated_at = clock_timestamp()
		WHERE file_id = $1 AND status = $2 AND stage_attempts = $4 AND stage_started_at = $5`,
		f.FileID, f.Status, back, f.StageAttempts, f.StageStartedAt)
	return err
}

// ErrStageLost: the stage was taken over by another attempt (or the file deleted).
var ErrStageLost = errors.New("file stage lost to another attempt")

// FinishParseTx records a parsed file: its Markdown and images, and — when
// the file is to be indexed — the document.parsed event, in tx, as the
// claimed parsing attempt f (ErrStageLost when the stage is no longer f's).
// Library.FinishParse runs it in its own transaction.
func (s *Store) FinishParseTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, f File, markdownKey string, images []Image) error {
	tag, err := tx.Exec(ctx, `UPDATE knowledge_files SET status = 'parsed', markdown_key = $3, error_message = NULL,
		stage_started_at = NULL, stage_attempts = 0, updated_at = clock_timestamp()
		WHERE file_id = $1 AND status = 'parsing' AND stage_attempts = $2 AND stage_started_at = $4`,
		f.FileID, f.StageAttempts, markdownKey, f.StageStartedAt)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrStageLost
	}
	if _, err := tx.Exec(ctx, `DELETE FROM knowledge_images WHERE file_id = $1`, f.FileID); err != nil {
		return err
	}
	for _, im := range images {
		if _, err := tx.Exec(ctx, `INSERT INTO knowledge_images (kb_id, file_id, object_key, content_type, size)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kb_id, object_key) DO UPDATE SET file_id = EXCLUDED.file_id`,
			f.KBID, f.FileID, im.ObjectKey, im.ContentType, im.Size); err != nil {
			return err
		}
	}
	if !f.Processing().AutoIndex {
		return nil
	}
	return emit(outbox.Pending{Payload: events.DocumentParsed{KBID: f.KBID, FileID: f.FileID},
		DedupeKey: fmt.Sprintf("parsed:%s:%d", f.FileID, stageStamp(f))})
}

// stageStamp identifies a claimed stage (its start, which every claim sets)
// for dedupe keys: attempt numbers restart with each stage, start times do not.
func stageStamp(f File) int64 {
	if f.StageStartedAt == nil {
		return 0
	}
	return f.StageStartedAt.UnixMicro()
}

// Image is an extracted image stored for a file.
type Image struct {
	ObjectKey   string
	ContentType string
	Size        int64
}

// ListInput filters GET /documents.
type ListInput struct {
	ParentID      *string // nil: the root folder
	Query         string  // filename substring (case-insensitive)
	Status        string
	AllLevels     bool // search every folder (used with Query)
	Offset, Limit int
}

// ListFiles lists a KB's files and folders (folders first, then by name).
func (s *Store) ListFiles(ctx context.Context, kbID string, in ListInput) ([]File, int, error) {
	if in.Limit <= 0 || in.Limit > 500 {
		in.Limit = 100
	}
	if in.Offset < 0 {
		in.Offset = 0
	}
	where := `kb_id = $1 AND ($2::text = '' OR filename ILIKE '%' || $2 || '%') AND ($3::text = '' OR status = $3)`
	args := []any{kbID, strings.ToLower(in.Query), in.Status}
	if !in.AllLevels {
		where += ` AND parent_id IS NOT DISTINCT FROM $4`
		args = append(args, in.ParentID)
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_files WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	args = append(args, in.Limit, in.Offset)
	n := len(args)
	files, err := queryFiles(ctx, s.pool, `SELECT `+fileCols+` FROM knowledge_files WHERE `+where+
		fmt.Sprintf(` ORDER BY is_folder DESC, filename, id LIMIT $%d OFFSET $%d`, n-1, n), args...)
	return files, total, err
}

// RestageTx sends settled files of kbID back to a stage, in tx: to uploaded
// (parse again) or to parsed (index again, optionally with new chunking).
// Files in the middle of a stage are left alone (reported "busy").
// Library.Restage is the use case in its own transaction.
func (s *Store) RestageTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, kbID string, fileIDs []string, to string, chunking json.RawMessage) ([]map[string]any, error) {
	var out []map[string]any
	batch := NewBatchID() // the restaged files are a new ingestion batch (task)
	for _, id := range fileIDs {
		f, err := scanFile(tx.QueryRow(ctx, `SELECT `+fileCols+` FROM knowledge_files WHERE file_id = $1 AND kb_id = $2 FOR UPDATE`, id, kbID))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, failure.NotFound("file_not_found", "file %s not found in this knowledge base", id)
		}
		if err != nil {
			return nil, err
		}
		item := map[string]any{"file_id": id}
		switch {
		case f.IsFolder:
			item["status"], item["error"] = f.Status, "folders are not processed"
		case f.Status == StatusParsing || f.Status == StatusIndexing:
			item["status"], item["error"] = f.Status, "busy"
		case to == StatusParsed && f.MarkdownKey == nil:
			item["status"], item["error"] = f.Status, "not parsed yet"
		default:
			proc := f.Processing()
			proc.AutoIndex = true
			if len(chunking) > 0 {
				proc.Chunking = chunking
			}
			pj, _ := json.Marshal(proc)
			if _, err := tx.Exec(ctx, `UPDATE knowledge_files SET status = $2, processing_params = $3, error_message = NULL,
				stage_started_at = NULL, stage_attempts = 0, ingest_batch = $4, ingest_cancelled_at = NULL,
				updated_at = clock_timestamp() WHERE file_id = $1`, id, to, pj, batch); err != nil {
				return nil, err
			}
			var p outbox.Pending
			if to == StatusUploaded {
				p = outbox.Pending{Payload: events.DocumentUploaded{KBID: kbID, FileID: id}}
			} else {
				p = outbox.Pending{Payload: events.DocumentParsed{KBID: kbID, FileID: id}}
			}
			if err := emit(p); err != nil {
				return nil, err
			}
			item["status"], item["task_id"] = to, batch
		}
		out = append(out, item)
	}
	return out, nil
}

// CreateFolderTx makes a folder in kbID (under parentID, nil for the root), in tx.
func (s *Store) CreateFolderTx(ctx context.Context, tx pgx.Tx, kbID, name string, parentID *string, by string) (File, error) {
	name, err := validFolderName(name)
	if err != nil {
		return File{}, err
	}
	if err := lockTree(ctx, tx, kbID); err != nil {
		return File{}, err
	}
	if parentID != nil {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM knowledge_files WHERE file_id = $1 AND kb_id = $2 AND is_folder)`, *parentID, kbID).Scan(&ok); err != nil {
			return File{}, err
		}
		if !ok {
			return File{}, failure.NotFound("folder_not_found", "parent folder not found")
		}
	}
	exists, err := folderTaken(ctx, tx, kbID, name, parentID, "")
	if err != nil {
		return File{}, err
	}
	if exists {
		return File{}, failure.Conflict("folder_exists", "a folder named %q already exists here", name)
	}
	return scanFile(tx.QueryRow(ctx, `INSERT INTO knowledge_files (file_id, kb_id, parent_id, filename, original_filename, status, is_folder, created_by)
		VALUES ($1, $2, $3, $4, $4, 'indexed', true, $5) RETURNING `+fileCols, newID("file_"), kbID, parentID, name, by))
}

// ChunkView is a chunk as GET …/documents/{id}/content shows it.
type ChunkView struct {
	ChunkID    string `json:"chunk_id"`
	ChunkIndex int    `json:"chunk_index"`
	Content    string `json:"content"`
	TokenCount int    `json:"token_count"`
	StartChar  *int   `json:"start_char_pos"`
	EndChar    *int   `json:"end_char_pos"`
}

// FileChunks lists a file's chunks in order.
func (s *Store) FileChunks(ctx context.Context, fileID string) ([]ChunkView, error) {
	rows, err := s.pool.Query(ctx, `SELECT chunk_id, chunk_index, content, token_count, start_char_pos, end_char_pos
		FROM knowledge_chunks WHERE file_id = $1 ORDER BY chunk_index, chunk_id`, fileID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ChunkView{}
	for rows.Next() {
		var c ChunkView
		if err := rows.Scan(&c.ChunkID, &c.ChunkIndex, &c.Content, &c.TokenCount, &c.StartChar, &c.EndChar); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// SearchFiles finds files (not folders) by name across kbIDs.
func (s *Store) SearchFiles(ctx context.Context, kbIDs []string, query string, offset, limit int) ([]File, int, error) {
	if len(kbIDs) == 0 {
		return []File{}, 0, nil
	}
	where := `kb_id = ANY($1) AND NOT is_folder AND ($2 = '' OR filename ILIKE '%' || $2 || '%' OR original_filename ILIKE '%' || $2 || '%')`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_files WHERE `+where, kbIDs, strings.ToLower(query)).Scan(&total); err != nil {
		return nil, 0, err
	}
	files, err := queryFiles(ctx, s.pool, `SELECT `+fileCols+` FROM knowledge_files WHERE `+where+` ORDER BY kb_id, filename, id LIMIT $3 OFFSET $4`,
		kbIDs, strings.ToLower(query), limit, offset)
	return files, total, err
}

// Permanent reports whether a stage failure is the file's fault and retrying
// cannot help (corrupt, unsupported, too large, a dimension mismatch): coded
// errors except the transient kinds (unavailable, rate-limited, internal),
// which, like uncoded errors, are retried until the stage's attempts run out.
func Permanent(err error) bool {
	fe, ok := failure.As(err)
	if !ok {
		return false
	}
	switch fe.Kind {
	case failure.KindUnavailable, failure.KindTooMany, failure.KindInternal:
		return false
	}
	return true
}

// SampledChunk is a chunk drawn by SampleChunks.
type SampledChunk struct {
	ChunkID string
	FileID  string
	Content string
}

// SampleChunks returns n of kbID's chunks from position offset of a
// pseudo-random order fixed by seed (md5 of seed and chunk id): the same
// seed draws the same chunks in the same order while the KB's chunks stay
// the same (benchmark generation picks its anchors with it, so a resumed
// generation continues the same draw). total is the KB's chunk count.
func (s *Store) SampleChunks(ctx context.Context, kbID, seed string, offset, n int) (chunks []SampledChunk, total int, err error) {
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_chunks WHERE kb_id = $1`, kbID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := s.pool.Query(ctx, `SELECT chunk_id, file_id, content FROM knowledge_chunks WHERE kb_id = $1
		ORDER BY md5($2 || chunk_id), chunk_id OFFSET $3 LIMIT $4`, kbID, seed, offset, n)
	if err != nil {
		return nil, 0, err
	}
	chunks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SampledChunk, error) {
		var c SampledChunk
		return c, r.Scan(&c.ChunkID, &c.FileID, &c.Content)
	})
	return chunks, total, err
}

// IndexedFileIDs lists the indexed files of a knowledge base (graph building).
func (s *Store) IndexedFileIDs(ctx context.Context, kbID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT file_id FROM knowledge_files WHERE kb_id = $1 AND status = 'indexed' AND NOT is_folder
		ORDER BY file_id`, kbID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ChunkCount counts a knowledge base's committed chunks.
func (s *Store) ChunkCount(ctx context.Context, kbID string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_chunks WHERE kb_id = $1`, kbID).Scan(&n)
	return n, err
}
