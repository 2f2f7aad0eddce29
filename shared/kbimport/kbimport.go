// Package kbimport brings files into a knowledge base's uploads from
// outside the browser: a web page fetched by URL (POST
// /api/knowledge/files/fetch-url, through the SSRF-guarded client) and
// files of the caller's own workspace read through the sandbox
// provisioner's file API (POST /api/knowledge/files/import-workspace). Both
// end in kb.Library.Upload, so they answer exactly as an upload does (the
// same checks: manage access first, supported type, 100 MB, duplicate
// content) and the result is registered with POST …/documents as any upload.
//
// Imported by: functions/intake, tests. May import: shared/access,
// shared/failure, shared/kb, shared/netguard and the standard library.
package kbimport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
)

// Uploader stores one upload of a knowledge base (kb.Library).
type Uploader interface {
	Upload(ctx context.Context, sub access.Subject, kbID string, open func() (string, io.Reader, error)) (kb.Upload, error)
}

// Workspace reads a file of a user's workspace (userfiles.Service):
// its base name and content, at most max bytes (larger: kb.ErrTooLarge).
type Workspace interface {
	WorkspaceRead(ctx context.Context, uid, p string, max int64) (name string, data []byte, err error)
}

// Service is the import use cases.
type Service struct {
	Uploads Uploader
	// HTTP is the SSRF-guarded client (netguard.Guard.Client); nil: fetch-url
	// answers 503.
	HTTP *http.Client
	// Workspace reads workspace files; nil: import-workspace answers 503.
	Workspace Workspace
}

// MaxPageBytes bounds a fetched page (the original's 10 MB).
const MaxPageBytes = 10 << 20

// MaxWorkspaceFiles bounds one import (the workspace upload's 50 files).
const MaxWorkspaceFiles = 50

// Fetched is the answer of fetch-url: the upload, and the URL the page was
// finally read from (after redirects).
type Fetched struct {
	kb.Upload
	URL      string
	FinalURL string
}

// FetchURL fetches an HTML page into kbID's uploads (sub must manage kbID;
// that is checked before anything is fetched). Only http(s) URLs, HTML or
// XHTML answers (the original's types) of at most MaxPageBytes; every
// address dialled, redirects included, passes the SSRF guard.
func (s *Service) FetchURL(ctx context.Context, sub access.Subject, kbID, rawURL string) (Fetched, error) {
	if strings.TrimSpace(kbID) == "" {
		return Fetched{}, failure.Unprocessable("missing_kb_id", "kb_id is required")
	}
	u, err := parseURL(rawURL)
	if err != nil {
		return Fetched{}, err
	}
	if s.HTTP == nil {
		return Fetched{}, failure.New(failure.KindUnavailable, "fetch_url_unavailable", "URL fetching is not configured")
	}
	out := Fetched{URL: u.String()}
	var body *pageBody
	defer func() {
		if body != nil {
			body.finish() // Upload may stop reading early (a wrong type, a duplicate)
		}
	}()
	up, err := s.Uploads.Upload(ctx, sub, kbID, func() (string, io.Reader, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			cancel()
			return "", nil, failure.Unprocessable("invalid_url", "%v", err)
		}
		req.Header.Set("Accept", "text/html,application/xhtml+xml")
		req.Header.Set("User-Agent", "yuxi-kb-fetch/1")
		resp, err := s.HTTP.Do(req)
		if err != nil {
			cancel()
			if errors.Is(err, netguard.ErrDenied) {
				return "", nil, failure.Forbidden("url_forbidden", "the address of %s is not allowed: %v", u.Host, err)
			}
			return "", nil, failure.Unprocessable("url_fetch_failed", "fetch %s: %v", u.Redacted(), err)
		}
		if resp.StatusCode/100 != 2 {
			resp.Body.Close()
			cancel()
			return "", nil, failure.Unprocessable("url_fetch_failed", "fetch %s: HTTP %d", u.Redacted(), resp.StatusCode).
				With(map[string]any{"status": resp.StatusCode})
		}
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt != "text/html" && mt != "application/xhtml+xml" {
			resp.Body.Close()
			cancel()
			return "", nil, failure.New(failure.KindUnsupportedMedia, "unsupported_content_type",
				"%s answered %q; only HTML pages can be fetched", u.Redacted(), mt)
		}
		out.FinalURL = resp.Request.URL.String()
		body = &pageBody{r: resp.Body, close: cancel}
		return pageName(resp.Request.URL), body, nil
	})
	if err != nil {
		return Fetched{}, err
	}
	out.Upload = up
	return out, nil
}

// pageBody is a page's body, at most MaxPageBytes (more: kb.ErrTooLarge,
// which Upload turns into 413), closed (and its request's timeout released)
// at its end.
type pageBody struct {
	r     io.ReadCloser
	n     int64
	err   error // the end: io.EOF, kb.ErrTooLarge or a read error, returned again by later reads
	close func()
}

func (p *pageBody) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.n > MaxPageBytes {
		err = kb.ErrTooLarge
	}
	if err != nil {
		p.err = err
		p.finish()
	}
	return n, err
}

func (p *pageBody) finish() {
	if p.close != nil {
		p.r.Close()
		p.close()
		p.close = nil
	}
}

func parseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, failure.Unprocessable("missing_url", "url is required")
	}
	if len(raw) > 2048 {
		return nil, failure.Unprocessable("invalid_url", "url is longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, failure.Unprocessable("invalid_url", "url must be an http(s) URL without credentials")
	}
	return u, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// pageName is the stored file name of a fetched page: its host and path
// folded to a safe name, ending in .html (the parser's type for it).
func pageName(u *url.URL) string {
	p := strings.Trim(u.Path, "/")
	p = strings.TrimSuffix(strings.TrimSuffix(p, ".html"), ".htm")
	name := u.Hostname()
	if p != "" {
		name += "_" + p
	}
	name = strings.Trim(unsafeName.ReplaceAllString(name, "_"), "_.")
	if len(name) > 120 {
		name = name[:120]
	}
	if name == "" {
		name = "page"
	}
	return name + ".html"
}

// Imported is one workspace file stored as an upload.
type Imported struct {
	kb.Upload
	WorkspacePath string
}

// ImportWorkspace stores files of uid's workspace as uploads of kbID (sub
// must manage it; checked before any file is read). Paths are resolved in
// uid's workspace only. It stops at the first file refused (not found, a
// directory, an unsupported type, duplicate content): the uploads already
// stored by this call are not registered and the upload sweep removes them.
func (s *Service) ImportWorkspace(ctx context.Context, sub access.Subject, kbID string, paths []string) ([]Imported, error) {
	if strings.TrimSpace(kbID) == "" {
		return nil, failure.Unprocessable("missing_kb_id", "kb_id is required")
	}
	var clean []string
	for _, p := range paths {
		if p = strings.TrimSpace(p); p != "" {
			clean = append(clean, p)
		}
	}
	if len(clean) == 0 {
		return nil, failure.Unprocessable("missing_paths", "choose at least one workspace file (paths)")
	}
	if len(clean) > MaxWorkspaceFiles {
		return nil, failure.Unprocessable("too_many_paths", "at most %d files per import", MaxWorkspaceFiles)
	}
	if s.Workspace == nil {
		return nil, failure.New(failure.KindUnavailable, "sandbox_unavailable", "the workspace is not available (no sandbox provisioner)")
	}
	out := make([]Imported, 0, len(clean))
	for _, p := range clean {
		up, err := s.Uploads.Upload(ctx, sub, kbID, func() (string, io.Reader, error) {
			name, data, err := s.Workspace.WorkspaceRead(ctx, sub.UID, p, kb.MaxUploadBytes)
			if err != nil {
				return "", nil, err
			}
			return name, bytes.NewReader(data), nil
		})
		if err != nil {
			if fe, ok := failure.As(err); ok && fe.Details == nil {
				return nil, fe.With(map[string]any{"workspace_path": p})
			}
			return nil, err
		}
		out = append(out, Imported{Upload: up, WorkspacePath: p})
	}
	return out, nil
}
