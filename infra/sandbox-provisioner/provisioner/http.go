package provisioner

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
)

// Handler is the provisioner's HTTP API. Every route but GET /health needs
// "Authorization: Bearer <token>" (compared in constant time).
//
//	GET    /health                        {status, backend, idle_timeout}
//	POST   /api/sandboxes                 {uid, file_thread_id, skills_thread_id?, env?} -> {sandbox_id, backend, status}
//	GET    /api/sandboxes                 {sandboxes: [...]}
//	DELETE /api/sandboxes/{id}            {deleted}
//	POST   /api/sandboxes/{id}/exec       {command, workdir?, timeout_seconds?, env?} -> {output, exit_code, truncated, timed_out}
//
// File routes take the scope as query parameters (uid, file_thread_id,
// skills_thread_id) and a sandbox virtual path (path=/home/gem/user-data/…
// or relative to /home/gem/user-data); they read the volume directly and
// never start a sandbox:
//
//	GET    /api/files?path=[&max_bytes=]  raw bytes (X-File-Size, X-Truncated)
//	PUT    /api/files?path=[&exclusive=1] raw body -> {path, size}
//	DELETE /api/files?path=[&recursive=1] {deleted}
//	POST   /api/files/mkdir?path=         {path}
//	GET    /api/files/stat?path=          entry
//	GET    /api/files/list?path=[&depth=] {entries, truncated}
//	GET    /api/files/glob?pattern=[&path=] {paths, truncated}
//	GET    /api/files/grep?pattern=[&path=][&glob=] {matches, truncated}
//	GET    /api/files/archive?path=       a directory as a zip (application/zip)
//
// A scope without file_thread_id and skills_thread_id is the user's
// workspace alone: only /home/gem/user-data/workspace is visible.
//
//	PUT    /api/skills                    {skills:[{slug,hash,files:[{path,data}]}]} -> {synced}
//
// PUT /api/skills is the platform writing the scope's read-only skills
// directory (/home/gem/skills): the one way in, the sandbox cannot.
//
// Errors are {"error":{"code","message"}} with a 4xx for every bad input.
func (p *Provisioner) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", p.health)
	auth := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if !p.authorized(r) {
				writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong provisioner token")
				return
			}
			if err := h(w, r); err != nil {
				p.fail(w, r, err)
			}
		})
	}
	auth("POST /api/sandboxes", p.create)
	auth("GET /api/sandboxes", p.list)
	auth("DELETE /api/sandboxes/{id}", p.delete)
	auth("POST /api/sandboxes/{id}/exec", p.exec)
	auth("GET /api/files", p.readFile)
	auth("PUT /api/files", p.writeFile)
	auth("DELETE /api/files", p.deleteFile)
	auth("POST /api/files/mkdir", p.mkdir)
	auth("GET /api/files/stat", p.stat)
	auth("GET /api/files/list", p.listFiles)
	auth("GET /api/files/glob", p.glob)
	auth("GET /api/files/grep", p.grep)
	auth("GET /api/files/archive", p.archive)
	auth("PUT /api/skills", p.syncSkills)
	return mux
}

func (p *Provisioner) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(tok), []byte(p.cfg.Token)) == 1
}

func (p *Provisioner) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "backend": p.be.Name(), "idle_timeout": int(p.cfg.IdleTimeout.Seconds())})
}

type createRequest struct {
	volume.Scope
	Env map[string]string `json:"env"`
}

func (p *Provisioner) create(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	sb, err := p.Ensure(r.Context(), req.Scope, req.Env)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sb)
	return nil
}

func (p *Provisioner) list(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": p.List()})
	return nil
}

func (p *Provisioner) delete(w http.ResponseWriter, r *http.Request) error {
	if err := p.Delete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

func (p *Provisioner) exec(w http.ResponseWriter, r *http.Request) error {
	var req ExecRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	res, err := p.Exec(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func scopeOf(r *http.Request) volume.Scope {
	q := r.URL.Query()
	return volume.Scope{UID: q.Get("uid"), FileThread: q.Get("file_thread_id"), SkillsThread: q.Get("skills_thread_id")}
}

func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s must be a non-negative integer", ErrBadRequest, name)
	}
	return min(n, max), nil
}

func (p *Provisioner) readFile(w http.ResponseWriter, r *http.Request) error {
	maxBytes, err := intParam(r, "max_bytes", 0, int(p.cfg.MaxFileBytes))
	if err != nil {
		return err
	}
	data, size, err := p.files.Read(scopeOf(r), r.URL.Query().Get("path"), int64(maxBytes))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-File-Size", strconv.FormatInt(size, 10))
	w.Header().Set("X-Truncated", strconv.FormatBool(int64(len(data)) < size))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
	return nil
}

func (p *Provisioner) writeFile(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength > p.cfg.MaxFileBytes {
		return fmt.Errorf("%w: body is %d bytes (limit %d)", volume.ErrTooLarge, r.ContentLength, p.cfg.MaxFileBytes)
	}
	path := r.URL.Query().Get("path")
	n, err := p.files.Write(scopeOf(r), path, r.Body, r.URL.Query().Get("exclusive") == "1")
	if err != nil {
		return err
	}
	clean, _ := volume.Clean(path)
	writeJSON(w, http.StatusOK, map[string]any{"path": clean, "size": n})
	return nil
}

func (p *Provisioner) deleteFile(w http.ResponseWriter, r *http.Request) error {
	if err := p.files.Delete(scopeOf(r), r.URL.Query().Get("path"), r.URL.Query().Get("recursive") == "1"); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

func (p *Provisioner) mkdir(w http.ResponseWriter, r *http.Request) error {
	path := r.URL.Query().Get("path")
	if err := p.files.Mkdir(scopeOf(r), path); err != nil {
		return err
	}
	clean, _ := volume.Clean(path)
	writeJSON(w, http.StatusOK, map[string]any{"path": clean})
	return nil
}

func (p *Provisioner) stat(w http.ResponseWriter, r *http.Request) error {
	e, err := p.files.Stat(scopeOf(r), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (p *Provisioner) listFiles(w http.ResponseWriter, r *http.Request) error {
	depth, err := intParam(r, "depth", 1, 32)
	if err != nil {
		return err
	}
	path := r.URL.Query().Get("path")
	if path == "" {
		path = backend.UserDataDir
	}
	entries, truncated, err := p.files.List(scopeOf(r), path, depth, p.cfg.ListMaxResult)
	if err != nil {
		return err
	}
	if entries == nil {
		entries = []volume.Entry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries, "truncated": truncated})
	return nil
}

func (p *Provisioner) glob(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Get("pattern") == "" {
		return fmt.Errorf("%w: pattern is required", ErrBadRequest)
	}
	paths, truncated, err := p.files.Glob(scopeOf(r), q.Get("path"), q.Get("pattern"), p.cfg.ListMaxResult)
	if err != nil {
		return err
	}
	if paths == nil {
		paths = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"paths": paths, "truncated": truncated})
	return nil
}

func (p *Provisioner) grep(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Get("pattern") == "" {
		return fmt.Errorf("%w: pattern is required", ErrBadRequest)
	}
	limit, err := intParam(r, "max", p.cfg.ListMaxResult, p.cfg.ListMaxResult)
	if err != nil {
		return err
	}
	matches, truncated, err := p.files.Grep(scopeOf(r), q.Get("path"), q.Get("pattern"), q.Get("glob"), limit)
	if err != nil {
		return err
	}
	if matches == nil {
		matches = []volume.Match{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"matches": matches, "truncated": truncated})
	return nil
}

// archive streams a directory as a zip; the whole directory is bounded
// (4 × the file limit, the list limit in files) before the first byte.
func (p *Provisioner) archive(w http.ResponseWriter, r *http.Request) error {
	var buf bytes.Buffer
	if err := p.files.Archive(scopeOf(r), r.URL.Query().Get("path"), &buf, 4*p.cfg.MaxFileBytes, p.cfg.ListMaxResult); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = buf.WriteTo(w)
	return nil
}

// syncSkills writes the scope's read-only skills directory.
func (p *Provisioner) syncSkills(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Skills []volume.SkillDir `json:"skills"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if err := p.files.SyncSkills(scopeOf(r), req.Skills); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"synced": len(req.Skills)})
	return nil
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %v", ErrBadRequest, err)
	}
	return nil
}

// fail maps an error to its status and code once, here.
func (p *Provisioner) fail(w http.ResponseWriter, r *http.Request, err error) {
	type rule struct {
		err    error
		status int
		code   string
	}
	for _, m := range []rule{
		{ErrBadRequest, http.StatusBadRequest, "bad_request"},
		{volume.ErrBadScope, http.StatusBadRequest, "bad_scope"},
		{ErrBadEnv, http.StatusBadRequest, "bad_env"},
		{ErrUnknownSandbox, http.StatusNotFound, "sandbox_not_found"},
		{volume.ErrPathNotAllowed, http.StatusForbidden, "path_not_allowed"},
		{volume.ErrReadOnly, http.StatusForbidden, "read_only"},
		{volume.ErrNotFound, http.StatusNotFound, "not_found"},
		{volume.ErrTooLarge, http.StatusRequestEntityTooLarge, "file_too_large"},
		{volume.ErrExists, http.StatusConflict, "exists"},
		{volume.ErrIsDir, http.StatusConflict, "is_directory"},
		{volume.ErrNotDir, http.StatusConflict, "not_directory"},
	} {
		if errors.Is(err, m.err) {
			writeError(w, m.status, m.code, err.Error())
			return
		}
	}
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		writeError(w, http.StatusRequestEntityTooLarge, "file_too_large", err.Error())
		return
	}
	if r.Context().Err() != nil {
		writeError(w, 499, "cancelled", "request cancelled")
		return
	}
	p.cfg.Logger.Error("sandbox provisioner", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusBadGateway, "sandbox_failed", err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
