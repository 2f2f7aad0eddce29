package intake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// The documents of a KB: upload, register, list and search, restage
// (reparse, reindex, the pending ones) and delete.

// MaxUploadBytes is the largest file an upload accepts (413 above).
const MaxUploadBytes = kb.MaxUploadBytes

// uploadFile stores one file (multipart field "file") for a later
// POST …/documents. Unsupported types are 415 with the supported list, files
// over 100 MB 413, the same content twice in a KB 409.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID := r.URL.Query().Get("kb_id")
	if kbID == "" {
		return failure.Unprocessable("missing_kb_id", "kb_id is required (?kb_id=…)")
	}
	up, err := s.kb.Upload(r.Context(), subject(p), kbID, func() (string, io.Reader, error) {
		part, err := filePart(w, r)
		if err != nil {
			return "", nil, err
		}
		return part.FileName(), uploadBody{part}, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"file_path": up.Key, "object_name": up.Key, "content_hash": up.ContentHash,
		"filename": up.Filename, "original_filename": up.OriginalFilename, "size": up.Size,
		"same_name_files": up.SameNameFiles, "has_same_name": len(up.SameNameFiles) > 0})
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
			if err := checkFileName(part.FileName()); err != nil {
				return nil, err
			}
			return part, nil
		}
	}
}

// bodyTooLarge reports the body limit (http.MaxBytesReader) cutting a read.
func bodyTooLarge(err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig) || strings.Contains(err.Error(), "request body too large")
}

func uploadReadError(err error) error {
	if bodyTooLarge(err) {
		return kb.ErrTooLarge
	}
	return failure.Invalid("invalid_multipart", "cannot read the upload: %v", err)
}

// uploadBody is an upload's content as kb.Library.Upload reads it: the body
// limit cutting a read is kb.ErrTooLarge.
type uploadBody struct{ r io.Reader }

func (b uploadBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && bodyTooLarge(err) {
		return n, kb.ErrTooLarge
	}
	return n, err
}

func (s *Server) supportedTypes(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"file_types": docparse.SupportedExtensions(), "max_file_size": MaxUploadBytes})
	return nil
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

func (s *Server) registerDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal, parse bool) error {
	var in documentsBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	files, err := s.kb.Register(r.Context(), subject(p), r.PathValue("kb_id"), kb.RegisterInput{Items: in.Items,
		AutoIndex: in.Params.AutoIndex, ChunkPresetID: in.Params.ChunkPresetID, ChunkParserConfig: in.Params.ChunkParserConfig,
		ContentHashes: in.Params.ContentHashes, ParentID: in.Params.ParentID, OCREngine: in.Params.OCREngine, Parse: parse})
	if err != nil {
		return err
	}
	items := make([]map[string]any, 0, len(files))
	for i, f := range files {
		items = append(items, map[string]any{"index": i, "item": in.Items[i], "file_id": f.FileID, "status": f.Status,
			"filename": f.Filename, "file_meta": f})
	}
	if !parse {
		// As the original's documents/add; all items are added in one
		// transaction, so failed_items is always empty (an error refuses all).
		writeJSON(w, http.StatusOK, map[string]any{"status": "success", "message": fmt.Sprintf("已添加 %d 个文件", len(items)),
			"items": items, "failed_items": []any{}, "added": len(items), "failed": 0})
		return nil
	}
	task := ""
	if len(files) > 0 && files[0].IngestBatch != nil {
		task = *files[0].IngestBatch
	}
	// As the original: the batch is a task (GET /api/tasks/{task_id}).
	writeJSON(w, http.StatusOK, map[string]any{"status": "queued", "message": "任务已提交，请在任务中心查看进度", "task_id": task, "items": items})
	return nil
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
	var in fileIDsBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.kb.Restage(r.Context(), subject(p), r.PathValue("kb_id"), in.FileIDs, to, in.Params)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "queued", "items": out})
	return nil
}

// parsePending sends every file still waiting for a parse (uploaded) to doc-parse.
func (s *Server) parsePending(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.restagePending(w, r, p, kb.StatusUploaded, "解析")
}

// indexPending sends every parsed file not yet indexed (parsed, error_indexing) to kb-index.
func (s *Server) indexPending(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.restagePending(w, r, p, kb.StatusParsed, "入库")
}

// restagePending answers as the original: {message, status, queued_count};
// the body {params} is optional (index-pending: new chunk settings).
func (s *Server) restagePending(w http.ResponseWriter, r *http.Request, p auth.Principal, to, label string) error {
	var in struct {
		Params json.RawMessage `json:"params"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
			return err
		}
	}
	n, err := s.kb.RestagePending(r.Context(), subject(p), r.PathValue("kb_id"), to, in.Params)
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

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.removeFiles(w, r, p, []string{r.PathValue("doc_id")})
}

func (s *Server) deleteDocuments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in fileIDsBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	return s.removeFiles(w, r, p, in.FileIDs)
}

func (s *Server) removeFiles(w http.ResponseWriter, r *http.Request, p auth.Principal, ids []string) error {
	deleted, err := s.kb.RemoveFiles(r.Context(), subject(p), r.PathValue("kb_id"), ids)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": deleted})
	return nil
}

// documentExists answers whether the KB holds a file by display name or relative path.
func (s *Server) documentExists(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID := r.PathValue("kb_id")
	name := strings.TrimSpace(r.URL.Query().Get("filename"))
	exists, err := s.kb.FileExists(r.Context(), subject(p), kbID, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"kb_id": kbID, "filename": name, "exists": exists})
	return nil
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
	return s.writeFileList(w, r, p, in)
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
	return s.writeFileList(w, r, p, in)
}

func (s *Server) writeFileList(w http.ResponseWriter, r *http.Request, p auth.Principal, in kb.ListInput) error {
	files, total, err := s.kb.ListFiles(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files, "total": total, "offset": in.Offset, "limit": in.Limit,
		"has_more": in.Offset+len(files) < total})
	return nil
}

func (s *Server) getDocumentBasic(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	f, err := s.kb.File(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("doc_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"meta": f})
	return nil
}
