package clientaddr_test

import (
	"net/http/httptest"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/clientaddr"
)

func TestAddr(t *testing.T) {
	none, _ := clientaddr.Parse("")
	lb, err := clientaddr.Parse("10.0.0.0/8, 192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		r      clientaddr.Resolver
		remote string
		xff    []string
		want   string
	}{
		{"no proxies: the peer, XFF ignored", none, "203.0.113.5:4000", []string{"1.2.3.4"}, "203.0.113.5"},
		{"untrusted peer: XFF ignored", lb, "203.0.113.5:4000", []string{"1.2.3.4"}, "203.0.113.5"},
		{"trusted proxy: its hop", lb, "10.1.2.3:80", []string{"198.51.100.7"}, "198.51.100.7"},
		{"client-forged hops before the proxy's are ignored", lb, "10.1.2.3:80", []string{"1.1.1.1, 198.51.100.7"}, "198.51.100.7"},
		{"chain of trusted proxies", lb, "10.1.2.3:80", []string{"198.51.100.7, 192.0.2.1", "10.9.9.9"}, "198.51.100.7"},
		{"malformed hop stops the walk", lb, "10.1.2.3:80", []string{"198.51.100.7, junk"}, "10.1.2.3"},
		{"trusted proxy without XFF", lb, "10.1.2.3:80", nil, "10.1.2.3"},
		{"IPv6 peer", none, "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"IPv4-mapped peer", lb, "[::ffff:10.1.2.3]:80", []string{"198.51.100.8"}, "198.51.100.8"},
	}
	for _, tc := range cases {
		req := httptest.NewRequest("POST", "/", nil)
		req.RemoteAddr = tc.remote
		for _, h := range tc.xff {
			req.Header.Add("X-Forwarded-For", h)
		}
		if got := tc.r.Addr(req); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := clientaddr.Parse("10.0.0.0/33"); err == nil {
		t.Error("a bad CIDR was accepted")
	}
	if _, err := clientaddr.Parse("proxy.local"); err == nil {
		t.Error("a host name was accepted")
	}
}
