package web_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
)

// TestMCPListSeesClusterChanges: tools/list on one instance, its pages
// kept (mcpserver's listCache), lists what another instance changes as
// soon as that instance's notice arrives, as a REST selection does: a tool
// registered, an agent's grant given and withdrawn, a tool retired, in
// both protocol versions.
func TestMCPListSeesClusterChanges(t *testing.T) {
	apps := newCluster(t, 2, false)
	a, b := apps[0], apps[1]
	srv := httptest.NewServer(b.handler)
	t.Cleanup(srv.Close)
	for _, version := range []string{"stateless", "session"} {
		admin := newMCPPeer(t, srv, b.keys["admin"], version == "stateless")
		agent := newMCPPeer(t, srv, b.keys["agent"], version == "stateless")
		name := "parrot_" + version
		listed := func(p *mcpPeer) (bool, string) {
			got := pageNames(t, p, "")
			return got[name], fmt.Sprint(len(got), " tools")
		}
		if ok, _ := listed(admin); ok {
			t.Fatalf("%s: listed before it exists", name)
		}
		if r := a.do(t, "admin", "POST", "/api/v1/tools", echoTool(name, "1.0.0")); r.Status != 201 {
			t.Fatal(string(r.Body))
		}
		within(t, version+": a tool registered on A listed on B", func() (bool, string) { return listed(admin) })
		if ok, _ := listed(agent); ok {
			t.Fatalf("%s: listed to an agent without its grant", name)
		}
		grant := func(categories ...string) {
			t.Helper()
			if r := a.do(t, "admin", "PUT", fmt.Sprintf("/api/v1/principals/%d/grants", a.ids["agent"]),
				map[string]any{"categories": categories}); r.Status != 200 {
				t.Fatal(r.Status, string(r.Body))
			}
		}
		grant("code") // echoTool's category
		within(t, version+": a grant on A listed on B", func() (bool, string) { return listed(agent) })
		grant("shell")
		within(t, version+": a grant withdrawn on A unlisted on B", func() (bool, string) { ok, got := listed(agent); return !ok, got })
		if r := a.do(t, "admin", "DELETE", "/api/v1/tools/"+name, nil); r.Status != 204 {
			t.Fatal(r.Status, string(r.Body))
		}
		within(t, version+": a tool retired on A unlisted on B", func() (bool, string) { ok, got := listed(admin); return !ok, got })
	}
}
