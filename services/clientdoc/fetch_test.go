package clientdoc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/netpolicy"
)

// docServer is an https server of client metadata documents that counts
// the requests it gets, so a test can tell a refusal made before any
// connection from one made after.
type docServer struct {
	*httptest.Server
	requests atomic.Int32
}

// newDocServer serves h over TLS on loopback.
func newDocServer(t *testing.T, h http.HandlerFunc) *docServer {
	t.Helper()
	s := &docServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// serveDoc answers with a good document whose client_id is the URL asked
// for, changed by edit, with the given Cache-Control.
func serveDoc(cacheControl string, edit func(doc map[string]any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		doc := map[string]any{
			"client_id":                  "https://" + r.Host + r.URL.RequestURI(),
			"client_name":                "Test Agent",
			"client_uri":                 "https://agent.example/",
			"redirect_uris":              []string{"http://127.0.0.1/callback", "https://agent.example/cb"},
			"grant_types":                []string{"authorization_code", "refresh_token"},
			"response_types":             []string{"code"},
			"token_endpoint_auth_method": "none",
			"scope":                      "tools:read tools:call",
		}
		if edit != nil {
			edit(doc)
		}
		if cacheControl != "" {
			w.Header().Set("Cache-Control", cacheControl)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}
}

// policyClient is the outbound policy's client trusting the test server's
// certificate; allowLoopback opens 127.0.0.0/8 as an operator would for an
// internal service, which only the tests of what happens after the
// connection need.
func policyClient(s *docServer, allowLoopback bool) (*http.Client, netpolicy.Policy) {
	var p netpolicy.Policy
	if allowLoopback {
		p.AllowPrivate = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	c := p.Client()
	c.Transport.(*http.Transport).TLSClientConfig = s.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	return c, p
}

// clock is a time the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func TestFetchReadsDocument(t *testing.T) {
	t.Parallel()
	s := newDocServer(t, serveDoc("max-age=600", nil))
	hc, _ := policyClient(s, true)
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f := NewFetcher(hc, Options{Now: clk.Now})
	id := s.URL + "/oauth/client.json"
	c, err := f.Fetch(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != id || c.Name != "Test Agent" || c.URI != "https://agent.example/" || !c.FromDocument ||
		c.AuthMethod != "none" || c.Scope != "tools:read tools:call" || len(c.RedirectURIs) != 2 ||
		strings.Join(c.GrantTypes, " ") != "authorization_code refresh_token" || strings.Join(c.ResponseTypes, " ") != "code" {
		t.Fatalf("client = %+v", c)
	}
	if !c.FetchedAt.Equal(clk.Now()) || !c.Expires.Equal(clk.Now().Add(10*time.Minute)) {
		t.Fatalf("fetched %v, expires %v; want now and now+10m", c.FetchedAt, c.Expires)
	}
	if !c.AllowsRedirect("http://127.0.0.1:53124/callback") || c.AllowsRedirect("https://evil.example/cb") {
		t.Fatal("AllowsRedirect: the loopback callback on any port only")
	}
}

// TestFetchNameFallsBackToHost: a document without client_name is shown
// by the host of its client_uri, or else of its own URL.
func TestFetchNameFallsBackToHost(t *testing.T) {
	t.Parallel()
	s := newDocServer(t, serveDoc("", func(d map[string]any) { delete(d, "client_name"); delete(d, "client_uri") }))
	hc, _ := policyClient(s, true)
	c, err := NewFetcher(hc, Options{}).Fetch(context.Background(), s.URL+"/c.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "127.0.0.1" {
		t.Fatalf("name = %q, want the document's host", c.Name)
	}
}

// wantRefused checks err is an invalid-input error saying want.
func wantRefused(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("fetched; want an error saying %q", want)
	}
	if !errors.Is(err, models.ErrInvalid) {
		t.Fatalf("error %v does not wrap models.ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

// TestFetchRefusesInternalAddresses is the SSRF attack: a client_id
// naming loopback, a private or link-local address (the cloud metadata
// service) or a name resolving to one. The outbound policy refuses each
// at connect time, so the server on loopback never sees a request.
func TestFetchRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	s := newDocServer(t, serveDoc("", nil))
	hc, p := policyClient(s, false)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())

	// rebinding resolves client.example to the test server, as a hostile
	// DNS answer would; the policy's dial check still runs on the address.
	rebinding := p.Client()
	dialer := &net.Dialer{Control: p.DialControl}
	rebinding.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, strings.Replace(addr, "client.example", "127.0.0.1", 1))
	}

	cases := []struct {
		name   string
		client *http.Client
		id     string
	}{
		{"loopback", hc, s.URL + "/c.json"},
		{"loopback v6", hc, "https://[::1]:" + port + "/c.json"},
		{"localhost", hc, "https://localhost:" + port + "/c.json"},
		{"private", hc, "https://10.0.0.1/c.json"},
		{"metadata service", hc, "https://169.254.169.254/latest/meta-data/c.json"},
		{"mapped loopback", hc, "https://[::ffff:127.0.0.1]:" + port + "/c.json"},
		{"name resolving to loopback", rebinding, "https://client.example:" + port + "/c.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewFetcher(tc.client, Options{}).Fetch(context.Background(), tc.id)
			wantRefused(t, err, "outbound policy refuses")
			if !errors.Is(err, netpolicy.ErrAddressRefused) {
				t.Fatalf("error %v: want the dial check's refusal", err)
			}
		})
	}
	if n := s.requests.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests; want none", n)
	}
}

// TestFetchDoesNotFollowRedirects: a document host answering 302 to an
// internal address gets its redirect reported, not followed.
func TestFetchDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	target := newDocServer(t, serveDoc("", nil))
	s := newDocServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/c.json", http.StatusFound)
	})
	hc, _ := policyClient(s, true)
	_, err := NewFetcher(hc, Options{}).Fetch(context.Background(), s.URL+"/c.json")
	wantRefused(t, err, "redirects are not followed")
	if n := target.requests.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests; want none", n)
	}
}

// TestFetchSizeCap: a document over the cap is refused having read one
// byte more than the cap; one of exactly the cap is read.
func TestFetchSizeCap(t *testing.T) {
	t.Parallel()
	const limit = 1024
	pad := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			doc, _ := json.Marshal(map[string]any{
				"client_id":     "https://" + r.Host + r.URL.Path,
				"redirect_uris": []string{"http://127.0.0.1/cb"},
			})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
			_, _ = w.Write([]byte(strings.Repeat(" ", n-len(doc))))
		}
	}
	exact := newDocServer(t, pad(limit))
	hc, _ := policyClient(exact, true)
	if _, err := NewFetcher(hc, Options{MaxBytes: limit}).Fetch(context.Background(), exact.URL+"/c.json"); err != nil {
		t.Fatalf("a document of exactly the cap: %v", err)
	}
	huge := newDocServer(t, pad(10<<20))
	hc, _ = policyClient(huge, true)
	_, err := NewFetcher(hc, Options{MaxBytes: limit}).Fetch(context.Background(), huge.URL+"/c.json")
	wantRefused(t, err, "larger than 1024 bytes")
	_, err = NewFetcher(hc, Options{}).Fetch(context.Background(), huge.URL+"/c.json")
	wantRefused(t, err, fmt.Sprintf("larger than %d bytes", DefaultMaxBytes))
}

// TestFetchTimesOut: a host that never answers, or stops halfway
// through the document, is given up on after the timeout.
func TestFetchTimesOut(t *testing.T) {
	t.Parallel()
	silent := newDocServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // until the fetcher hangs up
	})
	stalling := newDocServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"client_id":`))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	for _, s := range []*docServer{silent, stalling} {
		hc, _ := policyClient(s, true)
		_, err := NewFetcher(hc, Options{Timeout: 100 * time.Millisecond}).Fetch(context.Background(), s.URL+"/c.json")
		wantRefused(t, err, "did not answer within 100ms")
	}
}

// TestFetchRefusesBadDocuments: every way a document (or its answer) can
// be wrong is refused with a message naming what to fix.
func TestFetchRefusesBadDocuments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"mismatched client_id", serveDoc("", func(d map[string]any) { d["client_id"] = "https://agent.example/c.json" }),
			"must be the document's URL exactly"},
		{"client_id with a trailing slash", serveDoc("", func(d map[string]any) { d["client_id"] = d["client_id"].(string) + "/" }),
			"must be the document's URL exactly"},
		{"missing client_id", serveDoc("", func(d map[string]any) { delete(d, "client_id") }),
			"must be the document's URL exactly"},
		{"client secret", serveDoc("", func(d map[string]any) { d["client_secret"] = "s3cret" }),
			"holds a client_secret"},
		{"confidential client", serveDoc("", func(d map[string]any) { d["token_endpoint_auth_method"] = "client_secret_basic" }),
			`token_endpoint_auth_method "client_secret_basic" is not supported`},
		{"no redirect_uris", serveDoc("", func(d map[string]any) { delete(d, "redirect_uris") }),
			"redirect_uris is required"},
		{"implicit", serveDoc("", func(d map[string]any) { d["response_types"] = []string{"token"} }),
			`response_types: "token" is not supported`},
		{"not found", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			"answered 404 Not Found"},
		{"html", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>hi</html>")) },
			`content type "text/html; charset=utf-8"`},
		{"not an object", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`["https://x"]`))
		}, "must be a JSON object"},
		{"wrong type", serveDoc("", func(d map[string]any) { d["redirect_uris"] = "http://127.0.0.1/cb" }),
			"member redirect_uris must be an array of strings"},
		{"broken JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"client_id":`))
		}, "is not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newDocServer(t, tc.h)
			hc, _ := policyClient(s, true)
			_, err := NewFetcher(hc, Options{}).Fetch(context.Background(), s.URL+"/c.json")
			wantRefused(t, err, tc.want)
		})
	}
}

// TestFetchRefusesNonDocumentIDs: only an https URL with a path is
// fetched; anything else is refused before a request.
func TestFetchRefusesNonDocumentIDs(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	t.Cleanup(plain.Close)
	s := newDocServer(t, serveDoc("", nil))
	hc, _ := policyClient(s, true)
	f := NewFetcher(hc, Options{})
	cases := map[string]string{
		plain.URL + "/c.json":          "is not an https URL",
		"HTTPS://agent.example/c":      "is not an https URL",
		"ftp://agent.example/c":        "is not an https URL",
		"https://agent.example":        "has no path",
		"https://agent.example/":       "has no path",
		"https://agent.example/c#f":    "has a fragment",
		"https://u:p@agent.example/c":  "carries credentials",
		"https://agent.example/a/../c": ". or .. path segment",
		"my-client":                    "is not an https URL",
		"https:///c.json":              "names no host",
	}
	for id, want := range cases {
		if IsDocumentID(id) {
			t.Errorf("IsDocumentID(%q) = true", id)
		}
		_, err := f.Fetch(context.Background(), id)
		wantRefused(t, err, want)
	}
	if !IsDocumentID("https://agent.example/oauth/client.json?v=1") {
		t.Error("IsDocumentID refuses a good URL")
	}
	if n := requests.Load() + s.requests.Load(); n != 0 {
		t.Fatalf("%d requests; want none", n)
	}
}

// TestFetchCache: a document is served from memory until its max-age
// (clamped to at least a minute) ends, then fetched again; a caller
// changing what it got changes nothing cached.
func TestFetchCache(t *testing.T) {
	t.Parallel()
	s := newDocServer(t, serveDoc("max-age=30", nil))
	hc, _ := policyClient(s, true)
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f := NewFetcher(hc, Options{Now: clk.Now})
	id := s.URL + "/c.json"
	fetch := func(wantRequests int32) *Client {
		t.Helper()
		c, err := f.Fetch(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if n := s.requests.Load(); n != wantRequests {
			t.Fatalf("%d requests; want %d", n, wantRequests)
		}
		return c
	}
	c := fetch(1)
	c.RedirectURIs[0] = "https://evil.example/cb"
	if got := fetch(1); got.RedirectURIs[0] != "http://127.0.0.1/callback" {
		t.Fatalf("the cached client changed with the caller's copy: %v", got.RedirectURIs)
	}
	clk.advance(59 * time.Second)
	fetch(1)
	clk.advance(2 * time.Second)
	fetch(2)
}

func TestTTL(t *testing.T) {
	t.Parallel()
	cases := map[string]time.Duration{
		"":                             DefaultTTL,
		"max-age=600":                  10 * time.Minute,
		"public, max-age=600":          10 * time.Minute,
		"max-age=5":                    MinTTL,
		"max-age=0":                    MinTTL,
		"max-age=31536000":             MaxTTL,
		"max-age=99999999999999999999": DefaultTTL, // unreadable: as if absent
		"no-store":                     MinTTL,
		"max-age=600, no-cache":        MinTTL,
		"max-age=junk":                 DefaultTTL,
	}
	for cc, want := range cases {
		if got := ttl(cc); got != want {
			t.Errorf("ttl(%q) = %v, want %v", cc, got, want)
		}
	}
}

// heldServer serves a good document once release is closed.
func heldServer(t *testing.T) (*docServer, chan struct{}) {
	release := make(chan struct{})
	return newDocServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		serveDoc("", nil)(w, r)
	}), release
}

// TestFetchCoalesces: callers asking for one document at once share one
// request.
func TestFetchCoalesces(t *testing.T) {
	t.Parallel()
	s, release := heldServer(t)
	hc, _ := policyClient(s, true)
	f := NewFetcher(hc, Options{})
	const callers = 10
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := f.Fetch(context.Background(), s.URL+"/c.json")
			errs <- err
		}()
	}
	poll.True(t, 10*time.Second, "every caller waiting", func() bool { return f.waiting.Load() == callers })
	close(release)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := s.requests.Load(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
}

// TestFetchCallerLeaving: a caller whose context ends stops waiting at
// once; the fetch it shared goes on for the others.
func TestFetchCallerLeaving(t *testing.T) {
	t.Parallel()
	s, release := heldServer(t)
	hc, _ := policyClient(s, true)
	f := NewFetcher(hc, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := f.Fetch(ctx, s.URL+"/c.json"); left <- err }()
	poll.True(t, 10*time.Second, "the request", func() bool { return s.requests.Load() == 1 })
	stayed := make(chan error, 1)
	go func() { _, err := f.Fetch(context.Background(), s.URL+"/c.json"); stayed <- err }()
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the leaving caller got %v", err)
	}
	close(release)
	if err := <-stayed; err != nil {
		t.Fatalf("the staying caller got %v", err)
	}
	if n := s.requests.Load(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
}

// endless is a body that never ends, counting what is read of it.
type endless struct{ read atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.read.Add(int64(len(p)))
	return len(p), nil
}

func (e *endless) Close() error { return nil }

// roundTripper answers every request with its function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFetchReadsAtMostCapPlusOne: an endless document costs the fetcher
// one byte more than the cap, however much the host would send.
func TestFetchReadsAtMostCapPlusOne(t *testing.T) {
	t.Parallel()
	body := &endless{}
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"application/json"}},
			Body: body, Request: r}, nil
	})}
	_, err := NewFetcher(hc, Options{}).Fetch(context.Background(), "https://agent.example/c.json")
	wantRefused(t, err, "larger than 5120 bytes")
	if n := body.read.Load(); n != DefaultMaxBytes+1 {
		t.Fatalf("read %d bytes; want %d", n, DefaultMaxBytes+1)
	}
}
