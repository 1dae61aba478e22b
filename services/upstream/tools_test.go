package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// TestAliases: an admin names an upstream tool in Toolbelt. A name any
// tool has — a tool of Toolbelt's own, another upstream's, a reserved
// one — is refused; a free one makes the tool that name, the old one
// retired telling its callers the new one; the alias is kept when a
// changed definition is accepted; two tools that snake_case to one name
// are both tools once one has an alias; and going back restores the
// default name.
func TestAliases(t *testing.T) {
	ctx := context.Background()
	up, other := newBroken(t, echoTool), newBroken(t, echoTool)
	f := newFixture(t, nil) // closed first: its connections end before the servers
	if _, _, err := f.m.Add(ctx, Spec{Name: "srv", Transport: models.TransportHTTP, URL: up.url, Category: "api"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.m.Add(ctx, Spec{Name: "other", Transport: models.TransportHTTP, URL: other.url, Category: "api"}, nil); err != nil {
		t.Fatal(err)
	}
	own := tooldef.Definition{Name: "look_up", Version: "1.0.0", Description: "Look a record up.", Category: "api",
		Security: tooldef.Security{Level: tooldef.LevelSafe}, Runner: tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: "https://tools.invalid/x"}}
	if _, err := f.reg.Register(ctx, own, nil); err != nil {
		t.Fatal(err)
	}
	for alias, want := range map[string]error{"look_up": models.ErrConflict, "other__echo": models.ErrConflict, "search_tools": models.ErrInvalid,
		"Say Back": models.ErrInvalid, "say/../back": models.ErrInvalid, "say_back\u202e": models.ErrInvalid} {
		if _, err := f.m.SetAlias(ctx, "srv", "echo", alias, nil); !errors.Is(err, want) {
			t.Errorf("alias %q: %v, want %v", alias, err, want)
		}
	}
	if got, _ := f.reg.Get(ctx, "look_up"); got == nil || got.Definition.Runner.Kind != tooldef.RunnerHTTP {
		t.Errorf("the tool whose name was asked for changed: %+v", got)
	}

	name, err := f.m.SetAlias(ctx, "srv", "echo", "say_back", nil)
	if err != nil || name != "say_back" {
		t.Fatalf("alias: %s %v", name, err)
	}
	got, err := f.reg.Get(ctx, "say_back")
	if err != nil || got.Definition.Runner.Tool != "echo" || got.Definition.Runner.Server != "srv" {
		t.Fatalf("the renamed tool: %+v %v", got, err)
	}
	if data, err, _ := f.call(t, ctx, "say_back", map[string]any{"message": "renamed"}); err != nil || !strings.Contains(mustJSON(t, data), "echo: renamed") {
		t.Errorf("a call of the renamed tool: %s %v", mustJSON(t, data), err)
	}
	if _, err := f.reg.Get(ctx, "srv__echo"); err == nil {
		t.Error("the old name is still a tool")
	}
	if old, _, err := f.store.ToolByName(ctx, "srv__echo", true); err != nil || old.RetiredAt == nil || !strings.Contains(old.RetiredWhy, "renamed it say_back") {
		t.Errorf("the old name's callers are not told the new one: %+v %v", old, err)
	}
	if entries, _, _ := f.store.AuditEntries(ctx, models.AuditFilter{Action: models.AuditUpstreamAlias}); len(entries) != 1 ||
		!strings.Contains(entries[0].Detail, "srv__echo is now say_back") {
		t.Errorf("audit: %+v", entries)
	}
	// Another server's tool cannot take the name now.
	if _, err := f.m.SetAlias(ctx, "other", "echo", "say_back", nil); !errors.Is(err, models.ErrConflict) {
		t.Errorf("another server's tool took an alias in use: %v", err)
	}

	// A changed definition, accepted: still say_back.
	up.serve(&mcp.Tool{Name: "echo", Description: "Say the message back, louder.", Annotations: echoTool.Annotations, InputSchema: echoTool.InputSchema})
	f.m.Drop("srv")
	if _, err := f.m.Sync(ctx, "srv", false, nil); err != nil {
		t.Fatal(err)
	}
	if name, err := f.m.Accept(ctx, "srv", "echo", nil); err != nil || name != "say_back" {
		t.Fatalf("accept under the alias: %s %v", name, err)
	}
	if got, _ := f.reg.Get(ctx, "say_back"); got == nil || got.Definition.Version != "1.0.1" || !strings.Contains(got.Definition.Description, "louder") {
		t.Errorf("after accepting: %+v", got)
	}
	if _, err := f.reg.Get(ctx, "srv__echo"); err == nil {
		t.Error("accepting brought the old name back")
	}

	// Two tools one name: an alias for one makes both tools.
	up.serve(echoTool, &mcp.Tool{Name: "get-sum", Description: "Add.", InputSchema: object(nil)}, &mcp.Tool{Name: "getSum", Description: "Add too.", InputSchema: object(nil)})
	f.m.Drop("srv")
	if rep, err := f.m.Sync(ctx, "srv", false, nil); err != nil || len(rep.Refused) != 2 {
		t.Fatalf("the collision: %+v %v", rep, err)
	}
	if _, err := f.m.SetAlias(ctx, "srv", "getSum", "add_too", nil); err != nil {
		t.Fatal(err)
	}
	rep, err := f.m.Sync(ctx, "srv", false, nil)
	if err != nil || len(rep.Refused) != 0 || len(rep.Pending) != 3 {
		t.Fatalf("after the alias: %+v %v", rep, err)
	}
	for remote, want := range map[string]string{"get-sum": "srv__get_sum", "getSum": "add_too"} {
		if name, err := f.m.Accept(ctx, "srv", remote, nil); err != nil || name != want {
			t.Errorf("accept %s: %s %v", remote, name, err)
		}
	}

	// Back to the default name: the old tool is restored, the alias retired.
	if name, err := f.m.SetAlias(ctx, "srv", "echo", "", nil); err != nil || name != "srv__echo" {
		t.Fatalf("back to the default: %s %v", name, err)
	}
	if got, err := f.reg.Get(ctx, "srv__echo"); err != nil || !strings.Contains(got.Definition.Description, "louder") {
		t.Errorf("the default name restored: %+v %v", got, err)
	}
	if _, err := f.reg.Get(ctx, "say_back"); err == nil {
		t.Error("the alias is still a tool")
	}
}

// TestDisableOneTool: an admin disables one tool of a server: it leaves
// the catalog, its calls are refused saying so, the server's other tools
// run; a definition accepted meanwhile stays out of the catalog until the
// tool is enabled, then is what runs.
func TestDisableOneTool(t *testing.T) {
	ctx := context.Background()
	up := newBroken(t, echoTool, pingTool)
	f := newFixture(t, nil)
	if _, _, err := f.m.Add(ctx, Spec{Name: "srv", Transport: models.TransportHTTP, URL: up.url, Category: "api"}, nil); err != nil {
		t.Fatal(err)
	}
	before, err := f.reg.Get(ctx, "srv__echo")
	if err != nil {
		t.Fatal(err)
	}
	if name, err := f.m.SetToolDisabled(ctx, "srv", "echo", true, nil); err != nil || name != "srv__echo" {
		t.Fatalf("disable: %s %v", name, err)
	}
	if _, err := f.reg.Get(ctx, "srv__echo"); err == nil {
		t.Error("a disabled tool is still in the catalog")
	}
	page, err := f.reg.List(ctx, catalog.ListOptions{Limit: 50})
	if err != nil || page.Total != 1 || !strings.Contains(mustJSON(t, page.Tools), "srv__ping") {
		t.Errorf("the catalog: %s %v", mustJSON(t, page.Tools), err)
	}
	// A call that resolved the tool before (another instance, a queued
	// call) is refused by the runner.
	if _, err := f.m.Runner().Run(ctx, callOf(before.Definition, map[string]any{"message": "x"})); err == nil || !strings.Contains(err.Error(), "an administrator disabled it") {
		t.Errorf("a disabled tool's call: %v", err)
	}
	if _, err, _ := f.call(t, ctx, "srv__ping", map[string]any{}); err != nil {
		t.Errorf("the other tool: %v", err)
	}

	// A change accepted while disabled stays out until enabled.
	up.serve(&mcp.Tool{Name: "echo", Description: "Say the message back, changed.", Annotations: echoTool.Annotations, InputSchema: echoTool.InputSchema}, pingTool)
	f.m.Drop("srv")
	if _, err := f.m.Sync(ctx, "srv", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Accept(ctx, "srv", "echo", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Get(ctx, "srv__echo"); err == nil {
		t.Error("accepting published a disabled tool")
	}
	if _, err := f.m.SetAlias(ctx, "srv", "echo", "shout", nil); !errors.Is(err, models.ErrConflict) {
		t.Errorf("renaming a disabled tool: %v", err)
	}
	if _, err := f.m.SetToolDisabled(ctx, "srv", "echo", false, nil); err != nil {
		t.Fatal(err)
	}
	got, err := f.reg.Get(ctx, "srv__echo")
	if err != nil || !strings.Contains(got.Definition.Description, "changed") {
		t.Fatalf("enabled: %+v %v", got, err)
	}
	if data, err, _ := f.call(t, ctx, "srv__echo", map[string]any{"message": "back"}); err != nil || !strings.Contains(mustJSON(t, data), "echo: back") {
		t.Errorf("enabled, a call: %s %v", mustJSON(t, data), err)
	}
	for _, action := range []string{models.AuditUpstreamToolDisable, models.AuditUpstreamToolEnable} {
		if entries, _, _ := f.store.AuditEntries(ctx, models.AuditFilter{Action: action}); len(entries) != 1 {
			t.Errorf("%s audited %d times", action, len(entries))
		}
	}

	// Only an accepted tool is a tool to disable.
	up.serve(echoTool, pingTool, &mcp.Tool{Name: "fresh", Description: "New.", InputSchema: object(nil)})
	f.m.Drop("srv")
	if _, err := f.m.Sync(ctx, "srv", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.SetToolDisabled(ctx, "srv", "fresh", true, nil); !errors.Is(err, models.ErrConflict) {
		t.Errorf("disabling a tool never accepted: %v", err)
	}
	if _, err := f.m.SetToolDisabled(ctx, "srv", "nope", true, nil); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("disabling a tool the server never served: %v", err)
	}
}

// callOf is a call of def as the execute stage makes it.
func callOf(def tooldef.Definition, args map[string]any) *runners.Call {
	return &runners.Call{ID: models.NewID(), Def: def, Args: args, Session: "s"}
}
