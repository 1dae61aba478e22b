package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"toolbelt/models"
)

// Limits of http_request.
const (
	MaxHTTPResponseBytes = 1 << 20
	MaxHTTPRedirects     = 5
)

// NetPolicy says where outbound requests may go: public addresses only,
// unless a private range is allowed explicitly (an internal service), and
// only to AllowHosts when that list is set.
type NetPolicy struct {
	AllowHosts   []string       // host names or ".suffix"; empty: any host
	AllowPrivate []netip.Prefix // private ranges reachable anyway
}

// ParseNetPolicy reads comma-separated hosts and CIDR prefixes.
func ParseNetPolicy(hosts, private string) (NetPolicy, error) {
	var p NetPolicy
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

// checkURL says why a URL may not be fetched, or "" when it may (as far
// as can be told before resolving its host; the dialer checks the address
// actually connected to).
func (p NetPolicy) checkURL(raw string) string {
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
	if ip, err := netip.ParseAddr(host); err == nil && !p.addrAllowed(ip) {
		return fmt.Sprintf("address %s is private, loopback or otherwise internal", ip)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".internal") {
		return fmt.Sprintf("host %s is internal", host)
	}
	return ""
}

func (p NetPolicy) hostAllowed(host string) bool {
	for _, a := range p.AllowHosts {
		if host == a || (strings.HasPrefix(a, ".") && strings.HasSuffix(host, a)) {
			return true
		}
	}
	return false
}

// addrAllowed refuses every address that is not public unicast, unless a
// configured private range holds it.
func (p NetPolicy) addrAllowed(ip netip.Addr) bool {
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

var errAddressRefused = errors.New("address refused")

// dialControl refuses, at connect time, an address the policy does not
// allow: http_request's dialer and the browser's proxy both use it, so
// DNS rebinding cannot reach an internal address through either.
func (p NetPolicy) dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !p.addrAllowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", errAddressRefused, address)
	}
	return nil
}

// client returns an HTTP client whose dialer refuses internal addresses at
// connect time (so DNS rebinding cannot reach them) and which re-checks
// every redirect.
func (p NetPolicy) client() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: p.dialControl}
	tr := &http.Transport{DialContext: dialer.DialContext, Proxy: nil, TLSHandshakeTimeout: 10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second, MaxIdleConns: 16, IdleConnTimeout: 30 * time.Second}
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= MaxHTTPRedirects {
			return fmt.Errorf("more than %d redirects", MaxHTTPRedirects)
		}
		if msg := p.checkURL(req.URL.String()); msg != "" {
			return fmt.Errorf("%w: redirect to %s: %s", errAddressRefused, req.URL, msg)
		}
		return nil
	}}
}

// httpRequest is the http_request built-in.
func (inv *Invoker) httpRequest(ctx context.Context, c *call) (any, error) {
	rawURL, _ := c.args["url"].(string)
	method, _ := c.args["method"].(string)
	if method == "" {
		method = http.MethodGet
	}
	body, _ := c.args["body"].(string)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, &toolError{code: models.CodeValidation, msg: err.Error(), suggestion: "Send an absolute http or https URL."}
	}
	if hs, ok := c.args["headers"].(map[string]any); ok {
		for k, v := range hs {
			if s, ok := v.(string); ok {
				req.Header.Set(k, s)
			}
		}
	}
	req.Header.Set("User-Agent", "Toolbelt/1 (+http_request)")
	return inv.doHTTP(ctx, c, req)
}

// doHTTP sends a request with the SSRF-guarded client and turns the answer
// into a result: status, a few headers, the body (capped); 5xx and 429
// are retryable upstream errors.
func (inv *Invoker) doHTTP(ctx context.Context, c *call, req *http.Request) (any, error) {
	resp, err := inv.httpClient.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, errAddressRefused):
			return nil, &toolError{code: models.CodeURLNotAllowed, msg: "the URL leads to an internal address", suggestion: "Only public addresses can be fetched."}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return nil, &toolError{code: models.CodeUpstream, msg: fmt.Sprintf("request failed: %v", err), retryable: true, suggestion: "The site did not answer; try again later."}
	}
	defer resp.Body.Close()
	// The host and status only: a URL's path and query may carry secrets.
	c.log.InfoContext(ctx, "http answered", "method", req.Method, "host", req.URL.Host, "status", resp.StatusCode)
	buf, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPResponseBytes+1))
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	truncated := len(buf) > MaxHTTPResponseBytes
	if truncated {
		buf = buf[:MaxHTTPResponseBytes]
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, &toolError{code: models.CodeUpstream, msg: fmt.Sprintf("%s answered %s", req.URL.Host, resp.Status), retryable: true,
			suggestion: "The site is failing or limiting requests; wait and try again."}
	}
	out := map[string]any{"status": resp.StatusCode, "headers": flatHeaders(resp.Header), "truncated": truncated}
	if utf8.Valid(buf) {
		out["body"] = string(buf)
	} else {
		out["body_bytes"] = len(buf)
		out["body"] = ""
	}
	return out, nil
}

func flatHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"Content-Type", "Content-Length", "Last-Modified", "Etag", "Location", "Retry-After"} {
		if v := h.Get(k); v != "" {
			out[k] = v
		}
	}
	return out
}
