// Package testidp runs a real OpenID provider for tests: zitadel/oidc's
// op.Provider (the same library an operator's IdP may be built on) over
// its example in-memory storage, in an httptest server on loopback.
// Toolbelt's SSO and token verification are tested against it as they
// would be against Keycloak or Entra: discovery, JWKS, authorization code
// with PKCE, the token endpoint and userinfo are the library's, not ours.
//
// What the example storage lacks, this package adds by wrapping it:
// users carry groups (a claim in the ID token, userinfo and JWT access
// tokens), clients are registered per test (no package-level state), and
// a client can be given a resource so that its access tokens are JWTs
// whose aud is that resource (what an IdP configured as the authorization
// server of Toolbelt's /mcp issues). A confidential client can be let
// exchange a person's access token for one for an upstream server (RFC
// 8693 token exchange, zitadel's grant with this package's rules:
// exchange.go).
//
// A Go test gets a token without a browser (AccessToken drives the real
// login form with a cookie jar); a browser test fills the same form
// (/login/username: fields username and password, button "Login").
// The Forge* helpers make the tokens an attacker would try.
//
// It is test-only: nothing outside _test files may import it.
package testidp

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// DefaultGroupsClaim is the claim that lists a user's groups unless
// Options.GroupsClaim names another.
const DefaultGroupsClaim = "groups"

// Options configure a provider. The zero value is a provider with no
// users and no clients.
type Options struct {
	// GroupsClaim names the claim that carries User.Groups
	// (DefaultGroupsClaim when empty).
	GroupsClaim string
	Users       []User
	Clients     []Client
}

// IDP is a running provider. Its users and clients may be added while it
// runs; it stops when the test ends.
type IDP struct {
	// Issuer is the provider's issuer URL ("http://127.0.0.1:PORT", no
	// trailing slash), as it appears in discovery and in every token.
	Issuer string

	groupsClaim string
	storage     *opStorage
	server      *httptest.Server

	mu        sync.Mutex
	users     map[string]*User   // by ID
	clients   map[string]*Client // by ID
	exchanges []Exchange         // granted, oldest first
}

// Start runs a provider on loopback until t ends.
func Start(t testing.TB, o Options) *IDP {
	t.Helper()
	idp := &IDP{
		groupsClaim: o.GroupsClaim,
		users:       map[string]*User{},
		clients:     map[string]*Client{},
	}
	if idp.groupsClaim == "" {
		idp.groupsClaim = DefaultGroupsClaim
	}
	// The issuer is the server's URL, known only once it listens: start
	// it unstarted, build the provider, then start it.
	var handler http.Handler
	idp.server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(w, r)
	}))
	idp.server.Start()
	t.Cleanup(idp.server.Close)
	idp.Issuer = idp.server.URL

	idp.storage = &opStorage{
		Storage: storage.NewStorageWithClients(userStore{idp}, map[string]*storage.Client{}),
		idp:     idp,
	}
	provider, err := op.NewProvider(&op.Config{
		// The key encrypts opaque tokens; a test provider needs no secret one.
		CryptoKey:              sha256.Sum256([]byte("testidp")),
		CodeMethodS256:         true,
		AuthMethodPost:         true,
		GrantTypeRefreshToken:  true,
		RequestObjectSupported: false,
	}, idp.storage, op.StaticIssuer(idp.Issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatalf("testidp: provider: %v", err)
	}
	mux := http.NewServeMux()
	login := &loginForm{
		storage:  idp.storage,
		callback: op.AuthCallbackURL(provider),
	}
	interceptor := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	mux.Handle("GET "+loginPath, http.HandlerFunc(login.show))
	mux.Handle("POST "+loginPath, interceptor.HandlerFunc(login.check))
	mux.Handle("/", provider)
	handler = mux

	for _, u := range o.Users {
		idp.AddUser(u)
	}
	for _, c := range o.Clients {
		idp.AddClient(c)
	}
	return idp
}

// Client returns an HTTP client for the provider's server.
func (idp *IDP) Client() *http.Client { return idp.server.Client() }

// user returns the user with that ID or username, nil when unknown.
func (idp *IDP) user(idOrName string) *User {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	if u, ok := idp.users[idOrName]; ok {
		return u
	}
	for _, u := range idp.users {
		if u.Username == idOrName {
			return u
		}
	}
	return nil
}

// client returns the client with that ID, nil when unknown.
func (idp *IDP) client(id string) *Client {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	return idp.clients[id]
}
