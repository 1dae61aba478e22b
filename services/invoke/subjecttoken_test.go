package invoke

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// The caller's token for token exchange reaches the runner of a call it
// made, and of its composite's steps, on the call and on the run's
// context (whatever token that context had before), but never the
// history: a call run later from its record (async here) has none.
func TestSubjectTokenReachesTheRunnerOnlyInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, authz := catalogFixture(t)
	reg := catalog.NewRegistry(store, quiet)
	up := tooldef.Definition{Name: "up__whoami", Version: "1.0.0", Description: "Who the upstream sees.", Category: "api",
		Parameters: json.RawMessage(`{"type":"object"}`), Security: tooldef.Security{Level: tooldef.LevelSafe},
		Runner: tooldef.Runner{Kind: tooldef.RunnerMCP, Server: "up", Tool: "whoami"}}
	steps := up
	steps.Name, steps.Runner = "twice_whoami", tooldef.Runner{Kind: tooldef.RunnerComposite,
		Steps: []tooldef.CompositeStep{{Tool: up.Name}, {Tool: up.Name}}}
	for _, def := range []tooldef.Definition{up, steps} {
		if _, err := reg.Register(ctx, def, nil); err != nil {
			t.Fatal(err)
		}
	}
	agent := &models.Principal{Name: "agent", Role: access.RoleAgent}
	if err := store.CreatePrincipal(ctx, agent, &models.APIKey{Prefix: "a", Hash: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := authz.SetGrants(agent.ID, access.Grants{Tools: []string{up.Name, steps.Name}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	mcp := runners.RunnerFunc(func(ctx context.Context, c *runners.Call) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		if runners.SubjectTokenOf(ctx) != c.SubjectToken {
			t.Errorf("the run's context carries %q, its call %q", runners.SubjectTokenOf(ctx), c.SubjectToken)
		}
		seen = append(seen, c.SubjectToken)
		return map[string]any{"ok": true}, nil
	})
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	inv := New(Deps{Store: store, Selector: newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0), Authz: authz, Redactor: red,
		Runners: runners.NewTable(runners.Deps{DataDir: t.TempDir(), Log: quiet, MCP: mcp}), DataDir: t.TempDir(), Log: quiet})
	running(t, inv.Run)
	t.Cleanup(func() { inv.Close(ctx) })
	const token = "eyJ.the-callers-own-token.sig"

	// As authentication leaves it (on the context), and as set on the
	// request (which wins over a context's).
	for ctx, req := range map[context.Context]CallRequest{
		runners.WithSubjectToken(ctx, token):           {Tool: up.Name, SessionID: "s"},
		runners.WithSubjectToken(ctx, "another-token"): {Tool: steps.Name, SessionID: "s", SubjectToken: token},
	} {
		res, err := inv.CallAcknowledged(ctx, agent, req)
		if err != nil || !res.Success {
			t.Fatalf("%s: %+v %v", req.Tool, res, err)
		}
	}
	async, err := inv.CallAcknowledged(runners.WithSubjectToken(ctx, token), agent, CallRequest{Tool: up.Name, SessionID: "s", Async: true})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the async call to end", func() (bool, string) {
		rec, err := store.CallByID(ctx, async.CallID)
		return err == nil && models.Terminal(rec.Status), "not yet"
	})
	inv.Flush()
	mu.Lock()
	defer mu.Unlock()
	if want := []string{token, token, token, ""}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("the runner saw %q, want %q (sync, two steps, then async without)", seen, want)
	}
	calls, _, err := store.Calls(ctx, models.CallFilter{Limit: 100})
	if err != nil || len(calls) < 4 {
		t.Fatalf("history: %d calls, %v", len(calls), err)
	}
	for _, c := range calls {
		if raw, _ := json.Marshal(c); strings.Contains(string(raw), token) {
			t.Errorf("the token is in the history: %s", raw)
		}
	}
}
