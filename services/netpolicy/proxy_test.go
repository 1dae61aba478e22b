package netpolicy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// TestParseTarget: an egress entry is a host (and port) and nothing
// else; every other spelling an admin or an attacker could slip in is
// refused with what to write instead.
func TestParseTarget(t *testing.T) {
	for entry, want := range map[string]string{
		"api.github.com":         "api.github.com",
		"Example.ORG:8443":       "example.org:8443",
		"93.184.216.34":          "93.184.216.34",
		"[2001:db8::1]:443":      "[2001:db8::1]:443",
		"[2001:db8::1]":          "[2001:db8::1]",
		"xn--bcher-kva.example":  "xn--bcher-kva.example",
		"a-b.example:1":          "a-b.example:1",
		"internal.example:65535": "internal.example:65535",
	} {
		got, err := ParseTarget(entry)
		if err != nil || got.String() != want {
			t.Errorf("%q: %v %v, want %s", entry, got, err, want)
		}
	}
	for entry, why := range map[string]string{
		"":                              "empty",
		"-x":                            "option",
		"--proxy=evil.example":          "option",
		"https://api.github.com":        "URL",
		"api.github.com/x":              "path",
		"user@api.github.com":           "credentials",
		"*.github.com":                  "wildcard",
		"api%2egithub.com":              "percent-encoded",
		"127.0.0.1%2f":                  "percent-encoded",
		"\uff41pi.github.com":           "non-ASCII",
		"api.github.com\x00.evil":       "control",
		"api.github.com ":               "space",
		"api.github.com.":               "not a host name",
		"-api.github.com":               "option",
		"api_github.com":                "not a host name",
		"0x7f.1":                        "another spelling",
		"2130706433":                    "another spelling",
		"0177.0.0.1":                    "another spelling",
		"localhost":                     "internal",
		"metadata.google.internal":      "internal",
		"a.localhost:80":                "internal",
		"api.github.com:0":              "port",
		"api.github.com:65536":          "port",
		"api.github.com:+443":           "port",
		"api.github.com:0443":           "port",
		"api.github.com:https":          "port",
		"api.github.com:":               "port",
		"::1":                           "brackets",
		"[example.com]:443":             "IPv6 address only",
		"[fe80::1%eth0]:443":            "percent-encoded",
		"[::ffff:127.0.0.1]:80":         "canonical",
		"[2001:0db8::1]":                "canonical",
		strings.Repeat("a.", 127) + "a": "not a host name",
	} {
		_, err := ParseTarget(entry)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error saying %q", entry, err, why)
		}
	}
}

// proxyFixture is a Proxy on a loopback port with its servers, a DNS
// server it alone asks, and the refusals it reported.
type proxyFixture struct {
	proxy   *url.URL
	plain   *httptest.Server // listed
	secure  *httptest.Server // listed, TLS
	other   *httptest.Server // not listed: must see no connection
	otherIn atomic.Int32

	mu      sync.Mutex
	refused []string
}

func startProxy(t *testing.T, policy Policy, targets func(plain, secure string) []string, names map[string][]netip.Addr) *proxyFixture {
	t.Helper()
	f := &proxyFixture{}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from "+r.Host) })
	f.plain = httptest.NewServer(hello)
	f.secure = httptest.NewTLSServer(hello)
	f.other = httptest.NewUnstartedServer(hello)
	f.other.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.otherIn.Add(1)
		}
	}
	f.other.Start()
	t.Cleanup(f.plain.Close)
	t.Cleanup(f.secure.Close)
	t.Cleanup(f.other.Close)
	var list []Target
	for _, e := range targets(f.plain.Listener.Addr().String(), f.secure.Listener.Addr().String()) {
		tg, err := ParseTarget(e)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, tg)
	}
	p := &Proxy{Policy: policy, Targets: list, Resolver: fakeDNS(t, names), Refused: func(target string, reason error) {
		f.mu.Lock()
		f.refused = append(f.refused, target+": "+reason.Error())
		f.mu.Unlock()
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	f.proxy = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	return f
}

// client sends everything through the proxy and trusts the TLS server.
func (f *proxyFixture) client() *http.Client {
	tr := f.secure.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(f.proxy)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *proxyFixture) lastRefusal() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.refused) == 0 {
		return ""
	}
	return f.refused[len(f.refused)-1]
}

// TestProxyPassesOnlyListedAllowedHosts: listed hosts are reached over
// plain http and through a CONNECT tunnel; an unlisted host or port, a
// listed name that resolves to an address the policy refuses (in whole
// or in part), and a host the policy's own allow-list leaves out are
// refused with 403, reported, and never connected to.
func TestProxyPassesOnlyListedAllowedHosts(t *testing.T) {
	loopback := Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	port := func(hostport string) string { _, p, _ := net.SplitHostPort(hostport); return p }
	f := startProxy(t, loopback, func(plain, secure string) []string {
		return []string{plain, secure, "good.test:" + port(plain), "rebind.test:" + port(plain), "mixed.test:" + port(plain),
			"127.0.0.2:" + port(plain)}
	}, map[string][]netip.Addr{
		"good.test.":   {netip.MustParseAddr("127.0.0.1")},
		"rebind.test.": {netip.MustParseAddr("169.254.169.254")},
		"mixed.test.":  {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.1")},
	})
	c := f.client()
	plainPort := port(f.plain.Listener.Addr().String())
	for _, u := range []string{f.plain.URL + "/x", f.secure.URL + "/x", "http://good.test:" + plainPort + "/"} {
		res, err := c.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(string(body), "hello from ") {
			t.Errorf("%s: %d %q", u, res.StatusCode, body)
		}
	}
	for u, why := range map[string]string{
		f.other.URL + "/": ErrNotListed.Error(),
		"https://" + f.other.Listener.Addr().String(): ErrNotListed.Error(),
		"http://example.org/":                         ErrNotListed.Error(),
		"http://rebind.test:" + plainPort + "/":       "internal address 169.254.169.254",
		"http://mixed.test:" + plainPort + "/":        "internal address 10.0.0.1",
		"https://rebind.test:" + plainPort + "/":      "internal address 169.254.169.254",
		"http://127.0.0.2:" + plainPort + "/":         "private, loopback",
		"http://localhost:" + plainPort + "/":         "internal",
		"http://0x7f.1:" + plainPort + "/":            "another spelling",
	} {
		res, err := c.Get(u)
		if strings.HasPrefix(u, "https:") {
			// The tunnel's refusal is the CONNECT's answer.
			if err == nil || !strings.Contains(err.Error(), "Forbidden") {
				t.Errorf("%s: %v, want the CONNECT refused", u, err)
			}
		} else if err != nil || res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %v %v, want 403", u, res, err)
		}
		if res != nil {
			res.Body.Close()
		}
		if got := f.lastRefusal(); !strings.Contains(got, why) {
			t.Errorf("%s: refusal %q, want one saying %q", u, got, why)
		}
	}
	if n := f.otherIn.Load(); n != 0 {
		t.Errorf("the unlisted server saw %d connections", n)
	}
	// Not a proxy request: origin form, straight to the proxy.
	res, err := http.Get(f.proxy.String() + "/")
	if err != nil || res.StatusCode != http.StatusBadRequest {
		t.Fatalf("origin-form request: %v %v", res, err)
	}
	res.Body.Close()
}

// TestProxyKeepsThePolicyAllowList: a host the server lists is still
// refused when the policy's own allow-list (TOOLBELT_HTTP_ALLOW_HOSTS)
// leaves it out.
func TestProxyKeepsThePolicyAllowList(t *testing.T) {
	policy := Policy{AllowHosts: []string{"only.example"}, AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	f := startProxy(t, policy, func(plain, _ string) []string { return []string{plain} }, nil)
	res, err := f.client().Get(f.plain.URL)
	if err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("%v %v, want 403", res, err)
	}
	res.Body.Close()
	if got := f.lastRefusal(); !strings.Contains(got, "allow-list") {
		t.Errorf("refusal %q", got)
	}
}

// fakeDNS is a resolver that asks a DNS server on a loopback port, which
// answers names (fully qualified) with their addresses and every other
// name with NXDOMAIN.
func fakeDNS(t *testing.T, names map[string][]netip.Addr) *net.Resolver {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var msg dnsmessage.Message
			if msg.Unpack(buf[:n]) != nil || len(msg.Questions) != 1 {
				continue
			}
			q := msg.Questions[0]
			out := dnsmessage.Message{Header: dnsmessage.Header{ID: msg.ID, Response: true, Authoritative: true}, Questions: msg.Questions}
			addrs, ok := names[q.Name.String()]
			if !ok {
				out.RCode = dnsmessage.RCodeNameError
			}
			for _, a := range addrs {
				h := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
				switch {
				case a.Is4() && q.Type == dnsmessage.TypeA:
					h.Type = dnsmessage.TypeA
					out.Answers = append(out.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AResource{A: a.As4()}})
				case a.Is6() && q.Type == dnsmessage.TypeAAAA:
					h.Type = dnsmessage.TypeAAAA
					out.Answers = append(out.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
				}
			}
			if packed, err := out.Pack(); err == nil {
				pc.WriteTo(packed, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}
