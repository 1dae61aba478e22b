package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/runners"
)

// TestPersonalSecretsNeverComeBack: a server that echoes the person's own
// secret it was sent ({{user.secret.NAME}} in its headers) hands none of
// it to the call's answer or its error message; and once the person
// stores another value, their next call sends that one, not the value
// their connection was made with.
func TestPersonalSecretsNeverComeBack(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var last string
	server := mcp.NewServer(&mcp.Implementation{Name: "keyed", Version: "1"}, nil)
	type in struct {
		Fail bool `json:"fail,omitempty"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "key", Description: "Say which API key the request carried."},
		func(_ context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			key := req.Extra.Header.Get("X-Api-Key")
			mu.Lock()
			last = key
			mu.Unlock()
			return &mcp.CallToolResult{IsError: a.Fail, Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + key}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)

	store, _ := modelstest.Store(t)
	secrets := personalSecretsOf{}
	f := newFixtureOn(t, store, Deps{Personal: secrets, PublicURL: "https://toolbelt.test"})
	admin, alice := person(t, store, "admin", "admin"), person(t, store, "alice", "agent")
	secrets[admin.ID] = map[string]string{"API_KEY": "admin-key-0123456789abcdef"}
	secrets[alice.ID] = map[string]string{"API_KEY": "alice-key-0123456789abcdef"}
	if _, _, err := f.m.Add(t.Context(), Spec{Name: "keyed", Transport: models.TransportHTTP, URL: srv.URL, Category: "api",
		Headers: map[string]string{"X-Api-Key": "{{user.secret.API_KEY}}"}}, admin); err != nil {
		t.Fatal(err)
	}
	def, err := f.reg.Get(t.Context(), "keyed__key")
	if err != nil {
		t.Fatal(err)
	}
	call := func(args map[string]any) (string, error) {
		data, err := f.m.Runner().Run(t.Context(), &runners.Call{ID: models.NewID(), Def: def.Definition, Args: args, Session: "s", Principal: alice})
		return mustJSON(t, data), err
	}
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return last
	}

	got, err := call(map[string]any{})
	if err != nil || strings.Contains(got, "alice-key") || !strings.Contains(got, "[REDACTED:") || seen() != "alice-key-0123456789abcdef" {
		t.Fatalf("answer %s, %v; the server saw %q", got, err, seen())
	}
	_, err = call(map[string]any{"fail": true})
	if err == nil || strings.Contains(err.Error(), "alice-key") || !strings.Contains(err.Error(), "[REDACTED:") {
		t.Fatalf("failure %v", err)
	}

	// alice stores another key: the connection made with the old one
	// closes, and her next call carries the new one, hidden as well.
	secrets[alice.ID]["API_KEY"] = "alice-new-key-fedcba9876543210"
	f.m.SecretChanged(alice.ID, "API_KEY")
	got, err = call(map[string]any{})
	if err != nil || strings.Contains(got, "alice-new-key") || seen() != "alice-new-key-fedcba9876543210" {
		t.Fatalf("after the change: answer %s, %v; the server saw %q", got, err, seen())
	}
}
