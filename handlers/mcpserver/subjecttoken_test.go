package mcpserver

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
)

// The token for exchange rides in the token info of the HTTP request
// that carried the message, and only there.
func TestSubjectTokenRidesInTheRequestsTokenInfo(t *testing.T) {
	p := &models.Principal{ID: 7}
	with := &mcp.CallToolRequest{Extra: &mcp.RequestExtra{TokenInfo: TokenInfo(p, "provider-token")}}
	if got := subjectTokenOf(with); got != "provider-token" {
		t.Errorf("subjectTokenOf = %q", got)
	}
	for name, req := range map[string]*mcp.CallToolRequest{
		"a key's request": {Extra: &mcp.RequestExtra{TokenInfo: TokenInfo(p, "")}},
		"no token info":   {Extra: &mcp.RequestExtra{}},
		"no extra":        {},
	} {
		if got := subjectTokenOf(req); got != "" {
			t.Errorf("%s: subjectTokenOf = %q", name, got)
		}
	}
}
