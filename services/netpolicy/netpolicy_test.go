package netpolicy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// TestCheckURL tries the spellings of internal addresses an attacker
// would: every one is refused before a request, and public ones pass.
func TestCheckURL(t *testing.T) {
	open := Policy{}
	cases := []struct {
		url  string
		pass bool
	}{
		{"https://example.com/a", true},
		{"http://93.184.216.34/", true},
		{"http://127.0.0.1/", false},
		{"http://localhost:8080/", false},
		{"http://[::1]/", false},
		{"http://[::ffff:127.0.0.1]/", false}, // IPv4-mapped loopback
		{"http://[::127.0.0.1]/", false},      // IPv4-compatible (::/96)
		{"http://[fe80::1%25eth0]/", false},   // zoned link-local
		{"http://169.254.169.254/latest/meta-data", false},
		{"http://10.0.0.1/", false},
		{"http://192.168.1.1/", false},
		{"http://0.0.0.0/", false},
		{"http://0x7f.1/", false},             // 127.0.0.1 to inet_aton
		{"http://2130706433/", false},         // 127.0.0.1 as one number
		{"http://0177.0.0.1/", false},         // octal
		{"http://0xa9fea9fe/", false},         // 169.254.169.254
		{"http://169.254.43518/", false},      // 169.254.169.254 in three parts
		{"http://1.2.3.4.example/", true},     // a name whose labels are not all numbers
		{"http://[::ffff:a9fe:a9fe]/", false}, // IPv4-mapped metadata address
		{"http://[fd00::1]/", false},
		{"file:///etc/passwd", false},
		{"gopher://example.com/", false},
		{"http://user:pass@127.0.0.1/", false},
		{"not a url\x00", false},
	}
	for _, tc := range cases {
		msg := open.CheckURL(tc.url)
		if (msg == "") != tc.pass {
			t.Errorf("%q: pass %v, want %v (%s)", tc.url, msg == "", tc.pass, msg)
		}
	}
}

// TestAllowHostsAndPrivate: an allow list admits only its hosts (and
// subdomains of a ".suffix"); a private range is reachable only when
// named.
func TestAllowHostsAndPrivate(t *testing.T) {
	p, err := Parse(" API.example , .corp.example,", "10.1.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	for url, pass := range map[string]bool{
		"https://api.example/x":       true,
		"https://evil.api.example/":   false,
		"https://db.corp.example/":    true,
		"https://corp.example.evil/":  false,
		"https://example.com/":        false,
		"http://10.1.2.3/":            false, // not an allowed host name
		"http://api.example.evil.com": false,
	} {
		if msg := p.CheckURL(url); (msg == "") != pass {
			t.Errorf("%s: pass %v, want %v (%s)", url, msg == "", pass, msg)
		}
	}
	private := Policy{AllowPrivate: p.AllowPrivate}
	for addr, allowed := range map[string]bool{"10.1.2.3": true, "10.2.0.1": false, "127.0.0.1": false} {
		if got := private.AddrAllowed(netip.MustParseAddr(addr)); got != allowed {
			t.Errorf("%s allowed %v, want %v", addr, got, allowed)
		}
	}
	if _, err := Parse("", "10.0.0.0/33"); err == nil {
		t.Error("a malformed range was accepted")
	}
}

// TestClientRefusesAtConnect: the policy's client refuses a loopback
// server at connect time, even when the URL check is bypassed by a
// redirect from an allowed one, and reaches it only when the range is
// allowed.
func TestClientRefusesAtConnect(t *testing.T) {
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("secret")) }))
	defer inside.Close()
	_, err := Policy{}.Client().Get(inside.URL)
	var opErr *net.OpError
	if err == nil || !errors.As(err, &opErr) || !errors.Is(err, ErrAddressRefused) {
		t.Fatalf("loopback fetched or refused for another reason: %v", err)
	}
	loopback := Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	redirect := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/", http.StatusFound))
	defer redirect.Close()
	if _, err := loopback.Client().Get(redirect.URL); !errors.Is(err, ErrAddressRefused) {
		t.Fatalf("redirect to the metadata address followed: %v", err)
	}
	res, err := loopback.Client().Get(inside.URL)
	if err != nil {
		t.Fatalf("an allowed range was refused: %v", err)
	}
	res.Body.Close()
}

// TestClientRootCAs: a policy with its own CAs verifies https servers by
// them, and still refuses an internal address before any handshake.
func TestClientRootCAs(t *testing.T) {
	t.Parallel()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer secure.Close()
	loopback := Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	var unknown *tls.CertificateVerificationError
	if _, err := loopback.Client().Get(secure.URL); !errors.As(err, &unknown) {
		t.Fatalf("a server of an unknown CA: %v, want a verification error", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(secure.Certificate())
	loopback.RootCAs = pool
	res, err := loopback.Client().Get(secure.URL)
	if err != nil {
		t.Fatalf("a server of the policy's CA: %v", err)
	}
	res.Body.Close()
	if _, err := (Policy{RootCAs: pool}).Client().Get(secure.URL); !errors.Is(err, ErrAddressRefused) {
		t.Fatalf("loopback with a CA but no allowed range: %v", err)
	}
}

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"http://h.example/a", "http://H.example:80/b?q", true},
		{"https://h.example/", "https://h.example:443/x", true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8081/", false},
		{"http://h.example/", "https://h.example/", false},
		{"http://h.example/", "http://g.example/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := SameOrigin(a, b); got != c.same {
			t.Errorf("SameOrigin(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func TestCredentialHeader(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"Accept: x\nUser-Agent: y\nContent-Type: z": "",
		"Authorization: Bearer x":                   "Authorization",
		"X-Api-Key: k":                              "X-Api-Key",
		"Mcp-Session-Id: s":                         "Mcp-Session-Id",
		"Cookie: a=b":                               "Cookie",
	} {
		hdr := http.Header{}
		for _, line := range strings.Split(h, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			hdr.Set(k, v)
		}
		if got := credentialHeader(hdr); got != want {
			t.Errorf("credentialHeader(%q) = %q, want %q", h, got, want)
		}
	}
}
