// Package netguard is the one SSRF-guarded outbound HTTP client: every
// request a user or an administrator can point somewhere (MCP server URLs,
// web_fetch, web search providers set through the API, OCR base URLs, remote
// skill sources) goes through a Guard's Client.
//
// The guard decides at connect time, on the address that is actually
// dialled: it resolves the host itself, checks every resolved address and
// then dials that checked IP (so a DNS answer cannot change between check
// and connect), and the default dialer checks the socket address once more
// in net.Dialer.Control before connect(2). Redirects are re-checked because
// every hop dials through the same guard; CheckRedirect also refuses non-HTTP
// schemes and more than MaxRedirects hops. Environment proxies are never used
// (a proxy would dial the target on our behalf, unchecked).
//
// Denied unless allow-listed: loopback, link-local (with the cloud metadata
// address 169.254.169.254), private (RFC 1918, fc00::/7), unspecified and
// "this network" (0.0.0.0/8), multicast, broadcast and reserved (240/4),
// CGNAT (100.64/10), benchmarking and IETF ranges, and IPv6 forms that embed
// an IPv4 address (IPv4-mapped ::ffff:0:0/96, IPv4-compatible, NAT64
// 64:ff9b::/96, 6to4 2002::/16) when the embedded address is denied. Host
// names spelled as numbers the C resolver would accept (2130706433, 0177.0.0.1,
// 0x7f.1) are read as the IPv4 address they spell and checked as such.
//
// The allow-list (YUXI_OUTBOUND_ALLOW, read by main) holds CIDRs, which
// allow resolved addresses, and host:port pairs, which allow that exact
// host name (or literal) and port whatever it resolves to.
//
// Imported by: shared/bootstrap and the packages that make user-directed
// requests. May import: the standard library only.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrDenied is matched (errors.Is) by every refusal of the guard.
var ErrDenied = errors.New("outbound address denied")

// DeniedError says which host and address were refused and why.
type DeniedError struct {
	Host   string // as requested (name or literal)
	Addr   string // the address that was refused, when resolved
	Reason string // e.g. "loopback", "link-local", "private"
}

func (e *DeniedError) Error() string {
	if e.Addr != "" && e.Addr != e.Host {
		return fmt.Sprintf("outbound request to %s (%s) denied: %s address (allow it with YUXI_OUTBOUND_ALLOW)", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("outbound request to %s denied: %s (allow it with YUXI_OUTBOUND_ALLOW)", e.Host, e.Reason)
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Allow is a parsed allow-list.
type Allow struct {
	prefixes  []netip.Prefix
	hostPorts map[string]bool // "host:port", host lower-cased, IPv6 in brackets
}

// ParseAllow reads a comma-separated list of CIDRs ("10.0.0.0/8",
// "127.0.0.1/32", "::1/128"), single IPs (as a /32 or /128) and host:port
// pairs ("localhost:8080", "[::1]:9000"). Empty means nothing is allowed
// beyond public addresses.
func ParseAllow(s string) (Allow, error) {
	a := Allow{hostPorts: map[string]bool{}}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(item); err == nil {
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		host, port, err := net.SplitHostPort(item)
		if err != nil || host == "" {
			return Allow{}, fmt.Errorf("YUXI_OUTBOUND_ALLOW: %q is neither a CIDR nor host:port", item)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return Allow{}, fmt.Errorf("YUXI_OUTBOUND_ALLOW: %q: port must be 1–65535", item)
		}
		a.hostPorts[hostPortKey(host, port)] = true
	}
	return a, nil
}

// MustParseAllow is ParseAllow for tests and constants; it panics on error.
func MustParseAllow(s string) Allow {
	a, err := ParseAllow(s)
	if err != nil {
		panic(err)
	}
	return a
}

func hostPortKey(host, port string) string {
	return net.JoinHostPort(strings.ToLower(strings.TrimSuffix(host, ".")), port)
}

func (a Allow) allowsHostPort(host, port string) bool {
	return a.hostPorts[hostPortKey(host, port)]
}

func (a Allow) allowsAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Resolver looks host names up; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to an already checked "ip:port".
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options configure a Guard. The zero value denies every non-public address,
// resolves with net.DefaultResolver and dials with a net.Dialer.
type Options struct {
	Allow        Allow
	Resolver     Resolver // default net.DefaultResolver
	Dial         DialFunc // default: a net.Dialer whose Control re-checks the socket address
	DialTimeout  time.Duration
	Timeout      time.Duration // the whole request, redirects included (http.Client.Timeout); 0: none
	MaxRedirects int           // default 10
}

// Guard checks and dials outbound connections.
type Guard struct {
	allow        Allow
	resolver     Resolver
	dial         DialFunc
	timeout      time.Duration
	maxRedirects int
}

// New returns a Guard.
func New(opt Options) *Guard {
	g := &Guard{allow: opt.Allow, resolver: opt.Resolver, dial: opt.Dial, timeout: opt.Timeout, maxRedirects: opt.MaxRedirects}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.maxRedirects == 0 {
		g.maxRedirects = 10
	}
	if g.dial == nil {
		d := &net.Dialer{Timeout: opt.DialTimeout, ControlContext: g.control}
		if d.Timeout == 0 {
			d.Timeout = 10 * time.Second
		}
		g.dial = d.DialContext
	}
	return g
}

// hostAllowedKey marks a dial whose host:port is on the allow-list, so that
// control lets its (possibly private) address through.
type hostAllowedKey struct{}

// control is the last line: it runs on the socket address right before
// connect(2), whatever path led there.
func (g *Guard) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DeniedError{Host: address, Reason: "unparseable socket address"}
	}
	if allowed, _ := ctx.Value(hostAllowedKey{}).(bool); allowed {
		return nil
	}
	if reason := Classify(ap.Addr()); reason != "" && !g.allow.allowsAddr(ap.Addr()) {
		return &DeniedError{Host: address, Addr: ap.Addr().String(), Reason: reason}
	}
	return nil
}

// Client returns an http.Client whose every connection, redirects included,
// goes through the guard. Each call returns a new client and transport.
func (g *Guard) Client() *http.Client {
	return &http.Client{Transport: g.Transport(), Timeout: g.timeout, CheckRedirect: g.checkRedirect}
}

// Transport returns an http.Transport dialling through the guard, without
// environment proxies.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

func (g *Guard) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > g.maxRedirects {
		return fmt.Errorf("stopped after %d redirects", g.maxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return &DeniedError{Host: req.URL.Host, Reason: "redirect to scheme " + strconv.Quote(req.URL.Scheme)}
	}
	// The dial of the next hop is checked anyway; checking literals here
	// gives the clearer error before a connection is even looked up.
	return g.CheckURL(req.Context(), req.URL)
}

// CheckURL checks a URL before use (e.g. when an administrator saves an MCP
// server): scheme http(s) and a host that resolves only to allowed
// addresses. It is advisory — the dial is checked again.
func (g *Guard) CheckURL(ctx context.Context, u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &DeniedError{Host: u.Host, Reason: "scheme must be http or https"}
	}
	if u.User != nil {
		return &DeniedError{Host: u.Host, Reason: "credentials in the URL"}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	_, err := g.resolve(ctx, u.Hostname(), port)
	return err
}

// DialContext resolves addr ("host:port"), refuses it unless every address
// is allowed, and dials the checked addresses in turn. The dial function is
// never called for a denied address.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := g.resolve(ctx, host, port)
	if err != nil {
		return nil, err
	}
	if g.allow.allowsHostPort(strings.TrimSuffix(host, "."), port) {
		ctx = context.WithValue(ctx, hostAllowedKey{}, true)
	}
	var first error
	for _, ip := range ips {
		c, err := g.dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// resolve returns the addresses to dial for host:port, all checked.
func (g *Guard) resolve(ctx context.Context, host, port string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return nil, &DeniedError{Host: host, Reason: "empty host"}
	}
	hostAllowed := g.allow.allowsHostPort(host, port)
	var ips []netip.Addr
	if ip, ok := ParseIP(host); ok {
		ips = []netip.Addr{ip}
	} else {
		if strings.ContainsAny(host, "%/\\ ") {
			return nil, &DeniedError{Host: host, Reason: "malformed host"}
		}
		found, err := g.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
		ips = found
	}
	for i, ip := range ips {
		ip = ip.Unmap().WithZone("")
		ips[i] = ip
		if hostAllowed || g.allow.allowsAddr(ip) {
			continue
		}
		if reason := Classify(ip); reason != "" {
			return nil, &DeniedError{Host: host, Addr: ip.String(), Reason: reason}
		}
	}
	return ips, nil
}

// ParseIP reads an IP literal as a URL host may spell it: IPv6 (with or
// without brackets, with or without a zone), canonical dotted
// IPv4, and the inet_aton spellings — 1 to 4 parts, each decimal, octal
// (leading 0) or hex (0x) — that C resolvers and browsers accept
// ("2130706433", "0177.0.0.1", "0x7f.1", "127.1").
func ParseIP(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.Contains(h, ":") {
		ip, err := netip.ParseAddr(h)
		if err != nil {
			return netip.Addr{}, false
		}
		return ip, true
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip, true
	}
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		base, digits := 10, p
		switch {
		case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*uint(i))
	}
	if vals[last] >= 1<<(32-8*uint(last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

var deniedV4 = []struct {
	p      netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // with 255.255.255.255
}

var deniedV6 = []struct {
	p      netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("100::/64"), "discard"},
}

var (
	compatV4  = netip.MustParsePrefix("::/96")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Classify returns why ip is not a public address ("loopback", "private",
// …), or "" when it is. IPv6 addresses that embed an IPv4 address are
// classified by that address.
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	if ip.Is4In6() {
		if r := Classify(ip.Unmap()); r != "" {
			return "IPv4-mapped " + r
		}
		return ""
	}
	if ip.Is4() {
		for _, d := range deniedV4 {
			if d.p.Contains(ip) {
				return d.reason
			}
		}
		return ""
	}
	ip = ip.WithZone("")
	for _, d := range deniedV6 {
		if d.p.Contains(ip) {
			return d.reason
		}
	}
	b := ip.As16()
	switch {
	case compatV4.Contains(ip), nat64.Contains(ip):
		if r := Classify(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return "IPv4-embedding " + r
		}
	case nat64Loc.Contains(ip):
		return "NAT64 local-use"
	case sixToFour.Contains(ip):
		if r := Classify(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return "6to4 " + r
		}
	}
	return ""
}
