package intake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/blob/notify"
	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// MaxUploadBytes is the largest file an upload accepts (413 above).
const MaxUploadBytes = 100 << 20

func (s *Server) listKBs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.List(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"databases": list})
	return nil
}

func (s *Server) accessibleKBs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.List(r.Context(), subject(p))
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(list))
	for _, k := range list {
		out = append(out, map[string]any{"kb_id": k.KBID, "db_id": k.KBID, "name": k.Name, "description": k.Description, "kb_type": k.KBType, "permission": k.Permission})
	}
	writeJSON(w, http.StatusOK, map[string]any{"databases": out})
	return nil
}

func (s *Server) createKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in kb.CreateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	k, err := s.d.KBs.Create(r.Context(), subject(p), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

func (s *Server) getKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	k, err := s.d.KBs.Get(r.Context(), s.d.Pool, subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

func (s *Server) updateKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in kb.UpdateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	k, err := s.d.KBs.Update(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

// deleteKB removes the KB's rows and keyword index, then its vectors and objects.
func (s *Server) deleteKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID := r.PathValue("kb_id")
	var k kb.KB
	err := pgx.BeginFunc(r.Context(), s.d.Pool, func(tx pgx.Tx) error {
		var err error
		if k, err = s.d.KBs.Delete(r.Context(), tx, subject(p), kbID); err != nil {
			return err
		}
		return s.d.Keyword.DropIndex(r.Context(), tx, kbID)
	})
	if err != nil {
		return err
	}
	// The vectors and objects go after commit; what fails here stays owed and
	// the dispatcher's sweep finishes it.
	if _, err := kb.PurgeDeleted(context.WithoutCancel(r.Context()), s.d.Pool, s.d.Vectors, s.d.Blob, kbID); err != nil {
		s.log.Warn("purge deleted KB", "kb", kbID, "error", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "kb_id": k.KBID})
	return nil
}

// --- upload and documents ---

// uploadFile stores one file (multipart field "file") for a later
// POST …/documents. Unsupported types are 415 with the supported list, files
// over 100 MB 413, the same content twice in a KB 409.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID := r.URL.Query().Get("kb_id")
	if kbID == "" {
		return failure.Unprocessable("missing_kb_id", "kb_id is required (?kb_id=…)")
	}
	if _, err := s.d.KBs.GetManaged(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	part, err := filePart(w, r)
	if err != nil {
		return err
	}
	out, err := s.storeUpload(r.Context(), kbID, part)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// filePart returns the multipart form's "file" part, the body bounded by the
// upload limit.
func filePart(w http.ResponseWriter, r *http.Request) (*multipart.Part, error) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxUploadBytes+(1<<20))
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, failure.Invalid("invalid_multipart", "expected a multipart/form-data body with a file field: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, failure.Invalid("missing_file", "the form has no file field")
		}
		if err != nil {
			return nil, uploadReadError(err)
		}
		if part.FormName() == "file" && part.FileName() != "" {
			return part, nil
		}
	}
}

// markdownFile parses an uploaded file to Markdown and returns it, storing
// nothing (the original's /files/markdown). Images are not kept.
func (s *Server) markdownFile(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	if s.d.Parser == nil {
		return failure.NotFound("route_not_found", "document parsing is not available here")
	}
	part, err := filePart(w, r)
	if err != nil {
		return err
	}
	name := path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
	data, err := io.ReadAll(io.LimitReader(part, MaxUploadBytes+1))
	if err != nil {
		return uploadReadError(err)
	}
	if int64(len(data)) > MaxUploadBytes {
		return failure.New(failure.KindTooLarge, "file_too_large", "files are limited to %d MB", MaxUploadBytes>>20)
	}
	if len(data) == 0 {
		return failure.Unprocessable("empty_file", "%s is empty", name)
	}
	if _, err := docparse.Detect(name, data[:min(len(data), 4096)]); err != nil {
		return failure.New(failure.KindUnsupportedMedia, "wrong_file_type", "%v", err).
			With(map[string]any{"supported": docparse.SupportedExtensions()})
	}
	res, err := s.d.Parser.Parse(r.Context(), name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"markdown_content": res.Markdown, "message": "success"})
	return nil
}

func uploadReadError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) || strings.Contains(err.Error(), "request body too large") {
		return failure.New(failure.KindTooLarge, "file_too_large", "files are limited to %d MB", MaxUploadBytes>>20)
	}
	return failure.Invalid("invalid_multipart", "cannot read the upload: %v", err)
}

func unsupported(name string) error {
	return failure.New(failure.KindUnsupportedMedia, "unsupported_file_type", "%q is not a supported file type", name).
		With(map[string]any{"supported": docparse.SupportedExtensions()})
}

func (s *Server) storeUpload(ctx context.Context, kbID string, part io.Reader) (map[string]any, error) {
	type named interface{ FileName() string }
	name := path.Base(strings.ReplaceAll(part.(named).FileName(), "\\", "/"))
	ext := strings.ToLower(path.Ext(name))
	ok := false
	for _, e := range docparse.SupportedExtensions() {
		ok = ok || e == ext
	}
	if !ok {
		return nil, unsupported(name)
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(part, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, uploadReadError(err)
	}
	head = head[:n]
	if n == 0 {
		return nil, failure.Unprocessable("empty_file", "%s is empty", name)
	}
	if _, err := docparse.Detect(name, head); err != nil {
		return nil, failure.New(failure.KindUnsupportedMedia, "wrong_file_type", "%v", err).With(map[string]any{"supported": docparse.SupportedExtensions()})
	}
	sum := sha256.New()
	body := io.TeeReader(io.MultiReader(strings.NewReader(string(head)), part), sum)
	counted := &countingReader{r: body, limit: MaxUploadBytes}
	key := fmt.Sprintf("kb/%s/upload/%d-%s", kbID, time.Now().UnixNano(), name)
	ct := mime.TypeByExtension(ext)
	info, err := s.d.Blob.Put(ctx, key, counted, -1, ct)
	if counted.over {
		_ = s.d.Blob.Delete(context.WithoutCancel(ctx), key)
		return nil, failure.New(failure.KindTooLarge, "file_too_large", "files are limited to %d MB", MaxUploadBytes>>20)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, failure.New(failure.KindTooLarge, "file_too_large", "files are limited to %d MB", MaxUploadBytes>>20)
		}
		return nil, fmt.Errorf("store upload: %w", err)
	}
	hash := hex.EncodeToString(sum.Sum(nil))
	var dup string
	if err := s.d.Pool.QueryRow(ctx, `SELECT coalesce((SELECT filename FROM knowledge_files WHERE kb_id = $1 AND content_hash = $2 AND NOT is_folder LIMIT 1), '')`,
		kbID, hash).Scan(&dup); err != nil {
		return nil, err
	}
	if dup != "" {
		_ = s.d.Blob.Delete(context.WithoutCancel(ctx), key)
		return nil, failure.Conflict("duplicate_content", "a file with the same content (%s) is already in this knowledge base", dup)
	}
	var sameName []string
	rows, err := s.d.Pool.Query(ctx, `SELECT file_id FROM knowledge_files WHERE kb_id = $1 AND filename = lower($2) AND NOT is_folder`, kbID, name)
	if err == nil {
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			sameName = append(sameName, id)
		}
		rows.Close()
	}
	return map[string]any{"file_path": key, "object_name": key, "content_hash": hash, "filename": strings.ToLower(name),
		"original_filename": name, "size": info.Size, "same_name_files": nonNil(sameName), "has_same_name": len(sameName) > 0}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

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

type documentsBody struct {
	Items  []string `json:"items"`
	Params struct {
		AutoIndex         *bool             `json:"auto_index"`
		ChunkPresetID     string            `json:"chunk_preset_id"`
		ChunkParserConfig json.RawMessage   `json:"chunk_parser_config"`
		ContentHashes     map[string]string `json:"content_hashes"`
		ParentID          *string           `json:"parent_id"`
		OCREngine         string            `json:"ocr_engine"`
	} `json:"params"`
}

// addDocuments registers uploaded files and starts ingestion (parse, then
// index unless auto_index is false). It answers at once; progress is the
// files' status (GET …/documents/{id}/basic) and the KB's event stream.
func (s *Server) addDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.registerDocuments(w, r, p, true)
}

// addDocumentsOnly registers uploaded files without parsing them.
func (s *Server) addDocumentsOnly(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.registerDocuments(w, r, p, false)
}

func (s *Server) registerDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal, process bool) error {
	kbID := r.PathValue("kb_id")
	var in documentsBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if len(in.Items) == 0 || len(in.Items) > 1000 {
		return failure.Unprocessable("invalid_items", "items must list 1 to 1000 uploaded files")
	}
	var chunking json.RawMessage
	if in.Params.ChunkPresetID != "" || len(in.Params.ChunkParserConfig) > 0 {
		m := map[string]any{}
		if in.Params.ChunkPresetID != "" {
			m["chunk_preset_id"] = chunk.ResolvePreset(in.Params.ChunkPresetID)
		}
		if len(in.Params.ChunkParserConfig) > 0 {
			if _, err := chunk.ParseConfig(in.Params.ChunkParserConfig); err != nil {
				return err
			}
			m["chunk_parser_config"] = in.Params.ChunkParserConfig
		}
		chunking, _ = json.Marshal(m)
	}
	auto := true
	if in.Params.AutoIndex != nil {
		auto = *in.Params.AutoIndex
	}
	if _, err := s.d.KBs.GetManaged(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	hashes, err := s.uploadHashes(r.Context(), kbID, in.Items, in.Params.ContentHashes)
	if err != nil {
		return err
	}
	var files []kb.File
	err = s.d.Outbox.Tx(r.Context(), s.d.Pool, func(tx pgx.Tx, emit outbox.Emit) error {
		if _, err := s.d.KBs.GetManaged(r.Context(), tx, subject(p), kbID); err != nil {
			return err
		}
		var nfs []kb.NewFile
		for _, item := range in.Items {
			if !strings.HasPrefix(item, "kb/"+kbID+"/upload/") {
				return failure.Unprocessable("invalid_items", "item %q is not a file uploaded to this knowledge base", item)
			}
			info, err := s.d.Blob.Stat(r.Context(), item)
			if errors.Is(err, blob.ErrNotFound) {
				return failure.NotFound("upload_not_found", "uploaded file %q not found; upload it first", item)
			}
			if err != nil {
				return err
			}
			name := path.Base(item)
			if i := strings.Index(name, "-"); i >= 0 {
				name = name[i+1:]
			}
			nfs = append(nfs, kb.NewFile{Filename: name, ObjectKey: item, ContentHash: hashes[item], Size: info.Size,
				ContentType: info.ContentType, ParentID: in.Params.ParentID, CreatedBy: p.UID,
				Processing: kb.Processing{AutoIndex: auto, Chunking: chunking, OCREngine: in.Params.OCREngine}})
		}
		var err error
		files, err = kb.AddFiles(r.Context(), tx, func(ps ...outbox.Pending) error {
			if !process {
				return nil
			}
			return emit(ps...)
		}, kbID, nfs)
		return err
	})
	if err != nil {
		return err
	}
	items := make([]map[string]any, 0, len(files))
	for i, f := range files {
		items = append(items, map[string]any{"index": i, "item": in.Items[i], "file_id": f.FileID, "status": f.Status,
			"filename": f.Filename, "file_meta": f})
	}
	if !process {
		// As the original's documents/add; all items are added in one
		// transaction, so failed_items is always empty (an error refuses all).
		writeJSON(w, http.StatusOK, map[string]any{"status": "success", "message": fmt.Sprintf("已添加 %d 个文件", len(items)),
			"items": items, "failed_items": []any{}, "added": len(items), "failed": 0})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "queued", "message": "files added; follow their status", "items": items})
	return nil
}

// uploadHashes returns the content hash of each item: the one the client
// sent (content_hashes, echoing the upload's answer, as the original
// requires), else the SHA-256 of the stored upload. Without a hash a file
// escapes the duplicate-content check (409) of later uploads. Items that are
// not uploads of this KB are left out; the caller refuses them.
func (s *Server) uploadHashes(ctx context.Context, kbID string, items []string, sent map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(items))
	for _, item := range items {
		if h := sent[item]; h != "" {
			out[item] = h
			continue
		}
		if !strings.HasPrefix(item, "kb/"+kbID+"/upload/") {
			continue
		}
		rc, _, err := s.d.Blob.Get(ctx, item)
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

type fileIDsBody struct {
	FileIDs []string        `json:"file_ids"`
	Params  json.RawMessage `json:"params"`
}

// reparseDocuments sends files back to parsing (from any settled status).
func (s *Server) reparseDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.restage(w, r, p, kb.StatusUploaded)
}

// reindexDocuments sends parsed files back to indexing, optionally with new chunk settings.
func (s *Server) reindexDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.restage(w, r, p, kb.StatusParsed)
}

func (s *Server) restage(w http.ResponseWriter, r *http.Request, p auth.Principal, to string) error {
	kbID := r.PathValue("kb_id")
	var in fileIDsBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if len(in.FileIDs) == 0 || len(in.FileIDs) > 1000 {
		return failure.Unprocessable("invalid_file_ids", "file_ids must list 1 to 1000 files")
	}
	var chunking json.RawMessage
	if len(in.Params) > 0 && string(in.Params) != "null" {
		if _, err := kb.ResolveChunking(in.Params); err != nil {
			return err
		}
		chunking = in.Params
	}
	var out []map[string]any
	err := s.d.Outbox.Tx(r.Context(), s.d.Pool, func(tx pgx.Tx, emit outbox.Emit) error {
		if _, err := s.d.KBs.GetManaged(r.Context(), tx, subject(p), kbID); err != nil {
			return err
		}
		res, err := kb.Restage(r.Context(), tx, emit, kbID, in.FileIDs, to, chunking)
		out = res
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "queued", "items": out})
	return nil
}

// parsePending sends every file still waiting for a parse (uploaded) to doc-parse.
func (s *Server) parsePending(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.restagePending(w, r, p, kb.PendingParseStatuses, kb.StatusUploaded, "解析")
}

// indexPending sends every parsed file not yet indexed (parsed, error_indexing) to kb-index.
func (s *Server) indexPending(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.restagePending(w, r, p, kb.PendingIndexStatuses, kb.StatusParsed, "入库")
}

// restagePending answers as the original: {message, status, queued_count};
// the body {params} is optional (index-pending: new chunk settings).
func (s *Server) restagePending(w http.ResponseWriter, r *http.Request, p auth.Principal, statuses []string, to, label string) error {
	kbID := r.PathValue("kb_id")
	var in struct {
		Params json.RawMessage `json:"params"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
			return err
		}
	}
	var chunking json.RawMessage
	if to == kb.StatusParsed && len(in.Params) > 0 && string(in.Params) != "null" && string(in.Params) != "{}" {
		if _, err := kb.ResolveChunking(in.Params); err != nil {
			return err
		}
		chunking = in.Params
	}
	if _, err := s.d.KBs.GetManaged(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	n, err := kb.RestagePending(r.Context(), s.d.Pool, func(fn func(pgx.Tx, outbox.Emit) error) error {
		return s.d.Outbox.Tx(r.Context(), s.d.Pool, fn)
	}, kbID, statuses, to, chunking)
	if err != nil {
		return err
	}
	if n == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"message": "没有待" + label + "文档", "status": "success", "queued_count": 0})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": label + "任务已提交", "status": "queued", "queued_count": n})
	return nil
}

// documentExists answers whether the KB holds a file by display name or relative path.
func (s *Server) documentExists(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID := r.PathValue("kb_id")
	if _, err := s.d.KBs.Get(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	name := strings.TrimSpace(r.URL.Query().Get("filename"))
	exists, err := kb.FileExists(r.Context(), s.d.Pool, kbID, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"kb_id": kbID, "filename": name, "exists": exists})
	return nil
}

// changeTree runs a change of the KB's folder tree in a transaction that
// first checks the caller may manage the KB, and answers with the file.
func (s *Server) changeTree(w http.ResponseWriter, r *http.Request, p auth.Principal,
	change func(ctx context.Context, tx pgx.Tx, kbID string) (kb.File, error)) error {
	kbID := r.PathValue("kb_id")
	var f kb.File
	err := pgx.BeginFunc(r.Context(), s.d.Pool, func(tx pgx.Tx) error {
		if _, err := s.d.KBs.GetManaged(r.Context(), tx, subject(p), kbID); err != nil {
			return err
		}
		var err error
		f, err = change(r.Context(), tx, kbID)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

// moveDocument moves a file or folder under {new_parent_id} (null: the root).
func (s *Server) moveDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		NewParentID *string `json:"new_parent_id"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	return s.changeTree(w, r, p, func(ctx context.Context, tx pgx.Tx, kbID string) (kb.File, error) {
		return kb.MoveFile(ctx, tx, kbID, r.PathValue("doc_id"), in.NewParentID)
	})
}

// renameFolder renames a folder ({folder_name}).
func (s *Server) renameFolder(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		FolderName string `json:"folder_name"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	return s.changeTree(w, r, p, func(ctx context.Context, tx pgx.Tx, kbID string) (kb.File, error) {
		return kb.RenameFolder(ctx, tx, kbID, r.PathValue("folder_id"), in.FolderName)
	})
}

func (s *Server) createFolder(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		FolderName string  `json:"folder_name"`
		Name       string  `json:"name"`
		ParentID   *string `json:"parent_id"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	name := in.FolderName
	if name == "" {
		name = in.Name
	}
	return s.changeTree(w, r, p, func(ctx context.Context, tx pgx.Tx, kbID string) (kb.File, error) {
		return kb.CreateFolder(ctx, tx, kbID, name, in.ParentID, p.UID)
	})
}

func listInput(r *http.Request) (kb.ListInput, error) {
	q := r.URL.Query()
	in := kb.ListInput{Query: q.Get("query"), Status: q.Get("status")}
	var err error
	if v := q.Get("offset"); v != "" {
		if in.Offset, err = strconv.Atoi(v); err != nil || in.Offset < 0 {
			return in, failure.Unprocessable("invalid_query", "offset must be a non-negative integer")
		}
	}
	in.Limit = 100
	if v := q.Get("limit"); v != "" {
		if in.Limit, err = strconv.Atoi(v); err != nil || in.Limit < 1 || in.Limit > 500 {
			return in, failure.Unprocessable("invalid_query", "limit must be between 1 and 500")
		}
	}
	if v := q.Get("parent_id"); v != "" {
		in.ParentID = &v
	}
	return in, nil
}

func (s *Server) listDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	in, err := listInput(r)
	if err != nil {
		return err
	}
	return s.writeFileList(w, r, p, in, false)
}

func (s *Server) searchDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	in, err := listInput(r)
	if err != nil {
		return err
	}
	in.AllLevels = true
	if in.Query == "" {
		in.Query = r.URL.Query().Get("keyword")
	}
	return s.writeFileList(w, r, p, in, false)
}

func (s *Server) writeFileList(w http.ResponseWriter, r *http.Request, p auth.Principal, in kb.ListInput, external bool) error {
	kbID := r.PathValue("kb_id")
	if _, err := s.d.KBs.Get(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	files, total, err := kb.ListFiles(r.Context(), s.d.Pool, kbID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files, "total": total, "offset": in.Offset, "limit": in.Limit,
		"has_more": in.Offset+len(files) < total})
	return nil
}

func (s *Server) getDocumentBasic(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	_, f, err := s.d.KBs.GetFile(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"meta": f})
	return nil
}

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.documentContent(w, r, p, true)
}

func (s *Server) getDocumentContent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.documentContent(w, r, p, false)
}

func (s *Server) documentContent(w http.ResponseWriter, r *http.Request, p auth.Principal, withMeta bool) error {
	_, f, err := s.d.KBs.GetFile(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"))
	if err != nil {
		return err
	}
	chunks, err := kb.FileChunks(r.Context(), s.d.Pool, f.FileID)
	if err != nil {
		return err
	}
	md, err := s.markdown(r.Context(), f)
	if err != nil && !errors.Is(err, errNoMarkdown) {
		return err
	}
	// content_revision: the version a PUT of the content must name (the
	// file's updated_at, read with the content).
	out := map[string]any{"chunks": chunks, "content": md, "lines": splitLines(md), "content_revision": revisionOf(f)}
	if withMeta {
		out["meta"] = f
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

var errNoMarkdown = errors.New("no markdown")

func revisionOf(f kb.File) string { return f.UpdatedAt.UTC().Format(time.RFC3339Nano) }

// maxMarkdownBytes bounds an edited Markdown document.
const maxMarkdownBytes = 64 << 20

// putDocumentContent saves edited Markdown of a parsed file (not yet
// indexed: nothing derived from it exists), if the file is still at the
// revision the editor read; the file stays parsed, ready to index.
func (s *Server) putDocumentContent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID, fileID := r.PathValue("kb_id"), r.PathValue("doc_id")
	var in struct {
		Content  string `json:"content"`
		Revision string `json:"revision"`
	}
	if err := decodeJSON(w, r, maxMarkdownBytes+(1<<20), &in); err != nil {
		return err
	}
	if strings.TrimSpace(in.Content) == "" {
		return failure.Invalid("empty_content", "解析内容不能为空 (the content is empty)")
	}
	rev, err := time.Parse(time.RFC3339Nano, in.Revision)
	if err != nil {
		return failure.Invalid("invalid_revision", "revision must be the content_revision read with the content")
	}
	if _, err := s.d.KBs.GetManaged(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	// The new Markdown goes to a key of its own, so that the current one
	// stays intact until the commit says the edit won.
	key := fmt.Sprintf("%sfiles/%s/content-%d.md", kb.ObjectPrefix(kbID), fileID, time.Now().UnixNano())
	if _, err := s.d.Blob.Put(r.Context(), key, strings.NewReader(in.Content), int64(len(in.Content)), "text/markdown; charset=utf-8"); err != nil {
		return err
	}
	var f kb.File
	var old *string
	err = pgx.BeginFunc(r.Context(), s.d.Pool, func(tx pgx.Tx) error {
		var err error
		f, old, err = kb.ReplaceMarkdown(r.Context(), tx, kbID, fileID, key, rev)
		return err
	})
	ctx := context.WithoutCancel(r.Context())
	if err != nil {
		_ = s.d.Blob.Delete(ctx, key)
		return err
	}
	if old != nil && *old != key {
		if err := s.d.Blob.Delete(ctx, *old); err != nil {
			s.log.Warn("delete the replaced Markdown", "key", *old, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "message": "解析内容已保存", "meta": f, "content_revision": revisionOf(f)})
	return nil
}

func (s *Server) markdown(ctx context.Context, f kb.File) (string, error) {
	if f.MarkdownKey == nil {
		return "", errNoMarkdown
	}
	rc, _, err := s.d.Blob.Get(ctx, *f.MarkdownKey)
	if errors.Is(err, blob.ErrNotFound) {
		return "", errNoMarkdown
	}
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	return string(b), err
}

func splitLines(md string) []string {
	if md == "" {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(md, "\r\n", "\n"), "\n"), "\n")
}

func (s *Server) downloadDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	_, f, err := s.d.KBs.GetFile(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"))
	if err != nil {
		return err
	}
	if f.ObjectKey == nil || f.Source != "upload" {
		return failure.NotFound("original_not_available", "the original of this file is not stored here")
	}
	rc, info, err := s.d.Blob.Get(r.Context(), *f.ObjectKey)
	if err != nil {
		return failure.NotFound("original_not_available", "the original of this file is gone")
	}
	defer rc.Close()
	w.Header().Set("Content-Type", info.ContentType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.OriginalFilename}))
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	_, _ = io.Copy(w, rc)
	return nil
}

// kbImage serves an image extracted from a KB document to anyone who may
// read the KB (images are never public).
func (s *Server) kbImage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID, key := r.PathValue("kb_id"), r.PathValue("object_path")
	if _, err := s.d.KBs.Get(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	if !strings.HasPrefix(key, "kb/"+kbID+"/") || strings.Contains(key, "..") {
		return failure.Invalid("invalid_image_path", "not an image of this knowledge base")
	}
	var ct string
	if err := s.d.Pool.QueryRow(r.Context(), `SELECT content_type FROM knowledge_images WHERE kb_id = $1 AND object_key = $2`, kbID, key).Scan(&ct); err != nil {
		return failure.NotFound("image_not_found", "image not found")
	}
	rc, info, err := s.d.Blob.Get(r.Context(), key)
	if err != nil {
		return failure.NotFound("image_not_found", "image not found")
	}
	defer rc.Close()
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.Header().Set("Cache-Control", "private, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = io.Copy(w, rc)
	return nil
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.removeFiles(w, r, p, []string{r.PathValue("doc_id")})
}

func (s *Server) deleteDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in fileIDsBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if len(in.FileIDs) == 0 || len(in.FileIDs) > 1000 {
		return failure.Unprocessable("invalid_file_ids", "file_ids must list 1 to 1000 files")
	}
	return s.removeFiles(w, r, p, in.FileIDs)
}

func (s *Server) removeFiles(w http.ResponseWriter, r *http.Request, p auth.Principal, ids []string) error {
	kbID := r.PathValue("kb_id")
	var removed kb.Removed
	err := pgx.BeginFunc(r.Context(), s.d.Pool, func(tx pgx.Tx) error {
		if _, err := s.d.KBs.GetManaged(r.Context(), tx, subject(p), kbID); err != nil {
			return err
		}
		var err error
		removed, err = kb.DeleteFiles(r.Context(), tx, s.d.Keyword, kbID, ids)
		return err
	})
	if err != nil {
		return err
	}
	ctx := context.WithoutCancel(r.Context())
	if _, err := kb.FlushVectorDeletes(ctx, s.d.Pool, s.d.Vectors, kbID); err != nil {
		s.log.Warn("delete vectors (the sweep retries)", "kb", kbID, "error", err)
	}
	for _, k := range removed.ObjectKeys {
		_ = s.d.Blob.Delete(ctx, k)
	}
	deleted := make([]string, 0, len(removed.Files))
	for _, f := range removed.Files {
		deleted = append(deleted, f.FileID)
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": deleted})
	return nil
}

// --- query ---

type queryBody struct {
	Query    string          `json:"query"`
	Meta     json.RawMessage `json:"meta"`
	Options  json.RawMessage `json:"options"`
	FileName string          `json:"file_name"`
}

func (s *Server) runQuery(r *http.Request, p auth.Principal, kbID string, in queryBody) ([]kb.Result, error) {
	k, err := s.d.KBs.Get(r.Context(), s.d.Pool, subject(p), kbID)
	if err != nil {
		return nil, err
	}
	opts := in.Options
	if len(opts) == 0 {
		opts = in.Meta
	}
	fileName := in.FileName
	var m map[string]json.RawMessage
	if json.Unmarshal(opts, &m) == nil {
		if v, ok := m["file_name"]; ok {
			_ = json.Unmarshal(v, &fileName)
			delete(m, "file_name")
			opts, _ = json.Marshal(m)
		}
	}
	ret, err := k.Retrieval().Overlay(opts)
	if err != nil {
		return nil, err
	}
	return s.d.Retriever.Query(r.Context(), k, in.Query, ret, fileName)
}

// queryKB answers {result, status:"success"} as the original.
func (s *Server) queryKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in queryBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	res, err := s.runQuery(r, p, r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": res, "status": "success"})
	return nil
}

// queryTest answers the raw result list.
func (s *Server) queryTest(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in queryBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	res, err := s.runQuery(r, p, r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getQueryParams(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	k, err := s.d.KBs.Get(r.Context(), s.d.Pool, subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"options": kb.ParamOptions(k.Retrieval()), "values": k.Retrieval()})
	return nil
}

func (s *Server) putQueryParams(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in json.RawMessage
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	var wrapped struct {
		Options json.RawMessage `json:"options"`
	}
	if json.Unmarshal(in, &wrapped) == nil && len(wrapped.Options) > 0 {
		in = wrapped.Options
	}
	ret, err := s.d.KBs.SetRetrieval(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"options": kb.ParamOptions(ret), "values": ret})
	return nil
}

func (s *Server) supportedTypes(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"file_types": docparse.SupportedExtensions(), "max_file_size": MaxUploadBytes})
	return nil
}

func (s *Server) chunkPresets(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	out := []map[string]string{}
	for _, pr := range chunk.Presets() {
		out = append(out, map[string]string{"value": pr.ID, "label": pr.Label, "description": pr.Description})
	}
	writeJSON(w, http.StatusOK, map[string]any{"presets": out, "default": "general"})
	return nil
}

func (s *Server) kbTypes(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"kb_types": []map[string]any{{"type": kb.TypeDocument, "name": "Document knowledge base",
		"description": "Files parsed to Markdown, chunked, searched by vector, BM25 keyword or hybrid retrieval.", "supports_documents": true}}})
	return nil
}

// kbEvents streams the KB's file status changes (SSE, event file_status),
// new ones unless the client resumes (Last-Event-ID or ?after_seq). Access
// is checked again before each batch of notices: once the caller may no
// longer read the KB (share revoked, KB deleted) the stream closes without
// telling them more, and a reconnect gets 404.
func (s *Server) kbEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID := r.PathValue("kb_id")
	if _, err := s.d.KBs.Get(r.Context(), s.d.Pool, subject(p), kbID); err != nil {
		return err
	}
	cursor := runstream.RunCursor(r)
	if r.Header.Get("Last-Event-ID") == "" && r.URL.Query().Get("after_seq") == "" {
		cursor = runstream.CursorNew
	}
	_ = runstream.ServeStream(w, r, s.d.Hub, s.d.Hub.KBKey(kbID), cursor,
		runstream.StreamOptions{Heartbeat: s.d.SSEHeartbeat, MaxDuration: s.d.SSEMaxDuration},
		runstream.StreamHooks{Entries: func(ctx context.Context, sw *runstream.EventWriter, batch []runstream.Entry) (bool, error) {
			if _, err := s.d.KBs.Get(ctx, s.d.Pool, subject(p), kbID); err != nil {
				return true, nil
			}
			for _, e := range batch {
				sw.Event(e.Event, e.ID, e.Data)
			}
			return false, nil
		}})
	return nil
}

// --- sources (bucket bindings) ---

func (s *Server) listSources(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.Sources(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"sources": list})
	return nil
}

func (s *Server) addSource(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Provider string `json:"provider"`
		Bucket   string `json:"bucket"`
		Prefix   string `json:"prefix"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	src, err := s.d.KBs.AddSource(r.Context(), subject(p), r.PathValue("kb_id"), in.Provider, in.Bucket, in.Prefix)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, src)
	return nil
}

func (s *Server) removeSource(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := strconv.ParseInt(r.PathValue("source_id"), 10, 64)
	if err != nil {
		return failure.NotFound("source_not_found", "source not found")
	}
	if err := s.d.KBs.RemoveSource(r.Context(), subject(p), r.PathValue("kb_id"), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

// --- external (CLI) routes: any user with read access ---

func (s *Server) externalKBs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.List(r.Context(), subject(p))
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(list))
	for _, k := range list {
		out = append(out, map[string]any{"kb_id": k.KBID, "name": k.Name, "description": k.Description, "kb_type": k.KBType, "supports_documents": true})
	}
	writeJSON(w, http.StatusOK, map[string]any{"databases": out})
	return nil
}

func (s *Server) externalFiles(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	in, err := listInput(r)
	if err != nil {
		return err
	}
	in.AllLevels = in.Query != ""
	return s.writeFileList(w, r, p, in, true)
}

func (s *Server) externalRetrieve(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in queryBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	kbID := r.PathValue("kb_id")
	res, err := s.runQuery(r, p, kbID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, kb.SearchOutput(kbID, res))
	return nil
}

func (s *Server) externalOpen(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	_, f, err := s.d.KBs.GetFile(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("file_id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit := 200
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1800 {
			return failure.Unprocessable("invalid_window", "limit must be between 1 and 1800")
		}
	}
	md, err := s.markdown(r.Context(), f)
	if errors.Is(err, errNoMarkdown) {
		return failure.Unprocessable("not_parsed", "the file has not been parsed yet (status %s)", f.Status)
	}
	if err != nil {
		return err
	}
	win, err := kb.OpenWindow(f.KBID, f.FileID, md, 0, offset, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, win)
	return nil
}

func (s *Server) externalFind(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in kb.FindOptions
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	_, f, err := s.d.KBs.GetFile(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("file_id"))
	if err != nil {
		return err
	}
	md, err := s.markdown(r.Context(), f)
	if errors.Is(err, errNoMarkdown) {
		return failure.Unprocessable("not_parsed", "the file has not been parsed yet (status %s)", f.Status)
	}
	if err != nil {
		return err
	}
	res, err := kb.Find(f.KBID, f.FileID, md, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// bucketNotification receives bucket notifications — S3 event records
// (directly, or wrapped by SNS/SQS), EventBridge S3 events, MinIO webhooks,
// Cloud Storage object events — authenticated with the notification token,
// and turns each object change into io.yuxi.bucket.object.changed.v1 for
// doc-parse. Repeated deliveries of one notification are one event (doc-parse
// also ignores a change of the version it already holds).
func (s *Server) bucketNotification(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	if s.d.NotifyToken == "" {
		return failure.NotFound("route_not_found", "bucket notifications are not enabled (set YUXI_NOTIFY_TOKEN)")
	}
	token := r.Header.Get("X-Yuxi-Notify-Token")
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = v
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.d.NotifyToken)) != 1 {
		return failure.Unauthorized("invalid_notify_token", "missing or wrong notification token")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		return failure.New(failure.KindTooLarge, "payload_too_large", "notifications are limited to 4 MiB")
	}
	changes, err := notify.Decode(body)
	if err != nil {
		return failure.Invalid("invalid_notification", "%v", err)
	}
	err = s.d.Outbox.Tx(r.Context(), s.d.Pool, func(tx pgx.Tx, emit outbox.Emit) error {
		for _, c := range changes {
			ev, key := kb.BucketChange(c)
			if err := emit(outbox.Pending{Payload: ev, DedupeKey: key}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"accepted": len(changes)})
	return nil
}
