package netguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/netguard"
)

// fakeResolver answers from a table; unknown names fail. No DNS is ever
// queried by these tests.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[strings.ToLower(host)]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

// publicIP is a documentation address (TEST-NET-3) the tests pretend is a
// public server; the dial hook routes it to a local httptest server, so no
// packet ever leaves this machine.
const publicIP = "203.0.113.10"

// hook is the dial hook: it records every address it is asked for and
// connects only publicIP:80 (to target). Any other address fails the test —
// the guard must have decided before.
type hook struct {
	t      *testing.T
	target string // host:port of the local test server
	mu     sync.Mutex
	dialed []string
}

func (h *hook) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	h.mu.Lock()
	h.dialed = append(h.dialed, addr)
	h.mu.Unlock()
	if addr != net.JoinHostPort(publicIP, "80") || h.target == "" {
		h.t.Errorf("dial hook reached for %s: the guard must refuse before any socket is opened", addr)
		return nil, errors.New("test hook: refused")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, h.target)
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.dialed)
}

var names = fakeResolver{
	"public.test":      {publicIP},
	"loopback.test":    {"127.0.0.1"},
	"localhost":        {"127.0.0.1", "::1"},
	"metadata.test":    {"169.254.169.254"},
	"mixed.test":       {publicIP, "10.1.2.3"},
	"v6loop.test":      {"::1"},
	"mapped.test":      {"::ffff:127.0.0.1"},
	"internal.test":    {"192.168.10.20"},
	"cgnat.test":       {"100.100.100.200"},
	"public-only.test": {publicIP},
}

func guard(t *testing.T, allow string, target string) (*netguard.Guard, *hook) {
	t.Helper()
	h := &hook{t: t, target: target}
	g := netguard.New(netguard.Options{Allow: netguard.MustParseAllow(allow), Resolver: names, Dial: h.dial})
	return g, h
}

func TestDeniedBeforeAnySocketIsOpened(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, reason string }{
		{"http://127.0.0.1/", "loopback"},
		{"http://127.8.9.10:8080/x", "loopback"},
		{"http://localhost/", "loopback"},
		{"http://loopback.test/", "loopback"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://metadata.test/computeMetadata/v1/", "link-local"},
		{"http://10.0.0.1/", "private"},
		{"http://172.16.0.1/", "private"},
		{"http://172.31.255.254/", "private"},
		{"http://192.168.1.1/", "private"},
		{"http://internal.test/", "private"},
		{"http://mixed.test/", "private"}, // one bad answer spoils the name
		{"http://100.64.0.1/", "CGNAT"},
		{"http://cgnat.test/", "CGNAT"},
		{"http://0.0.0.0/", "unspecified"},
		{"http://0/", "unspecified"},
		{"http://224.0.0.1/", "multicast"},
		{"http://255.255.255.255/", "reserved"},
		{"http://[::1]/", "loopback"},
		{"http://[::]/", "unspecified"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://[::ffff:7f00:1]/", "loopback"},
		{"http://[::ffff:169.254.169.254]/", "link-local"},
		{"http://[::127.0.0.1]/", "loopback"},
		{"http://[64:ff9b::a9fe:a9fe]/", "link-local"},
		{"http://[2002:7f00:1::]/", "loopback"},
		{"http://[fe80::1]/", "link-local"},
		{"http://[fe80::1%25eth0]/", "link-local"},
		{"http://[fd12:3456::1]/", "private"},
		{"http://[ff02::1]/", "multicast"},
		{"http://v6loop.test/", "loopback"},
		{"http://mapped.test/", "loopback"},
		{"http://2130706433/", "loopback"},   // decimal 127.0.0.1
		{"http://0177.0.0.1/", "loopback"},   // octal first part
		{"http://0177.0.0.01/", "loopback"},  // octal everywhere
		{"http://017700000001/", "loopback"}, // one octal number
		{"http://0x7f000001/", "loopback"},   // hex
		{"http://0x7f.1/", "loopback"},       // two parts
		{"http://127.1/", "loopback"},        // two parts decimal
		{"http://2852039166/", "link-local"}, // 169.254.169.254 as decimal
		{"http://0251.0376.0251.0376/", "link-local"},
		{"http://loopback.test./", "loopback"}, // trailing dot
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			g, h := guard(t, "", "")
			resp, err := g.Client().Get(tc.url)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("GET %s succeeded; want denied", tc.url)
			}
			if !errors.Is(err, netguard.ErrDenied) {
				t.Fatalf("GET %s: %v; want ErrDenied", tc.url, err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("GET %s: %q does not name %q", tc.url, err, tc.reason)
			}
			if h.count() != 0 {
				t.Errorf("dial hook reached %d times", h.count())
			}
			u, _ := url.Parse(tc.url)
			if err := g.CheckURL(context.Background(), u); !errors.Is(err, netguard.ErrDenied) {
				t.Errorf("CheckURL(%s) = %v; want ErrDenied", tc.url, err)
			}
		})
	}
}

// publicServer is a local server reached only through the hook as
// publicIP:80.
func publicServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestPublicAddressIsDialled(t *testing.T) {
	t.Parallel()
	target := publicServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from "+r.Host)
	}))
	g, h := guard(t, "", target)
	resp, err := g.Client().Get("http://public.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello from public.test" {
		t.Errorf("body %q", body)
	}
	if h.count() != 1 {
		t.Errorf("dialed %v", h.dialed)
	}
}

func TestRedirectsAreRechecked(t *testing.T) {
	t.Parallel()
	for _, loc := range []string{
		"http://127.0.0.1:9/",
		"http://loopback.test/",
		"http://[::1]:9/",
		"http://[::ffff:127.0.0.1]/",
		"http://2130706433/",
		"http://169.254.169.254/latest/meta-data/",
		"file:///etc/passwd",
		"gopher://public.test/",
	} {
		t.Run(loc, func(t *testing.T) {
			t.Parallel()
			var hits sync.Map
			target := publicServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Store(r.URL.Path, true)
				http.Redirect(w, r, loc, http.StatusFound)
			}))
			g, h := guard(t, "", target)
			resp, err := g.Client().Get("http://public.test/start")
			if err == nil {
				resp.Body.Close()
				t.Fatalf("redirect to %s followed", loc)
			}
			if !errors.Is(err, netguard.ErrDenied) {
				t.Fatalf("redirect to %s: %v; want ErrDenied", loc, err)
			}
			if _, ok := hits.Load("/start"); !ok {
				t.Error("the first hop was not served")
			}
			if h.count() != 1 {
				t.Errorf("dial hook calls %v; want only the first hop", h.dialed)
			}
		})
	}
}

// A redirect to a public name whose address is private at dial time is
// refused by the dial itself, not only by the redirect check.
func TestRedirectChainBetweenAllowedHops(t *testing.T) {
	t.Parallel()
	target := publicServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			http.Redirect(w, r, "/b", http.StatusFound)
			return
		}
		fmt.Fprint(w, "end")
	}))
	g, h := guard(t, "", target)
	resp, err := g.Client().Get("http://public.test/a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/b" || h.count() < 1 {
		t.Errorf("ended at %s after %v", resp.Request.URL, h.dialed)
	}
}

func TestAllowList(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	get := func(t *testing.T, allow, u string) error {
		// The real dialer: its Control re-checks the socket address.
		g := netguard.New(netguard.Options{Allow: netguard.MustParseAllow(allow), Resolver: names})
		resp, err := g.Client().Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "ok" {
			t.Errorf("body %q", b)
		}
		return nil
	}
	for _, tc := range []struct {
		allow, url string
		ok         bool
	}{
		{"", "http://127.0.0.1:" + port + "/", false},
		{"127.0.0.0/8", "http://127.0.0.1:" + port + "/", true},
		{"127.0.0.1", "http://loopback.test:" + port + "/", true},
		{"10.0.0.0/8, 127.0.0.1/32", "http://127.0.0.1:" + port + "/", true},
		{"loopback.test:" + port, "http://loopback.test:" + port + "/", true},
		{"loopback.test:" + port, "http://127.0.0.1:" + port + "/", false}, // the name, not its address
		{"loopback.test:1", "http://loopback.test:" + port + "/", false},   // another port
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port + "/", true},      // a literal host:port
		{"192.168.0.0/16", "http://127.0.0.1:" + port + "/", false},
	} {
		err := get(t, tc.allow, tc.url)
		if tc.ok && err != nil {
			t.Errorf("allow %q, GET %s: %v", tc.allow, tc.url, err)
		}
		if !tc.ok && !errors.Is(err, netguard.ErrDenied) {
			t.Errorf("allow %q, GET %s: %v; want ErrDenied", tc.allow, tc.url, err)
		}
	}
}

func TestControlChecksTheSocketAddress(t *testing.T) {
	t.Parallel()
	g := netguard.New(netguard.Options{})
	for _, a := range []string{"127.0.0.1:80", "[::1]:80", "[::ffff:127.0.0.1]:80", "169.254.169.254:80", "10.0.0.1:443"} {
		if err := g.Control("tcp", a); !errors.Is(err, netguard.ErrDenied) {
			t.Errorf("control(%s) = %v; want ErrDenied", a, err)
		}
	}
	if err := g.Control("tcp", publicIP+":80"); err != nil {
		t.Errorf("control(public) = %v", err)
	}
	allowed := netguard.New(netguard.Options{Allow: netguard.MustParseAllow("127.0.0.0/8")})
	if err := allowed.Control("tcp", "127.0.0.1:80"); err != nil {
		t.Errorf("allow-listed control = %v", err)
	}
}

func TestParseIP(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2130706433":      "127.0.0.1",
		"0177.0.0.1":      "127.0.0.1",
		"0x7f.0.0.1":      "127.0.0.1",
		"0x7F000001":      "127.0.0.1",
		"127.1":           "127.0.0.1",
		"127.0.1":         "127.0.0.1",
		"017700000001":    "127.0.0.1",
		"8.8.8.8":         "8.8.8.8",
		"[::1]":           "::1",
		"::ffff:10.0.0.1": "::ffff:10.0.0.1",
		"fe80::1%eth0":    "fe80::1%eth0",
	} {
		got, ok := netguard.ParseIP(in)
		if !ok || got.String() != want {
			t.Errorf("ParseIP(%q) = %v, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"example.com", "1.2.3.4.5", "256.0.0.1", "08.0.0.1", "1..2", "4294967296"} {
		if got, ok := netguard.ParseIP(in); ok {
			t.Errorf("ParseIP(%q) = %v; want not an IP", in, got)
		}
	}
}

func TestClassifyPublic(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"8.8.8.8", "1.1.1.1", publicIP, "2001:4860:4860::8888", "::ffff:8.8.8.8", "2002:0808:0808::1"} {
		if r := netguard.Classify(netip.MustParseAddr(a)); r != "" {
			t.Errorf("Classify(%s) = %q; want public", a, r)
		}
	}
}

func TestParseAllowRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"nonsense", "10.0.0.0/33", "host:0", "host:99999", ":80"} {
		if _, err := netguard.ParseAllow(s); err == nil {
			t.Errorf("ParseAllow(%q) accepted", s)
		}
	}
	if _, err := netguard.ParseAllow(""); err != nil {
		t.Errorf("empty: %v", err)
	}
}
