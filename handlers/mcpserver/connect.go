package mcpserver

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/invoke"
)

// connectRequired is the error that answers a call refused for want of
// the person's account at an upstream (UPSTREAM_NOT_CONNECTED) when the
// client said it opens URLs for its user (opens: the elicitation.url
// capability, MCP 2025-11-25): URLElicitationRequiredError (-32042)
// with one URL mode elicitation, the console page where the person
// connects. The specification gives this error for a request that cannot
// be processed until the user completes an interaction out of band —
// third-party authorization is its own example — and the request is
// retried after; sending elicitation/create instead would hold the call
// open for as long as the person takes. nil for any other answer, or a
// client without the capability: it reads the tool error, whose text
// names the URL.
func connectRequired(opens bool, res invoke.ToolResult) error {
	e := res.Error
	if res.Success || e == nil || e.Code != models.CodeUpstreamNotConnected || e.ConnectURL == "" || !opens {
		return nil
	}
	err := mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{
		Mode: "url", URL: e.ConnectURL, ElicitationID: res.CallID,
		Message: sentence(e.Message) + " Open the page, connect, then call the tool again.",
	}})
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		rpc.Message = e.Code + ": " + sentence(e.Message)
	}
	return err
}

// opensURLs reports whether the client declared URL mode elicitation.
func opensURLs(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && capsOpenURLs(ip.Capabilities)
}

// capsOpenURLs reports whether caps declare URL mode elicitation.
func capsOpenURLs(caps *mcp.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}
