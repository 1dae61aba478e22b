package identity

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// keysRefetch is how soon the provider's documents (its JWKS above all)
// are fetched again. go-oidc fetches the JWKS again for every token whose
// signature the cached keys do not verify, as the spec recommends for key
// rotation; without a floor every forged token naming the issuer would
// make Toolbelt call the provider.
const keysRefetch = 5 * time.Second

// maxDocument bounds a provider document kept for replay.
const maxDocument = 1 << 20

// throttled is a transport that answers a GET it made less than
// keysRefetch ago with the answer it got then (a 200 only), so the
// provider sees at most one request per document per keysRefetch
// whatever arrives. A key rotated at the provider is seen keysRefetch
// later at worst.
type throttled struct {
	next http.RoundTripper
	now  func() time.Time

	mu   sync.Mutex
	seen map[string]fetched // by URL
}

type fetched struct {
	at     time.Time
	header http.Header
	body   []byte
}

func newThrottled(next http.RoundTripper) *throttled {
	if next == nil {
		next = http.DefaultTransport
	}
	return &throttled{next: next, now: time.Now, seen: map[string]fetched{}}
}

func (t *throttled) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		return t.next.RoundTrip(r)
	}
	u := r.URL.String()
	t.mu.Lock()
	f, ok := t.seen[u]
	t.mu.Unlock()
	if ok && t.now().Sub(f.at) < keysRefetch {
		return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: f.header.Clone(), Body: io.NopCloser(bytes.NewReader(f.body)), ContentLength: int64(len(f.body)), Request: r}, nil
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	if len(body) <= maxDocument {
		t.mu.Lock()
		t.seen[u] = fetched{at: t.now(), header: resp.Header.Clone(), body: body}
		t.mu.Unlock()
	}
	return resp, nil
}
