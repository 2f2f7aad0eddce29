package intake

import (
	"bytes"
	"context"
	"errors"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// Fuzz targets, one per decoder the routes read input through. Their seed
// corpora run in `make test`; `make fuzz` runs each for FUZZTIME. The
// property is the issue's: input either answers a coded 4xx, or is accepted
// in a form PostgreSQL stores (checked against PostgreSQL itself: text for
// strings, jsonb for bodies kept as raw JSON).

// refused checks that err is a coded client error (never a 500).
func refused(t *testing.T, err error) {
	t.Helper()
	fe, ok := failure.As(err)
	if !ok || fe.Kind == failure.KindInternal || fe.Code == "" {
		t.Fatalf("input refused without a client error code: %v", err)
	}
}

// pgOracle asks PostgreSQL whether it stores s as text, or as jsonb.
type pgOracle struct{ pool *pgxpool.Pool }

func newOracle(f *testing.F) pgOracle {
	pool, _ := pgtest.NewDatabase(f)
	return pgOracle{pool}
}

func (o pgOracle) text(t *testing.T, what, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := o.pool.Exec(ctx, `SELECT $1::text`, s); err != nil {
		t.Fatalf("accepted %s %q that PostgreSQL refuses as text: %v", what, s, err)
	}
}

func (o pgOracle) jsonb(t *testing.T, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := o.pool.Exec(ctx, `SELECT $1::text::jsonb`, string(data)); err != nil {
		t.Fatalf("accepted body %q that PostgreSQL refuses as jsonb: %v", data, err)
	}
}

// walkStrings calls f on every string (keys included) of a decoded JSON value.
func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	}
}

func FuzzJSONBody(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a"}`, `{"name":"a\u0000b"}`, `{"config":{"x":"\ud800"}}`, `{"x":"\udc00"}`,
		`{"x":"\ud83d\ude00"}`, `{"x":"\ud83d\u0041"}`, `{"x":"\\u0000"}`, "{\"x\":\"\xff\"}", `{"x":"\\\u0000"}`,
		`[1,2]`, ``, `{`, `{"x":"\u00e9"}`, `{"items":["kb/x/upload/../y"]}`,
	} {
		f.Add([]byte(seed))
	}
	o := newOracle(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		r := httptest.NewRequest(http.MethodPost, "/api/x", bytes.NewReader(data))
		r.Header.Set("Content-Type", "application/json")
		err := decodeJSON(httptest.NewRecorder(), r, 1<<20, &v)
		if err != nil {
			refused(t, err)
			return
		}
		// Accepted: every string is storable as text, the whole body as jsonb
		// (routes keep parts of bodies as json.RawMessage in jsonb columns).
		walkStrings(v, func(s string) { o.text(t, "string", s) })
		o.jsonb(t, data)
	})
}

func FuzzPathParam(f *testing.F) {
	for _, seed := range []string{"abc", "kb_1", "a\x00b", "\xff\xfe", "%00", "..", "a/b", "é", strings.Repeat("x", 300)} {
		f.Add(seed)
	}
	o := newOracle(f)
	f.Fuzz(func(t *testing.T, id string) {
		mux := http.NewServeMux()
		var got error
		var seen []string
		mux.HandleFunc("POST /api/x/{id}/y/{rest...}", func(w http.ResponseWriter, r *http.Request) {
			got = checkPathParams(r, "/api/x/{id}/y/{rest...}")
			seen = []string{r.PathValue("id"), r.PathValue("rest")}
		})
		u := &url.URL{Path: "/api/x/" + id + "/y/" + id, RawPath: "/api/x/" + url.PathEscape(id) + "/y/" + url.PathEscape(id)}
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.URL = u
		r.RequestURI = u.RequestURI()
		w := httptest.NewRecorder()
		if err := refuseUncleanPath(r); err != nil {
			refused(t, err)
			return
		}
		mux.ServeHTTP(w, r)
		if w.Code/100 == 3 {
			t.Fatalf("a POST to %q was answered with a redirect %d", u.Path, w.Code)
		}
		if seen == nil {
			return // no route matched (a 404, 405): no handler reads the id
		}
		if got != nil {
			refused(t, got)
			return
		}
		for _, s := range seen {
			o.text(t, "path parameter", s)
		}
	})
}

func FuzzQuery(f *testing.F) {
	for _, seed := range []string{"kb_id=a", "kb_id=%00", "q=%ff", "a=1&b=%zz", "%00=1", "x=%ed%a0%80", "page=2&page_size=10"} {
		f.Add(seed)
	}
	o := newOracle(f)
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest(http.MethodGet, "/api/x", nil)
		r.URL.RawQuery = raw
		if err := checkQuery(r); err != nil {
			refused(t, err)
			return
		}
		for k, vs := range r.URL.Query() {
			o.text(t, "query name", k)
			for _, v := range vs {
				o.text(t, "query value", v)
			}
		}
	})
}

func FuzzMultipartName(f *testing.F) {
	for _, seed := range []string{"report.pdf", "a\x00b.md", "\xff.md", strings.Repeat("n", 256) + ".md", "..", "../../etc/passwd", "dir/x.md", "a\\b.md", "é.md", " .md"} {
		f.Add(seed)
	}
	o := newOracle(f)
	f.Fuzz(func(t *testing.T, name string) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="file"; filename="` + strings.NewReplacer(`"`, `\"`, "\\", "\\\\", "\r", "", "\n", "").Replace(name) + `"`}
		h["Content-Type"] = []string{"text/markdown"}
		pw, err := mw.CreatePart(h)
		if err != nil {
			t.Skip()
		}
		_, _ = pw.Write([]byte("# x\n"))
		_ = mw.Close()
		r := httptest.NewRequest(http.MethodPost, "/api/knowledge/files/upload?kb_id=kb_1", &body)
		r.Header.Set("Content-Type", mw.FormDataContentType())
		part, err := filePart(httptest.NewRecorder(), r)
		if err != nil {
			refused(t, err)
			return
		}
		got := part.FileName()
		if len(got) > maxFileNameBytes {
			t.Fatalf("accepted a %d-byte file name", len(got))
		}
		o.text(t, "file name", got)
		key := kb.UploadKey("kb_1", got, time.Unix(0, 1))
		if !kb.IsUploadKey("kb_1", key) {
			t.Fatalf("accepted file name %q makes upload key %q that registering refuses", got, key)
		}
	})
}

// The decoders' errors are never the internal kind.
func TestEdgeErrorsAreCoded(t *testing.T) {
	var v any
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"a":"\ud800"}`))
	err := decodeJSON(httptest.NewRecorder(), r, 1<<20, &v)
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Kind != failure.KindInvalid || fe.Code != "invalid_json" {
		t.Fatalf("lone surrogate: %v", err)
	}
}
