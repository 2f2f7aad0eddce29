package kbimport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kbimport"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
)

// reader is an Uploader that reads the whole body, as kb.Library.Upload
// does, and reports the name and size; denied refuses the KB first.
type reader struct {
	denied bool
	opened bool
}

func (r *reader) Upload(_ context.Context, _ access.Subject, _ string, open func() (string, io.Reader, error)) (kb.Upload, error) {
	if r.denied {
		return kb.Upload{}, kb.ErrManage
	}
	r.opened = true
	name, body, err := open()
	if err != nil {
		return kb.Upload{}, err
	}
	n, err := io.Copy(io.Discard, body)
	if err != nil {
		return kb.Upload{}, err
	}
	return kb.Upload{Filename: name, Size: n}, nil
}

func code(err error) string {
	fe, _ := failure.As(err)
	if fe == nil {
		return ""
	}
	return fe.Code
}

// The page is named from its final URL, bounded to MaxPageBytes, and the
// KB check comes before any request.
func TestFetchURL(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/big" {
			chunk := strings.Repeat("x", 1<<20)
			for i := 0; i <= kbimport.MaxPageBytes>>20; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			return
		}
		io.WriteString(w, "<html><body>docs</body></html>")
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	client := netguard.New(netguard.Options{Allow: netguard.MustParseAllow(host)}).Client()
	ctx, sub := context.Background(), access.Subject{UID: "a", Role: "admin"}

	up := &reader{}
	s := &kbimport.Service{Uploads: up, HTTP: client}
	f, err := s.FetchURL(ctx, sub, "kb", srv.URL+"/docs/Getting Started.html?x=1")
	if err != nil || f.Filename != "127.0.0.1_docs_Getting_Started.html" || f.Size != 30 {
		t.Fatalf("fetched: %+v %v", f, err)
	}
	if _, err := s.FetchURL(ctx, sub, "kb", srv.URL+"/big"); !errors.Is(err, kb.ErrTooLarge) {
		t.Fatalf("a page over %d bytes: %v", kbimport.MaxPageBytes, err)
	}
	before := hits
	s.Uploads = &reader{denied: true}
	if _, err := s.FetchURL(ctx, sub, "kb", srv.URL+"/docs"); !errors.Is(err, kb.ErrManage) || hits != before {
		t.Fatalf("a KB the caller cannot manage: %v (requests %d → %d)", err, before, hits)
	}
	for raw, want := range map[string]string{"": "missing_url", "ftp://x/y": "invalid_url", "http://u:p@" + host + "/": "invalid_url",
		"http://" + strings.Repeat("a", 2050): "invalid_url"} {
		if _, err := s.FetchURL(ctx, sub, "kb", raw); code(err) != want {
			t.Errorf("%q: %v, want %s", raw, err, want)
		}
	}
	if _, err := (&kbimport.Service{Uploads: &reader{}}).FetchURL(ctx, sub, "kb", srv.URL); code(err) != "fetch_url_unavailable" {
		t.Errorf("without a client: %v", err)
	}
}
