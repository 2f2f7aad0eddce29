package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// client calls a platform's API with an API key.
type client struct {
	base string
	key  string
	hc   *http.Client
}

func newClient(base, key string) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	return &client{base: base, key: key, hc: &http.Client{Transport: tr, Timeout: 10 * time.Minute}}
}

// apiError is an error answer of the platform: {"error":{"code","message"}}.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

func (c *client) do(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		ae := &apiError{Status: resp.StatusCode, Code: "", Message: string(bytes.TrimSpace(b))}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			ae.Code, ae.Message = e.Error.Code, e.Error.Message
		}
		if len(ae.Message) > 300 {
			ae.Message = ae.Message[:300] + "…"
		}
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
		}
	}
	return nil
}

func (c *client) getJSON(ctx context.Context, path string, out any) error {
	return c.do(ctx, "GET", path, "", nil, out)
}

func (c *client) postJSON(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.do(ctx, "POST", path, "application/json", bytes.NewReader(b), out)
}

// ping is GET /api/system/health; it answers the latency in ms.
func (c *client) ping(ctx context.Context) (float64, error) {
	start := time.Now()
	if err := c.getJSON(ctx, "/api/system/health", nil); err != nil {
		return 0, err
	}
	return float64(time.Since(start).Microseconds()) / 1000, nil
}

// me is GET /api/auth/me.
type me struct {
	UID          string `json:"uid"`
	Username     string `json:"username"`
	Role         string `json:"role"`
	DepartmentID *int64 `json:"department_id"`
}

func (c *client) me(ctx context.Context) (me, error) {
	var m me
	err := c.getJSON(ctx, "/api/auth/me", &m)
	return m, err
}

// smallFile is the size up to which a file is sent from memory with a
// Content-Length; larger files are streamed.
const smallFile = 8 << 20

// uploadFile posts one file to the KB's upload route: data when not nil
// (the file's content, already read), else streamed from path.
func (c *client) uploadFile(ctx context.Context, kbID, path string, data []byte) (upload, error) {
	var body io.Reader
	var ctype string
	if data != nil {
		var buf bytes.Buffer
		buf.Grow(len(data) + 512)
		mw := multipart.NewWriter(&buf)
		part, err := mw.CreateFormFile("file", filepath.Base(path))
		if err != nil {
			return upload{}, err
		}
		_, _ = part.Write(data)
		if err := mw.Close(); err != nil {
			return upload{}, err
		}
		body, ctype = &buf, mw.FormDataContentType()
	} else {
		f, err := os.Open(path)
		if err != nil {
			return upload{}, err
		}
		defer f.Close()
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			part, err := mw.CreateFormFile("file", filepath.Base(path))
			if err == nil {
				_, err = io.Copy(part, f)
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		body, ctype = pr, mw.FormDataContentType()
	}
	var up upload
	err := c.do(ctx, "POST", "/api/knowledge/files/upload?kb_id="+url.QueryEscape(kbID), ctype, body, &up)
	return up, err
}

type upload struct {
	FilePath    string `json:"file_path"`
	ContentHash string `json:"content_hash"`
}
