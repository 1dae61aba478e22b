package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// Credentials gives the access token of the person a call acts for at an
// upstream with Auth (implemented by services/connect): refreshed when
// near expiry, and an error wrapping ErrNotConnected's kind (see
// Deps.NotConnected) when the person has none.
type Credentials interface {
	Token(ctx context.Context, u *models.Upstream, c *runners.Call) (string, error)
}

// PersonalSecrets are the values people store for themselves, filled into
// {{user.secret.NAME}} (runners.PersonalSecrets; vault.Secrets): an error
// wrapping models.ErrNotFound when the person stored none of that name.
type PersonalSecrets interface {
	PersonalSecret(ctx context.Context, principal uint, name string) (string, error)
}

// userSecret is the prefix of a placeholder naming a person's own secret.
const userSecret = "user.secret."

// personal reports whether u reaches its server as each caller's person:
// with their connected account (Auth), or with their own secrets in its
// environment or headers. Its connections are then each one person's,
// never shared.
func personal(u *models.Upstream) bool {
	return u.Auth != nil || len(personalSecrets(u)) > 0
}

// personalSecrets are the NAMEs of the {{user.secret.NAME}} in u's
// environment and headers, sorted.
func personalSecrets(u *models.Upstream) []string {
	var out []string
	for _, vals := range []map[string]string{u.Env, u.Headers} {
		for _, v := range vals {
			for _, m := range tooldef.Placeholder.FindAllStringSubmatch(v, -1) {
				if name, ok := strings.CutPrefix(m[1], userSecret); ok {
					out = append(out, name)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// notConnected is the failure of a call of u for a person without an
// account connected there.
func (m *Manager) notConnected(u *models.Upstream) *runners.Error {
	return runners.NotConnected("the upstream server "+u.Name, m.ConnectURL(u.Name))
}

// ConnectURL is the console page where a person connects their account
// at the upstream server.
func (m *Manager) ConnectURL(server string) string {
	return runners.ConnectURL(m.d.PublicURL, server)
}

// noSecret is the failure of a call for a person who did not store the
// secret name.
func (m *Manager) noSecret(name string) *runners.Error {
	return runners.NotConnected("the secret "+name, runners.SecretURL(m.d.PublicURL, name))
}

// token is the person's access token at u; a *runners.Error
// (UPSTREAM_NOT_CONNECTED) when they have none.
func (m *Manager) token(ctx context.Context, u *models.Upstream, c *runners.Call) (string, error) {
	if c == nil || c.Principal == nil {
		return "", m.notConnected(u)
	}
	if m.d.Credentials == nil {
		return "", fmt.Errorf("upstream server %s needs each person's account, and this server has no credentials service", u.Name)
	}
	tok, err := m.d.Credentials.Token(ctx, u, c)
	var said *runners.Error
	switch {
	case errors.As(err, &said):
		return "", said // the credentials' own answer (token exchange's)
	case err != nil && m.notConnectedErr(err):
		return "", m.notConnected(u)
	case err != nil:
		return "", &runners.Error{Code: models.CodeUpstream, Retryable: true,
			Message:    fmt.Sprintf("the account of %s at the upstream server %s cannot be used now: %v", c.Principal.Name, u.Name, err),
			Suggestion: "Try again later; if it keeps failing, connect the account again at " + m.ConnectURL(u.Name) + "."}
	case tok == "":
		return "", m.notConnected(u)
	}
	return tok, nil
}

// notConnectedErr reports whether err says the person has no account
// connected: Deps.NotConnected's kind, or models.ErrNotFound.
func (m *Manager) notConnectedErr(err error) bool {
	return (m.d.NotConnected != nil && errors.Is(err, m.d.NotConnected)) || errors.Is(err, models.ErrNotFound)
}

// personalSecret is the person's stored secret name, or the failure
// that asks them to store it.
func (m *Manager) personalSecret(ctx context.Context, who *models.Principal, name string) (string, error) {
	if who == nil || m.d.Personal == nil {
		return "", m.noSecret(name)
	}
	v, err := m.d.Personal.PersonalSecret(ctx, who.ID, name)
	switch {
	case errors.Is(err, models.ErrNotFound) || (err == nil && v == ""):
		return "", m.noSecret(name)
	case err != nil:
		return "", fmt.Errorf("read the secret %s of %s: %w", name, who.Name, err)
	}
	return v, nil
}

// bearer is the transport of a connection with Auth: each request to
// the server's origin carries the person's token as read at that moment
// (a refreshed token is used without connecting again), and no request
// elsewhere carries it (the client refuses redirects to another origin:
// see authClient). A 401 is remembered: the connection is dropped and
// the call answered as not connected.
type bearer struct {
	next   http.RoundTripper
	origin *url.URL
	token  func(context.Context) (string, error)
	// refused is set once the server answered 401, or the person's
	// account was gone when a request was made; said is then why, when
	// the credentials said it.
	refused atomic.Bool
	said    atomic.Pointer[runners.Error]
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !netpolicy.SameOrigin(req.URL, b.origin) {
		return b.next.RoundTrip(req)
	}
	tok, err := b.token(req.Context())
	if err != nil {
		if isNotConnected(err) {
			var e *runners.Error
			if errors.As(err, &e) {
				b.said.Store(e)
			}
			b.refused.Store(true)
		}
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := b.next.RoundTrip(req)
	if err == nil && res.StatusCode == http.StatusUnauthorized {
		b.refused.Store(true)
	}
	return res, err
}

// authClient is client (the outbound policy's, with u's headers) sending
// the person's token as bearer: redirects to another origin are refused,
// as for every request carrying credentials (netpolicy.ClientSending).
func authClient(client *http.Client, u *models.Upstream, token func(context.Context) (string, error)) (*http.Client, *bearer, error) {
	origin, err := url.Parse(u.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("%q is not a URL", u.URL)
	}
	b := &bearer{next: client.Transport, origin: origin, token: token}
	c := *client
	c.Transport = b
	check := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if check != nil {
			if err := check(req, via); err != nil {
				return err
			}
		}
		if !netpolicy.SameOrigin(via[0].URL, req.URL) {
			return fmt.Errorf("%w: the server redirects to %s://%s, another origin, and the request carries the person's token (Authorization), which is never sent anywhere else",
				netpolicy.ErrRedirectRefused, req.URL.Scheme, req.URL.Host)
		}
		return nil
	}
	return &c, b, nil
}

// actedAs says as whom a call acts at u for the person who: their
// account there, as the server named it when they connected, or their
// own secrets.
func (m *Manager) actedAs(ctx context.Context, u *models.Upstream, who *models.Principal) string {
	if u.Auth == nil {
		return fmt.Sprintf("%s, with their own secrets at %s", who.Name, u.Name)
	}
	if cred, err := m.d.Store.CredentialOf(ctx, who.ID, models.CredentialOAuth, u.Name); err == nil && cred.Account != "" {
		return fmt.Sprintf("%s, as %s at %s", who.Name, cred.Account, u.Name)
	}
	return fmt.Sprintf("%s, with their own account at %s", who.Name, u.Name)
}

// DropPerson closes the connections of the person principal to server at
// once (they disconnected their account there): their next call finds
// none, and no call in flight goes on with a connection made with it.
func (m *Manager) DropPerson(server string, principal uint) {
	m.closeWhere(func(key connKey, _ *conn) bool { return key.server == server && key.person == principal })
}

// SecretChanged closes the person principal's connections made with
// their secret name (they stored another value, or deleted it): their
// next call connects with what they store now, or is refused.
func (m *Manager) SecretChanged(principal uint, name string) {
	m.closeWhere(func(key connKey, c *conn) bool {
		return key.person == principal && c != nil && slices.Contains(personalSecrets(c.reg), name)
	})
}

// closeWhere closes the connections drop picks, and forgets the
// connection failures it picks (asked with a nil conn): the next call
// tries at once.
func (m *Manager) closeWhere(drop func(connKey, *conn) bool) {
	m.mu.Lock()
	var gone []*conn
	for key, c := range m.cns {
		if drop(key, c) {
			delete(m.cns, key)
			gone = append(gone, c)
		}
	}
	for key := range m.failures {
		if drop(key, nil) {
			delete(m.failures, key)
		}
	}
	m.mu.Unlock()
	for _, c := range gone {
		c.close()
	}
}

// refusal is the failure of a call whose connection's server refused the
// person's token, or whose person's token was gone: what the credentials
// said, else not connected.
func (m *Manager) refusal(u *models.Upstream, b *bearer) *runners.Error {
	if e := b.said.Load(); e != nil {
		return e
	}
	return m.notConnected(u)
}

// tokenCall is the call a person's token is asked for: the call itself
// when it acts for that person (it carries what token exchange needs),
// else one naming only the person.
func tokenCall(c *runners.Call, as *models.Principal) *runners.Call {
	if c != nil && c.Principal != nil && c.Principal.ID == as.ID {
		return c
	}
	return &runners.Call{Principal: as}
}

// isNotConnected reports whether err is a call's failure for want of the
// person's account or secret (UPSTREAM_NOT_CONNECTED).
func isNotConnected(err error) bool {
	var e *runners.Error
	return errors.As(err, &e) && e.Code == models.CodeUpstreamNotConnected
}

// creator is the admin who registered u, whose connection lists a
// personal server's tools when the admin asking has none; nil when
// unknown.
func (m *Manager) creator(ctx context.Context, u *models.Upstream) *models.Principal {
	if u.CreatedBy == nil {
		return nil
	}
	p, err := m.d.Store.PrincipalByID(ctx, *u.CreatedBy)
	if err != nil {
		return nil
	}
	return p
}
