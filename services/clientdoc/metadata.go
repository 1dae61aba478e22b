package clientdoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"toolbelt/models"
)

// The bounds of a client's metadata: enough for any real client, small
// enough that a consent page and a cache entry stay small.
const (
	maxName         = 100  // characters of client_name
	maxURI          = 2000 // bytes of one URI
	maxRedirectURIs = 20
	maxListValues   = 10 // grant_types, response_types
	maxScope        = 1000
)

// ErrRedirectURI marks a refusal of a client's redirect URIs: RFC 7591
// §3.2.2 answers it with invalid_redirect_uri, every other refusal with
// invalid_client_metadata.
var ErrRedirectURI = errors.New("invalid redirect_uris")

// redirectError is a refusal of the redirect URIs, matching ErrRedirectURI.
type redirectError struct{ error }

func (e redirectError) Is(target error) bool { return target == ErrRedirectURI }
func (e redirectError) Unwrap() error        { return e.error }

// metadata is the JSON of a client ID metadata document or of an RFC 7591
// registration request: the fields Toolbelt reads. Other members are
// ignored, as RFC 7591 §2 asks.
type metadata struct {
	ClientID      string   `json:"client_id"`
	ClientName    string   `json:"client_name"`
	ClientURI     string   `json:"client_uri"`
	LogoURI       string   `json:"logo_uri"`
	RedirectURIs  []string `json:"redirect_uris"`
	GrantTypes    []string `json:"grant_types"`
	ResponseTypes []string `json:"response_types"`
	AuthMethod    string   `json:"token_endpoint_auth_method"`
	Scope         string   `json:"scope"`
	// A client with a metadata document has no secret: one in the
	// document is a mistake the client's author must hear about.
	ClientSecret          *string `json:"client_secret"`
	ClientSecretExpiresAt *int64  `json:"client_secret_expires_at"`
}

// decode reads a JSON object into m, saying which member has the wrong
// type.
func decode(body []byte, m *metadata) error {
	if !utf8.Valid(body) {
		return errors.New("is not UTF-8 JSON")
	}
	err := json.Unmarshal(body, m)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field == "":
		return fmt.Errorf("must be a JSON object, not a JSON %s", te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("member %s must be %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return fmt.Errorf("is not valid JSON (at byte %d): %v", se.Offset, err)
	}
	return fmt.Errorf("is not valid JSON: %v", err)
}

// jsonKind names a Go kind as JSON does.
func jsonKind(kind string) string {
	switch kind {
	case "slice":
		return "an array of strings"
	case "string":
		return "a string"
	}
	return "a number"
}

// client checks m and returns the Client it describes; id is the client
// id (the document's URL, or "" for a registration request).
func (m *metadata) client(id string) (*Client, error) {
	c := &Client{ID: id, Scope: m.Scope}
	var err error
	if c.RedirectURIs, err = redirectURIs(m.RedirectURIs); err != nil {
		return nil, redirectError{err}
	}
	if c.GrantTypes, err = grantTypes(m.GrantTypes); err != nil {
		return nil, err
	}
	if c.ResponseTypes, err = responseTypes(m.ResponseTypes); err != nil {
		return nil, err
	}
	if c.AuthMethod, err = authMethod(m.AuthMethod); err != nil {
		return nil, err
	}
	if err = checkScope(m.Scope); err != nil {
		return nil, err
	}
	if c.URI, err = pageURI("client_uri", m.ClientURI); err != nil {
		return nil, err
	}
	if c.LogoURI, err = pageURI("logo_uri", m.LogoURI); err != nil {
		return nil, err
	}
	if c.Name, err = name(m.ClientName); err != nil {
		return nil, err
	}
	if c.Name == "" {
		c.Name = fallbackName(c)
	}
	return c, nil
}

// redirectURIs checks the client's redirect URIs: at least one, each one
// checkRedirectURI accepts.
func redirectURIs(uris []string) ([]string, error) {
	switch {
	case len(uris) == 0:
		return nil, errors.New("redirect_uris is required: list the URIs the authorization server may send the code to, e.g. [\"http://127.0.0.1/callback\"]")
	case len(uris) > maxRedirectURIs:
		return nil, fmt.Errorf("redirect_uris lists %d URIs; list at most %d", len(uris), maxRedirectURIs)
	}
	for i, u := range uris {
		if err := checkRedirectURI(u); err != nil {
			return nil, fmt.Errorf("redirect_uris[%d] %q %w", i, truncate(u), err)
		}
	}
	return slices.Clone(uris), nil
}

// privateUseScheme is a private-use URI scheme a native app claims (RFC
// 8252 §7.1 asks for the reverse-domain form, com.example.app; desktop
// MCP hosts such as IDEs use their product's name, cursor:, so both are
// taken). browserSchemes, which a browser or the system gives a meaning
// of their own, are not.
var privateUseScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

var browserSchemes = []string{"javascript", "vbscript", "data", "file", "blob", "filesystem", "about", "view-source",
	"ftp", "ws", "wss", "mailto", "tel", "sms", "intent", "jar", "chrome", "resource", "urn"}

// checkRedirectURI says what is wrong with a redirect URI. Toolbelt takes
// https, http on loopback (a native app's listener, RFC 8252 §7.3: the IP
// literals, and localhost, which the MCP authorization spec allows and
// its hosts use) and private-use schemes (RFC 8252 §7.1);
// never a fragment, credentials or anything but printable ASCII, so the
// exact comparison of AllowsRedirect compares what a browser would send.
func checkRedirectURI(raw string) error {
	if len(raw) > maxURI {
		return fmt.Errorf("is longer than %d bytes", maxURI)
	}
	for _, r := range raw {
		if r <= ' ' || r > '~' {
			return errors.New("holds a space, a control or a non-ASCII character: percent-encode it")
		}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("is not a URI: %v", errors.Unwrap(err))
	case !u.IsAbs():
		return errors.New("is not absolute: write the whole URI with its scheme, e.g. https://app.example/callback")
	case strings.Contains(raw, "#"):
		return errors.New("has a fragment: remove the #… part (the code is sent in the query)")
	case u.User != nil:
		return errors.New("carries credentials (user@): remove them")
	}
	switch {
	case u.Scheme == "https":
		if u.Host == "" {
			return errors.New("names no host")
		}
	case u.Scheme == "http":
		switch h := u.Hostname(); {
		case h == "127.0.0.1" || h == "::1" || h == "localhost":
		default:
			return errors.New("uses http on a host that is not loopback: use https, or http://127.0.0.1 for a native app")
		}
	case privateUseScheme.MatchString(u.Scheme) && !slices.Contains(browserSchemes, u.Scheme):
	default:
		return fmt.Errorf("has the scheme %q, which is not allowed: use https, http://127.0.0.1, http://[::1] or http://localhost (loopback), or a private-use scheme such as com.example.app:/callback", u.Scheme)
	}
	return nil
}

// grantTypes checks grant_types: authorization_code (the default) and,
// besides it, refresh_token; the implicit, password and client
// credentials grants are not OAuth 2.1's or not a public client's.
func grantTypes(types []string) ([]string, error) {
	if len(types) == 0 {
		return []string{"authorization_code"}, nil
	}
	if len(types) > maxListValues {
		return nil, fmt.Errorf("grant_types lists %d values; list authorization_code and refresh_token at most", len(types))
	}
	for _, g := range types {
		if g != "authorization_code" && g != "refresh_token" {
			return nil, fmt.Errorf("grant_types: %q is not supported; use authorization_code (and refresh_token)", truncate(g))
		}
	}
	if !slices.Contains(types, "authorization_code") {
		return nil, errors.New("grant_types must include authorization_code: it is the only grant that issues tokens to a new client")
	}
	return slices.Clone(types), nil
}

// responseTypes checks response_types: code only (the implicit flow's
// token and id_token are refused).
func responseTypes(types []string) ([]string, error) {
	if len(types) == 0 {
		return []string{"code"}, nil
	}
	if len(types) > maxListValues {
		return nil, fmt.Errorf("response_types lists %d values; list code only", len(types))
	}
	for _, r := range types {
		if r != "code" {
			return nil, fmt.Errorf("response_types: %q is not supported; use [\"code\"] (the implicit flow is not allowed)", truncate(r))
		}
	}
	return slices.Clone(types), nil
}

// authMethod checks token_endpoint_auth_method. Toolbelt issues no client
// secrets: every client is public and proves itself with PKCE, so "none"
// is the only method, and an absent one means it (RFC 7591 §3.2.1 lets the
// server answer with the method it registered).
func authMethod(m string) (string, error) {
	if m == "" || m == "none" {
		return "none", nil
	}
	return "", fmt.Errorf("token_endpoint_auth_method %q is not supported: Toolbelt registers public clients only; use \"none\" and PKCE (S256)", truncate(m))
}

// checkScope checks scope: space-separated tokens of RFC 6749 §3.3's
// characters. Which scopes the client gets is the authorization server's
// to decide.
func checkScope(scope string) error {
	if len(scope) > maxScope {
		return fmt.Errorf("scope is longer than %d bytes", maxScope)
	}
	for _, r := range scope {
		if r != ' ' && (r < '!' || r > '~' || r == '"' || r == '\\') {
			return errors.New("scope holds a character a scope may not: use space-separated scopes such as \"tools:read tools:call\"")
		}
	}
	return nil
}

// pageURI checks client_uri or logo_uri: https only, since the consent
// page shows its host and a browser may load the logo.
func pageURI(field, raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if len(raw) > maxURI {
		return "", fmt.Errorf("%s is longer than %d bytes", field, maxURI)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("%s %q must be an https URL without credentials, e.g. https://app.example/", field, truncate(raw))
	}
	return raw, nil
}

// name checks client_name: it is shown on the consent page, so no
// control or invisible formatting characters (a right-to-left override
// could make one name read as another) and a bounded length.
func name(n string) (string, error) {
	n = strings.TrimSpace(n)
	if utf8.RuneCountInString(n) > maxName {
		return "", fmt.Errorf("client_name is longer than %d characters: shorten it", maxName)
	}
	for _, r := range n {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "", fmt.Errorf("client_name holds the control or formatting character %U: remove it", r)
		}
	}
	return n, nil
}

// fallbackName names a client that gave no client_name by the host that
// identifies it best: its page, its document, its first redirect URI.
func fallbackName(c *Client) string {
	for _, raw := range append([]string{c.URI, c.ID}, c.RedirectURIs...) {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			return u.Hostname()
		}
	}
	return "unnamed client"
}

// truncate shortens a value quoted back in an error.
func truncate(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// invalid is the error a client's metadata fails with: what (the document
// or the registration) and why.
func invalid(what string, err error) error {
	return models.ErrInvalid.Errorf("%s: %w", what, err)
}
