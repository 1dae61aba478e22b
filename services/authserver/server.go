package authserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/clientdoc"
)

// Endpoints, under the public URL.
const (
	AuthorizePath  = "/oauth/authorize"
	CallbackPath   = AuthorizePath + "/callback"
	TokenPath      = "/oauth/token"
	RevokePath     = "/oauth/revoke"
	KeysPath       = "/oauth/keys"
	IntrospectPath = "/oauth/introspect"
	RegisterPath   = "/oauth/register"
	MetadataPath   = "/.well-known/oauth-authorization-server"
	OIDCConfigPath = "/.well-known/openid-configuration"
)

// Resource paths: the protected resources tokens are issued for (RFC 8707
// resource indicators, the tokens' audience).
const (
	MCPResource = "/mcp"
	APIResource = "/api/v1"
)

// Deps are what the authorization server needs.
type Deps struct {
	Store *models.Store
	// PublicURL is Toolbelt's public URL, no trailing slash: the issuer,
	// and the base of the resources.
	PublicURL string
	// Key is the server's OAuth key (LoadKey): it encrypts access tokens
	// and the stored signing key.
	Key []byte
	// DCR enables dynamic client registration (RFC 7591) at
	// /oauth/register.
	DCR bool
	// ClientDocs fetches the client ID metadata documents of clients
	// whose client_id is an https URL; nil: registered clients only.
	ClientDocs *clientdoc.Fetcher
	Log        *slog.Logger
	// OnRevoke run after tokens stop working (other instances are told
	// to forget theirs).
	OnRevoke []func(context.Context)
	// Registrations counts dynamic registrations per client address
	// (RegistrationRate), in this process's memory when nil; the
	// database's store shares the count between instances.
	Registrations limiter.Store
}

// RegistrationRate bounds the clients one address may register: RFC 7591
// registration needs no credential, so without it anyone could fill the
// clients table.
func RegistrationRate() limiter.Rate { return limiter.Rate{Period: time.Hour, Limit: 20} }

// Server is the embedded authorization server.
type Server struct {
	store     *models.Store
	public    string
	resources []string
	dcr       bool
	regs      *limiter.Limiter
	docs      *clientdoc.Fetcher
	log       *slog.Logger
	onRevoke  []func(context.Context)
	provider  *op.Provider
	crypto    op.Crypto
	signing   signingKey
	tokens    *Tokens
	now       func() time.Time
}

// New builds the authorization server, loading (or, first, storing) the
// signing key every instance shares.
func New(ctx context.Context, d Deps) (*Server, error) {
	u, err := url.Parse(d.PublicURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("the public URL %q is not an http(s) URL", d.PublicURL)
	}
	s := &Server{store: d.Store, public: strings.TrimSuffix(d.PublicURL, "/"), dcr: d.DCR, docs: d.ClientDocs, log: d.Log, onRevoke: d.OnRevoke, now: time.Now}
	s.resources = []string{s.public + MCPResource, s.public + APIResource}
	s.regs = limiter.New(cmp.Or[limiter.Store](d.Registrations, memory.NewStore()), RegistrationRate())
	tokenKey, storeKey := derive(d.Key, "tokens"), derive(d.Key, "signing key")
	s.crypto = tokenCrypto{op.NewAES256GCMCrypto(tokenKey, keyID(tokenKey))}
	if s.signing, err = s.loadSigningKey(ctx, op.NewAES256GCMCrypto(storeKey, keyID(storeKey))); err != nil {
		return nil, err
	}
	s.tokens = &Tokens{s: s, known: ttlcache.New[string, tokenEntry](4096, tokenCacheTTL)}
	opts := []op.Option{
		op.WithCrypto(s.crypto),
		op.WithCustomAuthEndpoint(op.NewEndpoint(AuthorizePath)),
		op.WithCustomTokenEndpoint(op.NewEndpoint(TokenPath)),
		op.WithCustomRevocationEndpoint(op.NewEndpoint(RevokePath)),
		op.WithCustomKeysEndpoint(op.NewEndpoint(KeysPath)),
		op.WithCustomIntrospectionEndpoint(op.NewEndpoint(IntrospectPath)),
		op.WithCustomUserinfoEndpoint(op.NewEndpoint("/oauth/userinfo")),
		op.WithCustomEndSessionEndpoint(op.NewEndpoint("/oauth/end_session")),
		op.WithHttpInterceptors(s.intercept),
	}
	if u.Scheme == "http" && loopback(u.Hostname()) {
		opts = append(opts, op.WithAllowInsecure())
	}
	cfg := &op.Config{CryptoKey: tokenKey, CryptoKeyId: keyID(tokenKey), CodeMethodS256: true, GrantTypeRefreshToken: true,
		SupportedScopes: append([]string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess}, Scopes...)}
	if s.provider, err = op.NewProvider(cfg, storage{s}, op.StaticIssuer(s.public), opts...); err != nil {
		return nil, fmt.Errorf("oauth authorization server: %w", err)
	}
	return s, nil
}

// loopback says a host is this machine: only then may the issuer be http.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) loadSigningKey(ctx context.Context, c op.Crypto) (signingKey, error) {
	cur, err := s.store.OAuthSigningKey(ctx, func() (*models.OAuthKey, error) {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		sealed, err := sealKey(c, k)
		if err != nil {
			return nil, err
		}
		return &models.OAuthKey{ID: newID(), Algorithm: "RS256", Encrypted: sealed, CreatedAt: s.now().UTC()}, nil
	})
	if err != nil {
		return signingKey{}, err
	}
	k, err := openKey(c, cur.Encrypted)
	if err != nil {
		return signingKey{}, err
	}
	return signingKey{id: cur.ID, key: k}, nil
}

// Prune deletes the authorization requests and tokens expired for a day
// (a used code is kept until then, so a replay is still recognised).
func (s *Server) Prune(ctx context.Context) error {
	return s.store.DeleteExpiredOAuth(ctx, s.now().Add(-24*time.Hour))
}

// Issuer is the server's issuer identifier (the public URL).
func (s *Server) Issuer() string { return s.public }

// Resources are the resource identifiers tokens are issued for.
func (s *Server) Resources() []string { return s.resources }

// Tokens is the verifier of the access tokens this server issues.
func (s *Server) Tokens() *Tokens { return s.tokens }

// DCR says whether dynamic client registration is on.
func (s *Server) DCR() bool { return s.dcr }

// Handler serves the OAuth endpoints (op's router).
func (s *Server) Handler() http.Handler { return s.provider }

// revoked drops the cached tokens here and tells the other instances to.
func (s *Server) revoked(ctx context.Context) {
	s.tokens.Forget()
	for _, fn := range s.onRevoke {
		fn(ctx)
	}
}

// Metadata is the authorization server metadata (RFC 8414), op's
// discovery document with what op leaves out.
func (s *Server) Metadata(ctx context.Context) map[string]any {
	cfg := op.CreateDiscoveryConfig(op.ContextWithIssuer(ctx, s.public), s.provider, storage{s})
	cfg.ClientIDMetadataDocumentSupported = s.docs != nil
	cfg.CodeChallengeMethodsSupported = []oidc.CodeChallengeMethod{oidc.CodeChallengeMethodS256}
	cfg.TokenEndpointAuthMethodsSupported = []oidc.AuthMethod{oidc.AuthMethodNone}
	cfg.RevocationEndpointAuthMethodsSupported = []oidc.AuthMethod{oidc.AuthMethodNone}
	cfg.ResponseTypesSupported = []string{string(oidc.ResponseTypeCode)}
	cfg.ResponseModesSupported = []string{string(oidc.ResponseModeQuery)}
	cfg.GrantTypesSupported = []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
	// Not served: introspection needs a confidential client (there are
	// none), the user info and session endpoints an OpenID login (none).
	cfg.EndSessionEndpoint, cfg.CheckSessionIframe, cfg.DeviceAuthorizationEndpoint, cfg.UserinfoEndpoint = "", "", "", ""
	cfg.IntrospectionEndpoint, cfg.IntrospectionEndpointAuthMethodsSupported, cfg.IntrospectionEndpointAuthSigningAlgValuesSupported = "", nil, nil
	cfg.RevocationEndpointAuthSigningAlgValuesSupported, cfg.ClaimsSupported = nil, []string{"sub", "iss", "aud", "exp", "iat", "auth_time", "nonce"}
	if s.dcr {
		cfg.RegistrationEndpoint = s.public + RegisterPath
	}
	var out map[string]any
	b, _ := json.Marshal(cfg)
	_ = json.Unmarshal(b, &out)
	out["authorization_response_iss_parameter_supported"] = true
	return out
}

// ctxKey carries the request's resource parameter from the interceptor
// to the storage (op does not parse it).
type ctxKey struct{}

type resourceParam struct {
	value string
	err   error
}

// intercept runs before op on every endpoint: it reads RFC 8707's
// resource on authorize and token, defaults authorize's scope, and adds
// RFC 9207's iss to the redirects that answer the client.
func (s *Server) intercept(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case AuthorizePath, TokenPath:
			if err := r.ParseForm(); err != nil {
				http.Error(w, "cannot parse the form", http.StatusBadRequest)
				return
			}
			p := resourceParam{}
			switch rs := r.Form["resource"]; len(rs) {
			case 0:
			case 1:
				p.value = rs[0]
			default:
				p.err = invalidTarget("send one resource: a token is for one of %s", strings.Join(s.resources, ", "))
			}
			r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, p))
			if r.URL.Path == AuthorizePath && !s.redirectAllowed(r.Context(), r.Form.Get("client_id"), r.Form.Get("redirect_uri")) {
				// Never redirected to: it may be an attacker's.
				http.Error(w, "redirect_uri is not one of this client's redirect URIs", http.StatusBadRequest)
				return
			}
			if r.URL.Path == AuthorizePath && strings.TrimSpace(r.Form.Get("scope")) == "" {
				r.Form.Set("scope", strings.Join(defaultScopes, " "))
			}
		}
		if r.URL.Path == AuthorizePath || r.URL.Path == CallbackPath {
			w = &issWriter{ResponseWriter: w, iss: s.public}
		}
		next.ServeHTTP(w, r)
	})
}

// redirectAllowed says a client's redirect URI is one it registered or
// its metadata document lists; an unknown client is left to op, which
// refuses it without redirecting.
func (s *Server) redirectAllowed(ctx context.Context, clientID, uri string) bool {
	c, err := s.client(ctx, clientID)
	return err != nil || c.allowsRedirect(uri)
}

// defaultScopes are asked when a client asks none: an agent's.
var defaultScopes = []string{access.ScopeRead, access.ScopeCall}

// resource is the resource the request names, checked against the ones
// served; bound, when set, is the one the code or refresh token was
// issued for, which the request may repeat but not change. Absent at
// authorize, it is the MCP endpoint.
func (s *Server) resource(ctx context.Context, bound string) (string, error) {
	p, _ := ctx.Value(ctxKey{}).(resourceParam)
	if p.err != nil {
		return "", p.err
	}
	if p.value == "" {
		if bound != "" {
			return bound, nil
		}
		return s.resources[0], nil
	}
	for _, r := range s.resources {
		if strings.TrimSuffix(p.value, "/") == r {
			if bound != "" && r != bound {
				return "", invalidTarget("this grant is for %s, not %s", bound, p.value)
			}
			return r, nil
		}
	}
	return "", invalidTarget("%q is not a resource of this server; use one of %s", p.value, strings.Join(s.resources, ", "))
}

// issWriter adds iss (RFC 9207) to a redirect carrying a code or an error
// back to the client.
type issWriter struct {
	http.ResponseWriter
	iss string
}

func (w *issWriter) WriteHeader(code int) {
	if code == http.StatusFound || code == http.StatusSeeOther {
		if loc := w.Header().Get("Location"); loc != "" {
			w.Header().Set("Location", withIss(loc, w.iss))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// withIss adds iss to a client redirect (one with a code or an error).
func withIss(loc, iss string) string {
	u, err := url.Parse(loc)
	if err != nil || !u.IsAbs() {
		return loc
	}
	q := u.Query()
	if (q.Get("code") == "" && q.Get("error") == "") || q.Has("iss") {
		return loc
	}
	q.Set("iss", iss)
	u.RawQuery = q.Encode()
	return u.String()
}

// client returns a client: fetched from its metadata document when its
// id is an https URL, else registered.
func (s *Server) client(ctx context.Context, id string) (*client, error) {
	if clientdoc.IsDocumentID(id) {
		if s.docs == nil {
			return nil, fmt.Errorf("client %q: client ID metadata documents are not accepted here", id)
		}
		c, err := s.docs.Fetch(ctx, id)
		if err != nil {
			return nil, err
		}
		return &client{id: c.ID, name: c.Name, redirects: c.RedirectURIs, doc: c}, nil
	}
	c, err := s.store.OAuthClientByID(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, fmt.Errorf("unknown client %q", id)
	}
	if err != nil {
		return nil, oidc.ErrServerError().WithParent(err)
	}
	return &client{id: c.ID, name: c.Name, redirects: strings.Fields(c.RedirectURIs)}, nil
}

// RegisterClient registers a public client (RFC 7591: the request's body)
// for a request from address client, and returns its metadata with the id
// assigned. Past RegistrationRate from one address it is
// models.ErrRateLimited.
func (s *Server) RegisterClient(ctx context.Context, client string, body []byte) (*clientdoc.Client, error) {
	lc, err := s.regs.Get(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("count registrations: %w", err)
	}
	if lc.Reached {
		return nil, models.ErrRateLimited.Errorf("this address registered %d clients within %s, the most allowed; try again in %d s",
			lc.Limit, RegistrationRate().Period, max(1, int(time.Until(time.Unix(lc.Reset, 0)).Seconds()+0.999)))
	}
	c, err := clientdoc.ParseRegistration(body)
	if err != nil {
		return nil, err
	}
	c.ID = "tbc_" + rand.Text()
	row := &models.OAuthClient{ID: c.ID, Name: c.Name, RedirectURIs: strings.Join(c.RedirectURIs, " "),
		GrantTypes: strings.Join(c.GrantTypes, " "), CreatedAt: s.now().UTC()}
	if err := s.store.CreateOAuthClient(ctx, row); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "oauth client registered", "client_id", c.ID, "client_name", c.Name)
	return c, nil
}
