package web_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// TestDisabledPersonsConnectionsRevoked: disabling alice deletes her
// connected account at once and revokes its tokens at the real OAuth
// upstream; her agent's next call is not connected; bob's connection is
// untouched and still acts as bob.
func TestDisabledPersonsConnectionsRevoked(t *testing.T) {
	t.Parallel()
	a := newPeopleApp(t)
	a.connect(t, "alice", "alice")
	a.connect(t, "bob", "bob")
	for _, who := range []string{"alice", "bob"} {
		if got, res := a.whoami(t, who, nil); got != who {
			t.Fatalf("%s's whoami before: %q %v", who, got, res)
		}
	}
	before := a.up.Count("revoke")
	if r := a.do(t, "admin", http.MethodPost, fmt.Sprintf("/api/v1/principals/%d/disable", a.ids["alice"]), nil); r.Status != http.StatusOK {
		t.Fatalf("disable alice: %d %s", r.Status, r.Body)
	}
	if left, _ := a.store.CredentialsOf(t.Context(), a.ids["alice"], ""); len(left) != 0 {
		t.Errorf("alice disabled keeps %d credentials", len(left))
	}
	// Her one connection's two tokens, the refresh token first (bob's
	// working below shows his were not among them).
	var revoked []string
	for _, e := range a.up.Log() {
		if e.Event == "revoke" {
			revoked = append(revoked, e.Kind)
		}
	}
	if revoked = revoked[before:]; !slices.Equal(revoked, []string{"refresh", "access"}) {
		t.Errorf("the upstream revoked %q after alice was disabled; want her refresh and access tokens", revoked)
	}
	// Enabled again, she is not connected: nothing was given back.
	if r := a.do(t, "admin", http.MethodPost, fmt.Sprintf("/api/v1/principals/%d/enable", a.ids["alice"]), nil); r.Status != http.StatusOK {
		t.Fatalf("enable alice: %d %s", r.Status, r.Body)
	}
	_, res := a.whoami(t, "alice", nil)
	a.wantNotConnected(t, "alice enabled again", res)
	if got, res := a.whoami(t, "bob", nil); got != "bob" {
		t.Errorf("bob after alice was disabled: %q %v", got, res)
	}
}
