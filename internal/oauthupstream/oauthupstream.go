// Package oauthupstream runs, from Go tests, a real OAuth-protected MCP
// server: testdata/node/oauth-upstream.mjs, the TypeScript SDK's
// authorization server router and bearer middleware in front of two tools,
// whoami and echo. Tests of Toolbelt as an OAuth client of upstream
// servers (services/connect, the console's connections) sign people in at
// it, call its tools with their tokens, and read its log to see who called
// what, how often it refreshed and what it revoked.
//
// Like internal/nodetest, a test that needs it is skipped when node or the
// npm test packages are missing, except on CI (CI=true), where it fails.
package oauthupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/nodetest"
)

// Options shape the upstream; the zero value is an upstream with dynamic
// client registration, S256 PKCE, hour-long access tokens and honest
// metadata.
type Options struct {
	// AccessTTL is the access tokens' lifetime (whole seconds; 0: an hour).
	AccessTTL time.Duration
	// NoDCR turns dynamic client registration off.
	NoDCR bool
	// ClientID and ClientSecret pre-register a client (the secret may be
	// empty: a public client) for RedirectURIs.
	ClientID, ClientSecret string
	RedirectURIs           []string
	// CIMD advertises client_id_metadata_document_supported and accepts an
	// https client id by fetching its document (Env may carry
	// NODE_EXTRA_CA_CERTS for a test CA).
	CIMD bool
	// NoS256 makes the metadata list PKCE "plain" only, not S256.
	NoS256 bool
	// PRMResource is the resource its protected resource metadata claims
	// (default: its own MCP URL).
	PRMResource string
	// ResourceMetadata is the resource_metadata URL its 401 names.
	ResourceMetadata string
	// MetadataRedirect makes its authorization server metadata answer a
	// redirect to this URL; TokenRedirect makes the token endpoint the
	// metadata names answer a 307 to this URL.
	MetadataRedirect, TokenRedirect string
	// Env is added to the node process's environment.
	Env []string
}

// Call is one tools/call the upstream served: who the token was issued
// to, and which tool.
type Call struct {
	User string `json:"user"`
	Tool string `json:"tool"`
}

// Event is one line of the upstream's log.
type Event struct {
	Event    string `json:"event"` // token, refresh, refresh_refused, revoke, register, mark; empty for a call
	User     string `json:"user"`
	Tool     string `json:"tool"`
	Kind     string `json:"kind"`     // revoke: access, refresh or unknown
	Resource string `json:"resource"` // token: the resource it is bound to
	ClientID string `json:"client_id"`
	ID       string `json:"id"` // mark
}

// Server is a running upstream.
type Server struct {
	// URL is its MCP endpoint (http://127.0.0.1:PORT/mcp), also the
	// resource its tokens are bound to.
	URL string
	// Issuer is its authorization server's issuer (http://127.0.0.1:PORT/).
	Issuer string

	node *nodetest.Server

	mu    sync.Mutex
	log   []Event
	marks map[string]chan struct{}
	next  int
}

// Start runs an upstream with opts and stops it when t ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	nodetest.Dir(t)
	arg, err := json.Marshal(opts.args())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{marks: map[string]chan struct{}{}}
	if s.node, err = nodetest.StartReading("oauth-upstream.mjs", opts.Env, s.read, string(arg)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.node.Stop)
	s.URL = s.node.URL
	s.Issuer = strings.TrimSuffix(s.URL, "mcp")
	return s
}

// args are opts as the script reads them.
func (opts Options) args() map[string]any {
	args := map[string]any{
		"dcr": !opts.NoDCR, "cimd": opts.CIMD, "noS256": opts.NoS256,
	}
	if opts.AccessTTL > 0 {
		args["accessTTL"] = int(opts.AccessTTL / time.Second)
	}
	for k, v := range map[string]string{
		"clientId": opts.ClientID, "clientSecret": opts.ClientSecret, "prmResource": opts.PRMResource,
		"resourceMetadata": opts.ResourceMetadata, "metadataRedirect": opts.MetadataRedirect, "tokenRedirect": opts.TokenRedirect,
	} {
		if v != "" {
			args[k] = v
		}
	}
	if len(opts.RedirectURIs) > 0 {
		args["redirectUris"] = opts.RedirectURIs
	}
	return args
}

// read keeps a line of the upstream's log.
func (s *Server) read(line []byte) {
	var e Event
	if json.Unmarshal(line, &e) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Event != "mark" {
		s.log = append(s.log, e)
	} else if ch := s.marks[e.ID]; ch != nil {
		close(ch)
		delete(s.marks, e.ID)
	}
}

// Log is every event so far, in order: every line the upstream wrote
// before Log was called (it asks the upstream for a mark and reads up to
// it; a stopped upstream's log is what was read).
func (s *Server) Log() []Event {
	s.mu.Lock()
	s.next++
	id := strconv.Itoa(s.next)
	seen := make(chan struct{})
	s.marks[id] = seen
	s.mu.Unlock()
	if res, err := http.Get(s.Origin() + "/_mark?id=" + id); err == nil {
		res.Body.Close()
		select {
		case <-seen:
		case <-time.After(30 * time.Second):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.marks, id)
	return append([]Event(nil), s.log...)
}

// Calls is every tools/call so far, in order.
func (s *Server) Calls() []Call {
	var calls []Call
	for _, e := range s.Log() {
		if e.Event == "" && e.Tool != "" {
			calls = append(calls, Call{User: e.User, Tool: e.Tool})
		}
	}
	return calls
}

// Count is how many events of kind ("token", "refresh",
// "refresh_refused", "revoke", "register") it logged so far.
func (s *Server) Count(kind string) int {
	n := 0
	for _, e := range s.Log() {
		if e.Event == kind {
			n++
		}
	}
	return n
}

// Origin is the scheme and host of its URL.
func (s *Server) Origin() string { return strings.TrimSuffix(s.Issuer, "/") }

var requestField = regexp.MustCompile(`name="request" value="([^"]+)"`)

// SignIn plays the person at the upstream's authorization page: it opens
// authURL (which Toolbelt built), signs in as user and allows, and returns
// where the upstream sends the browser back (the redirect URI with code,
// state and iss). It follows no redirect itself.
func (s *Server) SignIn(authURL, user string) (*url.URL, error) {
	client := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	res, err := client.Get(authURL)
	if err != nil {
		return nil, err
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		if loc := res.Header.Get("Location"); loc != "" { // an error sent back to the redirect URI
			return url.Parse(loc)
		}
		return nil, fmt.Errorf("authorize: %s: %s", res.Status, page)
	}
	m := requestField.FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("authorize page has no sign-in form: %s", page)
	}
	res, err = client.PostForm(s.Origin()+"/consent", url.Values{"request": {string(m[1])}, "username": {user}})
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("consent: %s: %s", res.Status, body)
	}
	return url.Parse(res.Header.Get("Location"))
}

// Stop ends the upstream and waits for it. It is safe to call twice.
func (s *Server) Stop() { s.node.Stop() }

// Stderr is what the upstream wrote to its standard error so far.
func (s *Server) Stderr() string { return s.node.Stderr() }

// CallTool calls tool at the MCP endpoint mcpURL with token as a client
// would (one JSON-RPC request, no session: the upstream is stateless)
// and returns the text of its result; when the upstream refuses the
// request, the text is empty and status says how (401 for a token it
// does not take).
func CallTool(ctx context.Context, mcpURL, token, tool string, args map[string]any) (text string, status int, err error) {
	if args == nil {
		args = map[string]any{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	if err != nil {
		return "", 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mcpURL, bytes.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return "", res.StatusCode, nil
	}
	var out struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer, &out); err != nil || len(out.Result.Content) == 0 {
		return "", res.StatusCode, fmt.Errorf("%s answered %s", tool, answer)
	}
	return out.Result.Content[0].Text, res.StatusCode, nil
}

// Whoami is who the upstream takes token for: the whoami tool's answer,
// or the refusal's status as text ("401").
func Whoami(t testing.TB, mcpURL, token string) string {
	t.Helper()
	text, status, err := CallTool(t.Context(), mcpURL, token, "whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		return strconv.Itoa(status)
	}
	return text
}
