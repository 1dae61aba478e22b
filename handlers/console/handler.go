// Package console holds the admin console's page handlers: each reads a
// form or a query, calls one service and renders a templ page from views.
// What it shares with the API's handlers (the error classification, the
// request's principal) comes from package handlers.
package console

import (
	"log/slog"

	"toolbelt/services/access"
	"toolbelt/services/audit"
	"toolbelt/services/authserver"
	"toolbelt/services/catalog"
	"toolbelt/services/connect"
	"toolbelt/services/identity"
	"toolbelt/services/invoke"
	"toolbelt/services/ops"
	"toolbelt/services/selection"
	"toolbelt/services/upstream"
	"toolbelt/services/vault"
)

// Handler serves the console's pages. It holds the services they call and
// nothing else.
type Handler struct {
	Registry *catalog.Registry
	Selector *selection.Selector
	Invoker  *invoke.Invoker
	Accounts *access.Accounts
	Health   *ops.Health
	Stats    *ops.Stats
	Alerts   *ops.Alerts
	// Audit reads the audit log.
	Audit *audit.Log
	// Upstreams are the MCP servers whose tools Toolbelt serves.
	Upstreams *upstream.Manager
	// Connect holds people's connected accounts at the upstreams that act
	// as each person.
	Connect *connect.Service
	// SSO, when set, signs people in through the organisation's identity
	// provider; KeySignInOff refuses the key form (TOOLBELT_KEY_SIGNIN=off).
	SSO          *identity.SSO
	KeySignInOff bool
	// OAuth is the embedded authorization server (consent, authorized
	// clients); nil when TOOLBELT_OAUTH is not embedded.
	OAuth *authserver.Server
	// Secrets keep the values people store for themselves.
	Secrets *vault.Secrets
	Log     *slog.Logger
}
