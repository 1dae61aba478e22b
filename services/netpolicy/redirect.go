package netpolicy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ErrRedirectRefused is a redirect a client of the policy would not
// follow because the request carries credentials and the redirect leads
// to another origin.
var ErrRedirectRefused = errors.New("redirect refused")

// followRedirect is the redirect rule of every client of the policy: at
// most MaxRedirects, each target allowed by CheckURL, and none to another
// origin (scheme, host and port) when the request carries credentials:
// the client's own headers (sent) or any header of the first request that
// is not plainly neutral (see credentialHeader). Go's client drops
// Authorization and Cookie when the host changes but keeps them for
// another port of the same host, and forwards every other header (an
// X-Api-Key) anywhere: refusing is the one rule that holds for all of
// them. A redirect within the origin is followed with the headers: the
// server that got them is the one asked again.
func (p Policy) followRedirect(sent http.Header) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= MaxRedirects {
			return fmt.Errorf("more than %d redirects", MaxRedirects)
		}
		if msg := p.CheckURL(req.URL.String()); msg != "" {
			return fmt.Errorf("%w: redirect to %s: %s", ErrAddressRefused, req.URL.Redacted(), msg)
		}
		first := via[0]
		if SameOrigin(first.URL, req.URL) {
			return nil
		}
		name := credentialHeader(first.Header)
		if name == "" {
			name = credentialHeader(sent)
		}
		if name != "" {
			return fmt.Errorf("%w: %s redirects to %s, another origin, and the request carries credentials (%s), which are never sent anywhere else",
				ErrRedirectRefused, origin(first.URL), origin(req.URL), name)
		}
		return nil
	}
}

// RedirectRefusal is why a client of the policy refused a redirect in
// err, without the URL the client's error quotes (its path and query may
// carry secrets); "" when err is no such refusal.
func RedirectRefusal(err error) string {
	if !errors.Is(err, ErrRedirectRefused) {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// credentialHeader is the name of the first header of h that may carry a
// credential, "" when there is none. A header is taken for one unless it
// is one of the few that describe the request only: an unknown custom
// header (X-Api-Key, Private-Token) is a credential until shown not to be.
func credentialHeader(h http.Header) string {
	for name := range h {
		switch http.CanonicalHeaderKey(name) {
		case "Accept", "Accept-Encoding", "Accept-Language", "Cache-Control", "Content-Type", "Content-Length",
			"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "Pragma", "Range", "Referer",
			"User-Agent", "Mcp-Protocol-Version":
		default:
			return http.CanonicalHeaderKey(name)
		}
	}
	return ""
}

// SameOrigin reports whether a and b share scheme, host and port (a
// missing port being the scheme's).
func SameOrigin(a, b *url.URL) bool {
	return origin(a) == origin(b)
}

// origin is scheme://host:port of u, in lower case with the port spelt out.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port
}

// sending is a transport that adds its headers to the requests to one
// origin and to nothing else (a redirect, or an endpoint a server names
// elsewhere, never gets them).
type sending struct {
	next   http.RoundTripper
	origin *url.URL
	h      http.Header
}

func (t sending) RoundTrip(req *http.Request) (*http.Response, error) {
	if !SameOrigin(req.URL, t.origin) {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.h {
		req.Header[k] = v
	}
	return t.next.RoundTrip(req)
}
