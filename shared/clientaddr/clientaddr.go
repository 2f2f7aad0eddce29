// Package clientaddr resolves the address of the client behind a request:
// the connection's peer, or — when that peer is a proxy the operator trusts
// (YUXI_TRUSTED_PROXIES) — the X-Forwarded-For hop that proxy added. Hops
// added by anyone else are the client's own claims and ignored, so a client
// cannot pick the address its login failures are counted against.
//
// Imported by: shared/bootstrap (parsing), functions/intake. May import: stdlib only.
package clientaddr

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver knows which peers are trusted proxies. The zero Resolver trusts
// none: the address is always the connection's.
type Resolver struct {
	trusted []netip.Prefix
}

// Parse reads a comma-separated list of CIDRs (or single addresses).
func Parse(list string) (Resolver, error) {
	var r Resolver
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return Resolver{}, fmt.Errorf("YUXI_TRUSTED_PROXIES: %q is not an address or CIDR", f)
			}
			r.trusted = append(r.trusted, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return Resolver{}, fmt.Errorf("YUXI_TRUSTED_PROXIES: %q is not a CIDR", f)
		}
		r.trusted = append(r.trusted, p.Masked())
	}
	return r, nil
}

func (r Resolver) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Addr is the client's address for req: the peer's, unless the peer is a
// trusted proxy; then X-Forwarded-For is read from the right, skipping
// trusted hops, and the first untrusted hop is the client. A malformed hop
// stops the walk at the last good address.
func (r Resolver) Addr(req *http.Request) string {
	peer := parseHostPort(req.RemoteAddr)
	if !peer.IsValid() {
		return req.RemoteAddr
	}
	client := peer
	if !r.isTrusted(peer) {
		return client.String()
	}
	var hops []string
	for _, h := range req.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		client = a.Unmap()
		if !r.isTrusted(client) {
			break
		}
	}
	return client.String()
}

func parseHostPort(s string) netip.Addr {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = s
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}
