package web_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"toolbelt/internal/nodetest"
)

// TestE2EConnectedAccounts is the "done when" in Chromium: alice
// and bob each open the Connections page a not-connected error names,
// connect their own account through the upstream's sign-in form, and
// their agents (their own keys, over REST and MCP) get their own names
// from whoami; the upstream saw two identities; the call page says as
// whom a call acted; alice disconnects in the console and her next call
// is UPSTREAM_NOT_CONNECTED while bob's still works; the Servers page
// counts the people connected. Both pages pass axe's WCAG rules.
func TestE2EConnectedAccounts(t *testing.T) {
	axe, err := os.ReadFile(filepath.Join(nodetest.Dir(t), "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	a := newPeopleApp(t)
	e := newE2EAt(t, a.testApp, a.base)

	// Before connecting, the agent's call names the page to open.
	_, res := a.whoami(t, "alice", nil)
	a.wantNotConnected(t, "alice before connecting", res)
	connectURL := res["error"].(map[string]any)["connect_url"].(string)

	for _, who := range []string{"alice", "bob"} {
		e.signIn(who)
		e.run(who+" opens the page the error names",
			chromedp.Navigate(connectURL), chromedp.WaitVisible(tid("connection-people")), loaded())
		if e.count(`tr.highlight[data-testid="connection-people"]`) != 1 {
			t.Errorf("%s: the asked-for server is not marked", who)
		}
		if got := e.text(chromedp.CSS(`[data-testid="connection-people"] [data-testid="connection-state"]`)); got != "not connected" {
			t.Errorf("%s before connecting: %q", who, got)
		}
		if who == "alice" {
			if v := e.axeViolations(axe); len(v) > 0 {
				t.Errorf("connections page, %d rules:\n  %s", len(v), strings.Join(v, "\n  "))
			}
		}
		e.run(who+" connects at the upstream",
			chromedp.Click(tid("connect")),
			chromedp.WaitVisible(chromedp.CSS("#username")),
			chromedp.SendKeys(chromedp.CSS("#username"), who),
			chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
			chromedp.WaitVisible(tid("notice")), loaded())
		if got := e.text(tid("notice")); !strings.Contains(got, "Connected your account at people") {
			t.Errorf("%s's notice: %q", who, got)
		}
		if got := e.text(chromedp.CSS(`[data-testid="connection-people"] [data-testid="connection-state"]`)); got != "connected" {
			t.Errorf("%s after connecting: %q", who, got)
		}
		if who == "bob" {
			if v := e.axeViolations(axe); len(v) > 0 {
				t.Errorf("connections page, connected, %d rules:\n  %s", len(v), strings.Join(v, "\n  "))
			}
		}
		e.run(who+" signs out", chromedp.Click(tid("sign-out")), chromedp.WaitVisible(tid("sign-in-form")))
	}

	// Each one's agent acts as that person, over REST and MCP.
	got, res := a.whoami(t, "alice", nil)
	if got != "alice" {
		t.Fatalf("alice's agent got %q: %v", got, res)
	}
	aliceCall := res["call_id"].(string)
	if r := mcpCallRaw(t, connectAs(t, a, "bob", false), "people__whoami"); r.IsError || textBlock(r) != "bob" {
		t.Fatalf("bob's MCP agent got %+v", r)
	}
	if calls := a.up.Calls(); len(calls) != 2 || calls[0].User != "alice" || calls[1].User != "bob" {
		t.Fatalf("the upstream saw %+v, want alice then bob", calls)
	}

	// Alice reads her call, then disconnects.
	e.signIn("alice")
	e.run("alice's call page", chromedp.Navigate(a.base+"/admin/calls/"+aliceCall), chromedp.WaitVisible(tid("call-acted-as")))
	if got := e.text(tid("call-acted-as")); !strings.HasPrefix(got, "alice,") || !strings.Contains(got, "people") {
		t.Errorf("acted as %q", got)
	}
	e.run("alice disconnects",
		chromedp.Navigate(a.base+"/admin/connections"), chromedp.WaitVisible(tid("disconnect")), loaded(),
		chromedp.Click(tid("disconnect")), chromedp.WaitVisible(tid("notice")), loaded())
	if got := e.text(tid("notice")); !strings.Contains(got, "Disconnected") {
		t.Errorf("disconnect notice %q", got)
	}
	_, res = a.whoami(t, "alice", nil)
	a.wantNotConnected(t, "alice after disconnecting", res)
	if got, res := a.whoami(t, "bob", nil); got != "bob" {
		t.Fatalf("bob after alice left: %q %v", got, res)
	}
	e.run("alice signs out", chromedp.Click(tid("sign-out")), chromedp.WaitVisible(tid("sign-in-form")))

	// The admin's Servers page: its auth, and root and bob connected.
	e.signIn("admin")
	e.run("servers page", chromedp.Navigate(a.base+"/admin/servers"), chromedp.WaitVisible(tid("row-people")), loaded())
	if got := e.text(chromedp.CSS(`[data-testid="row-people"] [data-testid="people-connected"]`)); got != "2 people connected" {
		t.Errorf("people connected: %q", got)
	}
	if r := a.do(t, "admin", http.MethodGet, "/api/v1/upstreams/people", nil).JSON(t); r["people_connected"] != float64(2) {
		t.Errorf("people_connected = %v", r["people_connected"])
	}
}
