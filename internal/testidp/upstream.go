package testidp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// WhoamiTool is the tool every Upstream serves: it answers the subject
// (sub) of the token the call came with, as {"subject": "..."}.
const WhoamiTool = "whoami"

// Upstream is an MCP server (the go-sdk's, over Streamable HTTP) that is
// a resource server of the provider: it accepts only the provider's JWT
// access tokens whose aud is its own URL, verified against the
// provider's JWKS (go-oidc), as an upstream behind Toolbelt that trusts
// the organisation's provider would. Its log is the subjects it served.
type Upstream struct {
	// URL is its MCP endpoint, and the audience its tokens must name.
	URL string

	mu       sync.Mutex
	subjects []string
	refused  int
}

// Whoami is what WhoamiTool answers.
type Whoami struct {
	Subject string `json:"subject"`
}

// StartUpstream runs an Upstream on loopback until t ends.
func (idp *IDP) StartUpstream(t testing.TB) *Upstream {
	t.Helper()
	up := &Upstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "testidp-upstream", Version: "1.0.0"}, nil)
	// Read-only, so a gateway in front of it needs no reviewer for it.
	mcp.AddTool(srv, &mcp.Tool{Name: WhoamiTool, Description: "Who the caller's token names.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Whoami, error) {
			sub := req.Extra.TokenInfo.UserID
			up.mu.Lock()
			up.subjects = append(up.subjects, sub)
			up.mu.Unlock()
			return nil, Whoami{Subject: sub}, nil
		})
	var verifier *gooidc.IDTokenVerifier
	var once sync.Once
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		once.Do(func() {
			// The key set outlives this request: it fetches with a
			// context of its own.
			keys := gooidc.ClientContext(context.WithoutCancel(ctx), idp.Client())
			if p, err := gooidc.NewProvider(keys, idp.Issuer); err == nil {
				verifier = p.VerifierContext(keys, &gooidc.Config{ClientID: up.URL})
			}
		})
		if verifier == nil {
			return nil, auth.ErrInvalidToken
		}
		tok, err := verifier.Verify(ctx, token)
		if err != nil {
			up.mu.Lock()
			up.refused++
			up.mu.Unlock()
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: tok.Subject, Expiration: tok.Expiry}, nil
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	server := httptest.NewServer(auth.RequireBearerToken(verify, nil)(mcpHandler))
	t.Cleanup(server.Close)
	up.URL = server.URL + "/mcp"
	return up
}

// Subjects are the subjects of the calls served, in order.
func (up *Upstream) Subjects() []string {
	up.mu.Lock()
	defer up.mu.Unlock()
	return slices.Clone(up.subjects)
}

// Refused is how many requests came with a token it refused.
func (up *Upstream) Refused() int {
	up.mu.Lock()
	defer up.mu.Unlock()
	return up.refused
}

// Whoami calls WhoamiTool with token as a bearer token, as an MCP client
// (the go-sdk's) would; an error when the server refuses the token.
func (up *Upstream) Whoami(ctx context.Context, token string) (string, error) {
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "testidp-client", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: up.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return "", err
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: WhoamiTool})
	if err != nil {
		return "", err
	}
	m, _ := res.StructuredContent.(map[string]any)
	sub, _ := m["subject"].(string)
	return sub, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
