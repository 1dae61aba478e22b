// Package netpolicy decides where outbound requests may go: the one egress
// rule of http tools, the OpenAPI importer and the browser, checked on the
// URL before a request and on the address at connect time.
package netpolicy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

// MaxRedirects bounds the redirects a client of the policy follows.
const MaxRedirects = 5

// Policy says where outbound requests may go: public addresses only,
// unless a private range is allowed explicitly (an internal service), and
// only to AllowHosts when that list is set.
type Policy struct {
	AllowHosts   []string       // host names or ".suffix"; empty: any host
	AllowPrivate []netip.Prefix // private ranges reachable anyway
	// RootCAs, when set, are the certificate authorities https servers
	// are verified by instead of the system's: a test's own CA (no
	// setting sets it).
	RootCAs *x509.CertPool
}

// Parse reads comma-separated hosts and CIDR prefixes.
func Parse(hosts, private string) (Policy, error) {
	var p Policy
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			p.AllowHosts = append(p.AllowHosts, h)
		}
	}
	for _, c := range strings.Split(private, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(c)
		if err != nil {
			return p, fmt.Errorf("private range %q: %w", c, err)
		}
		p.AllowPrivate = append(p.AllowPrivate, pfx)
	}
	return p, nil
}

// CheckURL says why a URL may not be fetched, or "" when it may (as far
// as can be told before resolving its host; the dialer checks the address
// actually connected to).
func (p Policy) CheckURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("scheme %q is not allowed; use http or https", u.Scheme)
	case u.Hostname() == "":
		return "the URL names no host"
	case u.User != nil:
		return "the URL carries credentials"
	}
	host := strings.ToLower(u.Hostname())
	if len(p.AllowHosts) > 0 && !p.hostAllowed(host) {
		return fmt.Sprintf("host %s is not on the allow-list", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !p.AddrAllowed(ip) {
		return fmt.Sprintf("address %s is private, loopback or otherwise internal", ip)
	} else if err != nil && numericHost(host) {
		return fmt.Sprintf("host %s is an IPv4 address in another spelling (hex, octal or fewer parts); write it as a dotted quad", host)
	}
	if internalName(host) {
		return fmt.Sprintf("host %s is internal", host)
	}
	return ""
}

// numericHost reports whether every label of host is a number in one of
// the spellings inet_aton and WHATWG URL parsers take for an IPv4 address
// (decimal, 0-led octal, 0x hex, as in 0x7f.1 or 2130706433): a resolver
// may read such a host as an address that the dotted-quad check never saw.
func numericHost(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(labels) > 4 {
		return false
	}
	for _, l := range labels {
		digits, base := l, 10
		if rest, ok := strings.CutPrefix(strings.ToLower(l), "0x"); ok {
			digits, base = rest, 16
		}
		if digits == "" && base == 16 {
			continue // "0x" alone is 0
		}
		if _, err := strconv.ParseUint(digits, base, 64); err != nil {
			return false
		}
	}
	return true
}

func (p Policy) hostAllowed(host string) bool {
	for _, a := range p.AllowHosts {
		if host == a || (strings.HasPrefix(a, ".") && strings.HasSuffix(host, a)) {
			return true
		}
	}
	return false
}

// AddrAllowed refuses every address that is not public unicast, unless a
// configured private range holds it.
func (p Policy) AddrAllowed(ip netip.Addr) bool {
	// A zone ([::%lo]) makes every Prefix.Contains false and the
	// predicates compare it too: judge the address without it.
	ip = ip.Unmap().WithZone("")
	for _, pfx := range p.AllowPrivate {
		if pfx.Contains(ip) {
			return true
		}
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() || !ip.IsValid() {
		return false
	}
	for _, pfx := range internalRanges {
		if pfx.Contains(ip) {
			return false
		}
	}
	return true
}

// internalRanges are not covered by netip's predicates: carrier-grade NAT,
// benchmarking, documentation, reserved, and the IPv6 forms that carry an
// IPv4 address (6to4, NAT64, Teredo, IPv4-compatible and -translated).
var internalRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (::127.0.0.1), deprecated
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/32"),       // Teredo: an IPv4 address inside
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fec0::/10"), // site-local, deprecated
}

var ErrAddressRefused = errors.New("address refused")

// DialControl refuses, at connect time, an address the policy does not
// allow: http_request's dialer and the browser's proxy both use it, so
// DNS rebinding cannot reach an internal address through either.
func (p Policy) DialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !p.AddrAllowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrAddressRefused, address)
	}
	return nil
}

// Client returns an HTTP Client whose dialer refuses internal addresses at
// connect time (so DNS rebinding cannot reach them) and which re-checks
// every redirect (see followRedirect).
func (p Policy) Client() *http.Client {
	return p.client(nil)
}

// ClientSending is Client sending the headers h (credentials, as a
// remote MCP server's) with every request to the origin of endpoint and
// with no other request: a redirect to another origin is refused, and a
// request to another origin goes without them.
func (p Policy) ClientSending(endpoint string, h http.Header) (*http.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", endpoint)
	}
	c := p.client(h)
	c.Transport = sending{next: c.Transport, origin: u, h: h}
	return c, nil
}

func (p Policy) client(sent http.Header) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: p.DialControl}
	tr := &http.Transport{DialContext: dialer.DialContext, Proxy: nil, TLSHandshakeTimeout: 10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second, MaxIdleConns: 16, IdleConnTimeout: 30 * time.Second}
	if p.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: p.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, CheckRedirect: p.followRedirect(sent)}
}

// CheckResolved is checkURL plus the addresses the host resolves to, for
// clients (Chromium) that dial by themselves.
func (p Policy) CheckResolved(ctx context.Context, u *url.URL) error {
	if msg := p.CheckURL(u.String()); msg != "" {
		return errors.New(msg)
	}
	host := u.Hostname()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Fail closed: a lookup that fails here (the call ended, or a DNS
	// server answering differently) refuses the request. This is the early
	// check; DNS rebinding is closed by the browser's proxy, which dials
	// through dialControl and so checks the address it connects to.
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("host %s could not be resolved", host)
	}
	for _, a := range addrs {
		if !p.AddrAllowed(a) {
			return fmt.Errorf("host %s resolves to the internal address %s", host, a)
		}
	}
	return nil
}
