package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"toolbelt/app"
	"toolbelt/internal/testidp"
	"toolbelt/models"
	"toolbelt/services/identity"
	"toolbelt/services/netpolicy"
)

// TestClusterSSO: a sign-in through the provider started on instance A
// finishes on instance B (the pending sign-in is in the shared database),
// and the console session B opens holds on A; the callback replayed on A
// is refused, the sign-in being taken once across the cluster.
func TestClusterSSO(t *testing.T) {
	const public = "http://127.0.0.1:1" // the load balancer's name for both
	idp := testidp.Start(t, testidp.Options{Users: ssoUsers, Clients: []testidp.Client{
		{ID: "toolbelt-console", Secret: "console-secret", RedirectURIs: []string{public + ssoCallback}}}})
	apps := newClusterWith(t, 2, true, netpolicy.Policy{}, func(c *app.Config) {
		c.PublicURL, c.OIDCName = public, "Test IdP"
		c.OIDC = identity.Settings{Issuer: idp.Issuer, ClientID: "toolbelt-console", ClientSecret: "console-secret",
			Roles:        identity.RoleMap{Admin: []string{"toolbelt-admins"}, Reviewer: []string{"toolbelt-reviewers"}},
			AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	})
	var fixtures []*ssoFixture
	for _, ta := range apps {
		srv := httptest.NewServer(ta.handler)
		t.Cleanup(srv.Close)
		fixtures = append(fixtures, &ssoFixture{idp: idp, app: ta, srv: srv, public: public})
	}
	a, b := fixtures[0], fixtures[1]
	onA := a.browser(t)
	// One browser: its cookies (they do not name ports) go to both.
	onB := &browserClient{t: t, srv: b.srv, http: onA.http}

	back := a.login(t, onA, a.toProvider(t, onA, "/admin/access"), "alice", "alice-pw")
	p := b.callback(onB, back)
	if p.Status != http.StatusOK || !strings.HasSuffix(p.URL, "/admin/access") || p.TestID("user").Text() != "alice" {
		t.Fatalf("the sign-in started on A, finished on B: %d at %s", p.Status, p.URL)
	}
	if p := onA.get("/admin/access"); p.Status != http.StatusOK || p.TestID("user").Text() != "alice" {
		t.Fatalf("B's session on A: %d at %s", p.Status, p.URL)
	}
	sessions := func() (n int64) {
		a.app.store.DB().Model(&models.ConsoleSession{}).Count(&n)
		return n
	}
	before := sessions()
	if p := a.callback(onA, back); p.Status == http.StatusOK && strings.Contains(p.URL, "/admin/access") && sessions() != before {
		t.Fatal("the callback replayed on A opened another session")
	}
	if after := sessions(); after != before {
		t.Errorf("sessions %d after the replay on A, %d before", after, before)
	}
}
