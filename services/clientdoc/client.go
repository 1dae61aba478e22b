// Package clientdoc reads the metadata of the OAuth clients of the
// embedded authorization server: client ID metadata documents (an https
// client_id whose JSON document Toolbelt fetches, MCP authorization
// 2025-11-25) and RFC 7591 dynamic registration requests. Both end in the
// same validated Client, so the authorization server trusts one shape
// whichever way a client introduced itself.
package clientdoc

import (
	"net/url"
	"slices"
	"strconv"
	"time"
)

// Client is an OAuth client's metadata: the RFC 7591 fields Toolbelt uses.
// Toolbelt registers public clients only (PKCE, no secret), so a Client
// carries nothing secret.
type Client struct {
	ID            string // client_id (for a metadata document: its URL)
	Name          string // client_name, or the host of the client when it gave none
	URI, LogoURI  string // client_uri, logo_uri (https only; the consent page shows their host)
	RedirectURIs  []string
	GrantTypes    []string // authorization_code, refresh_token
	ResponseTypes []string // code
	AuthMethod    string   // token_endpoint_auth_method: always "none"
	Scope         string   // the scopes the client will restrict itself to, space-separated
	FromDocument  bool     // read from a client ID metadata document
	// FetchedAt is when the document was fetched; Expires when it must be
	// fetched again (zero for a registered client).
	FetchedAt, Expires time.Time
}

// AllowsRedirect reports whether uri is one of the client's redirect
// URIs: compared exactly (RFC 9700 §4.1.3), except that a registered http
// loopback URI (127.0.0.1 or [::1]) matches on any port, because a native
// client listens on whatever port it gets (RFC 8252 §7.3). "localhost" is
// never registered (see checkRedirectURI), so it never gets the exception.
func (c *Client) AllowsRedirect(uri string) bool {
	if slices.Contains(c.RedirectURIs, uri) {
		return true
	}
	got, err := url.Parse(uri)
	if err != nil || !loopbackHTTP(got) {
		return false
	}
	for _, r := range c.RedirectURIs {
		want, err := url.Parse(r)
		if err == nil && loopbackHTTP(want) && sameButPort(want, got) {
			return true
		}
	}
	return false
}

// loopbackHTTP reports whether u is an http URL on loopback (an IP literal
// or localhost) with nothing an exact comparison would ignore
// (credentials, a fragment).
func loopbackHTTP(u *url.URL) bool {
	if u.Scheme != "http" || u.User != nil || u.Fragment != "" || u.RawFragment != "" {
		return false
	}
	h := u.Hostname()
	return h == "127.0.0.1" || h == "::1" || h == "localhost"
}

// sameButPort compares two loopback URLs on everything but the port.
func sameButPort(a, b *url.URL) bool {
	return a.Hostname() == b.Hostname() && a.EscapedPath() == b.EscapedPath() &&
		a.RawQuery == b.RawQuery && a.ForceQuery == b.ForceQuery && validPort(b.Port())
}

// validPort reports whether p is empty (the scheme's default) or a port
// number without leading zeroes.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}

// clone is a copy the caller may change without changing the cache.
func (c *Client) clone() *Client {
	d := *c
	d.RedirectURIs = slices.Clone(c.RedirectURIs)
	d.GrantTypes = slices.Clone(c.GrantTypes)
	d.ResponseTypes = slices.Clone(c.ResponseTypes)
	return &d
}
