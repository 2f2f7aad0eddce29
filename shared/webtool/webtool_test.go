package webtool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/netguard"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/shared/webtool"
)

// guarded is the SSRF-guarded client with loopback allowed (the fakes run
// there), as YUXI_OUTBOUND_ALLOW=127.0.0.1/32 would configure it.
func guarded() *http.Client {
	return netguard.New(netguard.Options{Allow: netguard.MustParseAllow("127.0.0.1/32")}).Client()
}

func byName(ts []tool.Tool) map[string]tool.Tool {
	m := map[string]tool.Tool{}
	for _, t := range ts {
		m[t.Spec().Name] = t
	}
	return m
}

func invoke(t *testing.T, tl tool.Tool, args string) tool.Result {
	t.Helper()
	res, err := tl.Invoke(context.Background(), tool.Call{RunID: "r", ToolCallID: "c", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fakeTavily speaks Tavily's POST /search.
func fakeTavily(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Query      string `json:"query"`
			MaxResults int    `json:"max_results"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if r.Method != "POST" || r.URL.Path != "/search" || r.Header.Get("Authorization") != "Bearer tvly-test" {
			http.Error(w, `{"detail":{"error":"Unauthorized"}}`, 401)
			return
		}
		fmt.Fprintf(w, `{"query":%q,"answer":"short answer","results":[{"title":"Go 1.26 released","url":"https://go.dev/blog","content":"Go 1.26 is out & faster <really>","score":0.9}],"n":%d}`, in.Query, in.MaxResults)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeDoubao speaks Volcengine's POST /search_api/web_search.
func fakeDoubao(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Query string `json:"Query"`
			Count int    `json:"Count"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if r.URL.Path != "/search_api/web_search" || r.Header.Get("Authorization") != "Bearer db-test" || in.Query == "" {
			http.Error(w, "bad request", 400)
			return
		}
		fmt.Fprint(w, `{"Result":{"ResultCount":2,"WebResults":[
			{"Title":"有摘要","Url":"https://a.example","Snippet":"片段","Summary":"长摘要"},
			{"Title":"只有片段","Url":"https://b.example","Snippet":"回退片段","Summary":""}]}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWebSearchTavily(t *testing.T) {
	t.Parallel()
	tv := fakeTavily(t)
	tools := byName(webtool.Tools(webtool.Config{TavilyKey: "tvly-test", TavilyBaseURL: tv.URL}, guarded()))
	res := invoke(t, tools["web_search"], `{"query":"go release","max_results":3}`)
	if res.IsError {
		t.Fatalf("search failed: %s", res.Output)
	}
	var out struct {
		Provider, Answer string
		Results          []struct{ Title, URL, Content string }
	}
	if err := json.Unmarshal([]byte(res.Output), &out); err != nil || out.Provider != "tavily" || out.Answer != "short answer" ||
		len(out.Results) != 1 || out.Results[0].URL != "https://go.dev/blog" {
		t.Fatalf("result %s (%v)", res.Output, err)
	}
	if !strings.Contains(res.Output, "out & faster <really>") {
		t.Errorf("content not verbatim: %s", res.Output)
	}
	// A wrong key is a readable tool error.
	bad := byName(webtool.Tools(webtool.Config{TavilyKey: "wrong", TavilyBaseURL: tv.URL}, guarded()))
	if r := invoke(t, bad["web_search"], `{"query":"x"}`); !r.IsError || !strings.Contains(r.Output, "HTTP 401") {
		t.Errorf("bad key: %+v", r)
	}
	if r := invoke(t, tools["web_search"], `{"query":"  "}`); !r.IsError {
		t.Errorf("empty query accepted: %+v", r)
	}
}

func TestWebSearchDoubaoPrefersSummary(t *testing.T) {
	t.Parallel()
	db := fakeDoubao(t)
	// The provider is picked by the configured key, or named explicitly.
	for _, cfg := range []webtool.Config{
		{DoubaoKey: "db-test", DoubaoBaseURL: db.URL},
		{Provider: "doubao", TavilyKey: "tvly-test", DoubaoKey: "db-test", DoubaoBaseURL: db.URL},
	} {
		res := invoke(t, byName(webtool.Tools(cfg, guarded()))["web_search"], `{"query":"查询"}`)
		if res.IsError || !strings.Contains(res.Output, `"provider":"doubao"`) || !strings.Contains(res.Output, "长摘要") ||
			strings.Contains(res.Output, `"片段"`) || !strings.Contains(res.Output, "回退片段") {
			t.Errorf("doubao result: %s", res.Output)
		}
	}
}

func TestWebSearchNeedsAKey(t *testing.T) {
	t.Parallel()
	if _, ok := byName(webtool.Tools(webtool.Config{}, guarded()))["web_search"]; ok {
		t.Error("web_search registered without any provider key")
	}
	if err := (webtool.Config{Provider: "tavily"}).Validate(); err == nil {
		t.Error("tavily without its key accepted")
	}
	if err := (webtool.Config{Provider: "bing"}).Validate(); err == nil {
		t.Error("unknown provider accepted")
	}
}

// The search providers go through the guard too: a base URL on a private
// address is refused unless allow-listed.
func TestWebSearchThroughTheGuard(t *testing.T) {
	t.Parallel()
	tv := fakeTavily(t)
	strict := netguard.New(netguard.Options{}).Client()
	res := invoke(t, byName(webtool.Tools(webtool.Config{TavilyKey: "tvly-test", TavilyBaseURL: tv.URL}, strict))["web_search"], `{"query":"x"}`)
	if !res.IsError || !strings.Contains(res.Output, "denied") {
		t.Errorf("search to loopback without allow-list: %+v", res)
	}
}

func TestWebFetch(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<html><head><title>t</title><style>p{}</style></head><body><script>alert(1)</script>
				<h1>Rates</h1><p>Score &gt; 0.8 &amp; rising</p><!-- hidden --><ul><li>one</li><li>two</li></ul></body></html>`)
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{0, 1, 2})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	fetch := byName(webtool.Tools(webtool.Config{}, guarded()))["web_fetch"]
	res := invoke(t, fetch, fmt.Sprintf(`{"url":%q}`, srv.URL+"/page"))
	var out struct{ Content, ContentType string }
	if err := json.Unmarshal([]byte(res.Output), &out); res.IsError || err != nil {
		t.Fatalf("fetch: %s", res.Output)
	}
	for _, want := range []string{"Rates", "Score > 0.8 & rising", "one\n\ntwo"} {
		if !strings.Contains(out.Content, want) {
			t.Errorf("content %q lacks %q", out.Content, want)
		}
	}
	for _, bad := range []string{"alert", "hidden", "p{}", "<h1>"} {
		if strings.Contains(out.Content, bad) {
			t.Errorf("content %q keeps %q", out.Content, bad)
		}
	}
	for name, tc := range map[string]struct{ args, want string }{
		"redirect to metadata": {fmt.Sprintf(`{"url":%q}`, srv.URL+"/redirect"), "denied"},
		"not found":            {fmt.Sprintf(`{"url":%q}`, srv.URL+"/nope"), "HTTP 404"},
		"binary":               {fmt.Sprintf(`{"url":%q}`, srv.URL+"/binary"), "not text"},
		"file scheme":          {`{"url":"file:///etc/passwd"}`, "http(s)"},
		"decimal loopback":     {`{"url":"http://2130706433:1/"}`, "connection refused"}, // allowed here (127.0.0.1/32), nothing listens
	} {
		r := invoke(t, fetch, tc.args)
		if !r.IsError || !strings.Contains(r.Output, tc.want) {
			t.Errorf("%s: %+v, want an error with %q", name, r, tc.want)
		}
	}
	// Without the allow-list the page itself (loopback) is refused.
	strict := byName(webtool.Tools(webtool.Config{}, netguard.New(netguard.Options{}).Client()))["web_fetch"]
	if r := invoke(t, strict, fmt.Sprintf(`{"url":%q}`, srv.URL+"/page")); !r.IsError || !strings.Contains(r.Output, "loopback") {
		t.Errorf("loopback fetch without allow-list: %+v", r)
	}
}
