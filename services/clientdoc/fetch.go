package clientdoc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"toolbelt/services/netpolicy"
)

// The defaults of Options.
const (
	DefaultTimeout   = 5 * time.Second
	DefaultMaxBytes  = 5 << 10
	DefaultCacheSize = 1000
	// DefaultTTL is how long a document that says nothing of caching is
	// kept.
	DefaultTTL = 5 * time.Minute
	// MinTTL and MaxTTL bound how long a document is kept whatever its
	// Cache-Control says: a client asking not to be cached is fetched at
	// most once a minute, and a changed document is seen within a day.
	MinTTL = time.Minute
	MaxTTL = 24 * time.Hour
)

// Options tune a Fetcher; zero values take the defaults.
type Options struct {
	Timeout   time.Duration    // one fetch, connect to last byte (DefaultTimeout)
	MaxBytes  int              // largest document read (DefaultMaxBytes)
	CacheSize int              // documents kept in memory (DefaultCacheSize)
	Now       func() time.Time // the clock the cache expires by (time.Now)
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Fetcher fetches client ID metadata documents and keeps them for as long
// as their Cache-Control allows (within MinTTL and MaxTTL). Concurrent
// fetches of one document share one request, so a burst of authorization
// requests for one client costs its host one fetch.
type Fetcher struct {
	client *http.Client
	opts   Options
	cache  *lru.Cache[string, *Client]
	flight singleflight.Group
	// waiting counts the callers waiting on a fetch (its test waits on
	// it to know every caller has joined).
	waiting atomic.Int32
}

// NewFetcher returns a Fetcher fetching with client, which must be the
// outbound policy's (netpolicy.Policy.Client): its dialer refuses
// loopback, private and link-local addresses at connect time, so a
// client_id naming (or resolving to) an internal host reaches nothing.
// The Fetcher never follows a redirect, whatever client does.
func NewFetcher(client *http.Client, opts Options) *Fetcher {
	opts = opts.withDefaults()
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Timeout = opts.Timeout
	cache, err := lru.New[string, *Client](opts.CacheSize)
	if err != nil {
		panic(err) // only for a size below 1, which withDefaults rules out
	}
	return &Fetcher{client: &c, opts: opts, cache: cache}
}

// Fetch returns the client whose metadata document is at clientID,
// from the cache while it is fresh. Every failure is an error wrapping
// models.ErrInvalid that says what the client's author must fix.
func (f *Fetcher) Fetch(ctx context.Context, clientID string) (*Client, error) {
	if err := checkDocumentID(clientID); err != nil {
		return nil, invalid(fmt.Sprintf("client_id %q", truncate(clientID)), err)
	}
	if c, ok := f.cache.Get(clientID); ok && f.opts.Now().Before(c.Expires) {
		return c.clone(), nil
	}
	f.waiting.Add(1)
	defer f.waiting.Add(-1)
	// The shared fetch must not end when the caller who started it leaves:
	// it runs without the caller's cancellation, bounded by the timeout.
	ch := f.flight.DoChan(clientID, func() (any, error) {
		c, err := f.fetch(context.WithoutCancel(ctx), clientID)
		if err == nil {
			f.cache.Add(clientID, c)
		}
		return c, err
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Client).clone(), nil
	}
}

// fetch gets and checks one document.
func (f *Fetcher) fetch(ctx context.Context, clientID string) (*Client, error) {
	what := "client metadata document " + clientID
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return nil, invalid(what, err)
	}
	req.Header.Set("Accept", "application/json")
	fetchedAt := f.opts.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, invalid(what, fetchError(err, f.opts.Timeout))
	}
	defer resp.Body.Close()
	if err := checkResponse(resp); err != nil {
		return nil, invalid(what, err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(f.opts.MaxBytes)+1))
	if err != nil {
		return nil, invalid(what, fetchError(err, f.opts.Timeout))
	}
	if len(body) > f.opts.MaxBytes {
		return nil, invalid(what, fmt.Errorf("is larger than %d bytes: keep the document to the client's metadata", f.opts.MaxBytes))
	}
	var m metadata
	if err := decode(body, &m); err != nil {
		return nil, invalid(what, err)
	}
	switch {
	case m.ClientID != clientID:
		return nil, invalid(what, fmt.Errorf("has client_id %q: it must be the document's URL exactly, %q", truncate(m.ClientID), clientID))
	case m.ClientSecret != nil || m.ClientSecretExpiresAt != nil:
		return nil, invalid(what, errors.New("holds a client_secret: a client identified by a metadata document is public; remove the secret (and rotate it, it was published)"))
	}
	c, err := m.client(clientID)
	if err != nil {
		return nil, invalid(what, err)
	}
	c.FromDocument = true
	c.FetchedAt = fetchedAt
	c.Expires = fetchedAt.Add(ttl(resp.Header.Get("Cache-Control")))
	return c, nil
}

// checkResponse refuses anything but a 200 answer of JSON.
func checkResponse(resp *http.Response) error {
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Errorf("answered %s (a redirect to %q), and redirects are not followed: serve the document at the client_id URL itself", resp.Status, truncate(resp.Header.Get("Location")))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("answered %s: serve the document at the client_id URL with status 200", resp.Status)
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return fmt.Errorf("has the content type %q: serve it as application/json", truncate(ct))
	}
	return nil
}

// fetchError says why a request failed, in the client author's terms.
func fetchError(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, netpolicy.ErrAddressRefused):
		return fmt.Errorf("is on a loopback, private or link-local address, which the outbound policy refuses: publish it on a public https host (%w)", err)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Errorf("did not answer within %s: serve it faster or from closer", timeout)
	}
	return fmt.Errorf("could not be fetched: %w", err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// ttl is how long a document may be kept by its Cache-Control: max-age
// within [MinTTL, MaxTTL], MinTTL for no-store or no-cache, DefaultTTL
// when it says nothing usable.
func ttl(cacheControl string) time.Duration {
	d := DefaultTTL
	for _, dir := range strings.Split(cacheControl, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(dir), "=")
		switch strings.ToLower(k) {
		case "no-store", "no-cache":
			return MinTTL
		case "max-age":
			if n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64); err == nil && n >= 0 {
				d = time.Duration(min(n, int64(MaxTTL/time.Second))) * time.Second
			}
		}
	}
	return min(max(d, MinTTL), MaxTTL)
}
