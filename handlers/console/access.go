package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/tooldef"
	"toolbelt/views"
)

const accessPage = "/admin/access"

// accessForm is what a refused form sends back to the access page: the
// new-principal form, or one agent's grants form, as entered and with
// their errors, or a message for the whole page.
type accessForm struct {
	create      views.AccessCreateForm
	grantsOf    uint
	grants      access.Grants
	grantErrors map[string]string
	alert       string
	// q and role narrow the list; open is the principal shown opened.
	q, role string
	open    uint
}

// Access lists principals with their keys and, for agents, their grants:
// a row each, found by name (q) and role, opened to its keys and grants
// (open=id, or the one match of a search).
func (h *Handler) Access(c *gin.Context) error {
	if err := handlers.OnlyQuery(c, "q", "role", "open"); err != nil {
		return err
	}
	f := accessForm{q: strings.TrimSpace(c.Query("q")), role: c.Query("role")}
	if f.role != "" && !slices.Contains(access.Roles, f.role) {
		return models.ErrInvalid.Errorf("role %q is not a role (use %s)", f.role, strings.Join(access.Roles, ", "))
	}
	if open := c.Query("open"); open != "" {
		id, err := strconv.ParseUint(open, 10, 32)
		if err != nil {
			return models.ErrInvalid.Errorf("open=%q is not a principal's id", open)
		}
		f.open = uint(id)
	}
	return h.renderAccess(c, http.StatusOK, f)
}

// accessOf is the access page opened to principal id's row.
func accessOf(id uint) string {
	return accessPage + "?open=" + strconv.FormatUint(uint64(id), 10) + "#principal-" + strconv.FormatUint(uint64(id), 10)
}

// renderAccess shows the access page, with a refused form as it was sent.
func (h *Handler) renderAccess(c *gin.Context, status int, f accessForm) error {
	ctx := c.Request.Context()
	ps, err := h.Accounts.Principals(ctx)
	if err != nil {
		return err
	}
	d := views.AccessData{Roles: access.Roles, Create: f.create, Alert: f.alert, Q: f.q, Role: f.role, Total: len(ps)}
	if d.Create.Role == "" {
		d.Create.Role = access.RoleAgent
	}
	if d.Create.Errors == nil {
		d.Create.Errors = map[string]string{}
	}
	me := handlers.CurrentPrincipal(c)
	now := time.Now()
	safe, err := h.safeTools(ctx)
	if err != nil {
		return err
	}
	clients, err := h.oauthClients(ctx)
	if err != nil {
		return err
	}
	sessions, err := h.consoleSessions(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if f.q != "" && !strings.Contains(strings.ToLower(p.Name), strings.ToLower(f.q)) || f.role != "" && p.Role != f.role {
			if p.ID != f.grantsOf {
				continue
			}
		}
		row := views.AccessPrincipal{ID: p.ID, Name: p.Name, Role: p.Role, Created: p.CreatedAt, Disabled: p.DisabledAt, You: me != nil && me.ID == p.ID,
			Open: p.ID == f.open || p.ID == f.grantsOf, Clients: clients[p.ID], Sessions: sessions[p.ID]}
		for _, k := range p.Keys {
			row.Keys = append(row.Keys, views.AccessKey{ID: k.ID, Prefix: k.Prefix, Label: k.Label, Created: k.CreatedAt, LastUsed: k.LastUsedAt,
				Expires: k.ExpiresAt, Revoked: k.RevokedAt, Expired: k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)})
		}
		if p.Role == access.RoleAgent {
			g, errs := f.grants, f.grantErrors
			if p.ID != f.grantsOf {
				if g, err = h.Accounts.Grants(ctx, p.ID); err != nil {
					return err
				}
				errs = nil
			}
			row.Grants = grantsForm(g, errs, safe)
		}
		d.Principals = append(d.Principals, row)
		if p.ID == f.grantsOf && row.Grants == nil && d.Alert == "" {
			d.Alert = "Grants not saved: " + f.grantErrors[""] // not an agent: there is no form to show it in
		}
	}
	if len(d.Principals) == 1 && (f.q != "" || f.role != "") {
		d.Principals[0].Open = true // the one match of a search
	}
	return h.Render(c, status, views.Access(h.Page(c, "Access"), d))
}

func grantsForm(g access.Grants, errs map[string]string, safe []string) *views.AccessGrants {
	form := &views.AccessGrants{Errors: errs, ToolCount: len(g.Tools)}
	if form.Errors == nil {
		form.Errors = map[string]string{}
	}
	for _, cat := range tooldef.Categories {
		form.Categories = append(form.Categories, views.PlaygroundCategory{Name: cat, Checked: slices.Contains(g.Categories, cat)})
	}
	// The safe tools are choices to tick; a name that is none of them
	// (mistyped, or not safe) stays typed, where its error is shown.
	var typed []string
	for _, t := range g.Tools {
		if !slices.Contains(safe, t) {
			typed = append(typed, t)
		}
	}
	form.Tools = strings.Join(typed, ", ")
	for _, t := range safe {
		form.SafeTools = append(form.SafeTools, views.PlaygroundCategory{Name: t, Checked: slices.Contains(g.Tools, t)})
	}
	return form
}

// safeTools names the catalog's safe tools, those grants may name one by
// one.
func (h *Handler) safeTools(ctx context.Context) ([]string, error) {
	page, err := h.Registry.List(ctx, catalog.ListOptions{Level: tooldef.LevelSafe, Limit: catalog.MaxPageSize})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(page.Tools))
	for i, t := range page.Tools {
		names[i] = t.Name
	}
	return names, nil
}

// CreatePrincipalPage creates a principal and shows its first key, once.
func (h *Handler) CreatePrincipalPage(c *gin.Context) error {
	in := access.NewPrincipal{Name: c.PostForm("name"), Role: c.PostForm("role")}
	out, err := h.Accounts.CreatePrincipal(c.Request.Context(), in, handlers.CurrentPrincipal(c))
	var ve *models.ValidationError
	switch {
	case errors.As(err, &ve):
		f := accessForm{create: views.AccessCreateForm{Name: in.Name, Role: in.Role, Errors: problemsByField(ve, "name")}}
		return h.renderAccess(c, handlers.ErrorStatus(err), f)
	case handlers.CodeOf(err) == models.CodeConflict:
		f := accessForm{create: views.AccessCreateForm{Name: in.Name, Role: in.Role,
			Errors: map[string]string{"name": fmt.Sprintf("A principal named %q exists already; choose another name.", strings.TrimSpace(in.Name))}}}
		return h.renderAccess(c, handlers.ErrorStatus(err), f)
	case err != nil:
		return err
	}
	shown := views.AccessNewKey{Principal: out.Name, Role: out.Role, Key: out.Key, NewPrincipal: true}
	if err := h.describeKey(c, out.ID, out.KeyID, &shown); err != nil {
		return err
	}
	return h.Render(c, http.StatusCreated, views.AccessKeyShown(h.Page(c, "Principal created"), shown))
}

// describeKey fills in the owner and the shown prefix of a new key, as the
// access list will show them.
func (h *Handler) describeKey(c *gin.Context, principalID, keyID uint, k *views.AccessNewKey) error {
	ps, err := h.Accounts.Principals(c.Request.Context())
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.ID != principalID {
			continue
		}
		k.Principal, k.Role, k.Back = p.Name, p.Role, accessOf(p.ID)
		for _, key := range p.Keys {
			if key.ID == keyID {
				k.Prefix = key.Prefix
			}
		}
	}
	return nil
}

// IssueKeyPage adds a key to a principal and shows it, once.
func (h *Handler) IssueKeyPage(c *gin.Context) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	opts := access.KeyOptions{Label: c.PostForm("label")}
	if v := strings.TrimSpace(c.PostForm("expires")); v != "" {
		day, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return h.renderAccess(c, handlers.StatusFor(models.CodeValidation), accessForm{alert: fmt.Sprintf("No key issued: the expiry %q is not a date.", v)})
		}
		opts.ExpiresAt = &day
	}
	key, err := h.Accounts.IssueKey(c.Request.Context(), id, opts, handlers.CurrentPrincipal(c))
	var ve *models.ValidationError
	if errors.As(err, &ve) {
		return h.renderAccess(c, handlers.ErrorStatus(err), accessForm{alert: "No key issued: " + problemsText(ve) + "."})
	}
	if err != nil {
		return err
	}
	shown := views.AccessNewKey{Key: key.Key}
	if err := h.describeKey(c, key.PrincipalID, key.ID, &shown); err != nil {
		return err
	}
	return h.Render(c, http.StatusCreated, views.AccessKeyShown(h.Page(c, "Key issued"), shown))
}

// RevokeKeyPage revokes a key. The service refuses the last active admin
// key; its reason is shown on the access page.
func (h *Handler) RevokeKeyPage(c *gin.Context) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	k, err := h.Accounts.RevokeKey(c.Request.Context(), id, handlers.CurrentPrincipal(c))
	if handlers.CodeOf(err) == models.CodeConflict {
		return h.renderAccess(c, handlers.ErrorStatus(err), accessForm{alert: "Not revoked: " + personMessage(err) + "."})
	}
	if err != nil {
		return err
	}
	return Redirect(c, accessOf(k.OwnerID), fmt.Sprintf("Key “%s” of %s revoked; it stopped working at once.", k.Label, k.Owner))
}

// RevokeOAuthPage revokes an OAuth client's grant (its tokens stop at
// once, on every instance).
func (h *Handler) RevokeOAuthPage(c *gin.Context) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	if h.OAuth == nil {
		return models.ErrNotFound.Errorf("the embedded authorization server is off")
	}
	g, err := h.OAuth.RevokeGrant(c.Request.Context(), id, handlers.CurrentPrincipal(c))
	if err != nil {
		return err
	}
	return Redirect(c, accessOf(g.PrincipalID), fmt.Sprintf("Application “%s” revoked; its tokens stopped working at once.", g.ClientName))
}

// EndSessionPage ends one console session of a principal (a stolen
// laptop, a person who left): it must sign in again, on every instance.
func (h *Handler) EndSessionPage(c *gin.Context) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	if err := h.Accounts.EndConsoleSession(c.Request.Context(), id, c.Param("session"), handlers.CurrentPrincipal(c)); err != nil {
		return err
	}
	return Redirect(c, accessOf(id), "Console session ended; whoever held it must sign in again.")
}

// consoleSessions are each principal's open console sessions, as Access
// lists them.
func (h *Handler) consoleSessions(ctx context.Context) (map[uint][]views.AccessSession, error) {
	all, err := h.Accounts.ConsoleSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := map[uint][]views.AccessSession{}
	for id, ss := range all {
		for _, cs := range ss {
			how := "API key"
			if cs.IdentityID != nil {
				how = cs.Person
			}
			out[id] = append(out[id], views.AccessSession{ID: cs.Hash, How: how, Created: cs.CreatedAt, Expires: cs.ExpiresAt})
		}
	}
	return out, nil
}

// oauthClients are the OAuth clients each principal allowed.
func (h *Handler) oauthClients(ctx context.Context) (map[uint][]views.AccessClient, error) {
	out := map[uint][]views.AccessClient{}
	if h.OAuth == nil {
		return out, nil
	}
	gs, err := h.OAuth.Grants(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		out[g.PrincipalID] = append(out[g.PrincipalID], views.AccessClient{GrantID: g.ID, Name: g.ClientName, ClientID: g.ClientID,
			Scopes: g.Scopes, Created: g.CreatedAt, LastUsed: g.LastUsedAt})
	}
	return out, nil
}

// DisablePrincipalPage disables a principal after its confirmation; a
// refusal (yourself, the last admin) is shown on the access page.
func (h *Handler) DisablePrincipalPage(c *gin.Context) error { return h.setDisabledPage(c, true) }

// EnablePrincipalPage enables a disabled principal again.
func (h *Handler) EnablePrincipalPage(c *gin.Context) error { return h.setDisabledPage(c, false) }

func (h *Handler) setDisabledPage(c *gin.Context, disabled bool) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	p, err := h.Accounts.SetDisabled(c.Request.Context(), id, disabled, handlers.CurrentPrincipal(c))
	if refused(err) {
		return h.renderAccess(c, handlers.ErrorStatus(err), accessForm{alert: "Not changed: " + personMessage(err) + "."})
	}
	if err != nil {
		return err
	}
	if disabled {
		return Redirect(c, accessOf(p.ID), fmt.Sprintf("%s disabled: its keys stopped working at once.", p.Name))
	}
	return Redirect(c, accessOf(p.ID), fmt.Sprintf("%s enabled: its active keys work again.", p.Name))
}

// DeletePrincipalPage deletes a principal after its confirmation.
func (h *Handler) DeletePrincipalPage(c *gin.Context) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	err = h.Accounts.DeletePrincipal(c.Request.Context(), id, handlers.CurrentPrincipal(c))
	if refused(err) {
		return h.renderAccess(c, handlers.ErrorStatus(err), accessForm{alert: "Not deleted: " + personMessage(err) + "."})
	}
	if err != nil {
		return err
	}
	return Redirect(c, accessPage, fmt.Sprintf("Principal %d deleted with its keys and grants.", id))
}

// refused reports a change the rules refused (yourself, the last admin),
// which the access page explains, as opposed to a fault.
func refused(err error) bool {
	code := handlers.CodeOf(err)
	return code == models.CodeConflict || code == models.CodeForbidden
}

// problemsText joins a validation error's problems for one sentence.
func problemsText(ve *models.ValidationError) string {
	parts := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		parts[i] = strings.TrimPrefix(pointerField(p.Pointer)+" ", " ") + p.Message
	}
	return strings.Join(parts, "; ")
}

// SetGrantsPage replaces an agent's grants from its form: categories as
// checkboxes, tool names typed in one field.
func (h *Handler) SetGrantsPage(c *gin.Context) error {
	id, err := handlers.IDParam(c, "id")
	if err != nil {
		return err
	}
	g := access.Grants{Categories: c.PostFormArray("category"), Tools: splitNames(c.PostForm("tools"))}
	for _, t := range c.PostFormArray("tool") { // the ticked safe tools
		if !slices.Contains(g.Tools, t) {
			g.Tools = append(g.Tools, t)
		}
	}
	if g.Categories == nil {
		g.Categories = []string{}
	}
	saved, err := h.Accounts.SetGrants(c.Request.Context(), id, g, handlers.CurrentPrincipal(c))
	var ve *models.ValidationError
	if errors.As(err, &ve) {
		return h.renderAccess(c, handlers.ErrorStatus(err), accessForm{grantsOf: id, grants: g, grantErrors: problemsByField(ve, "")})
	}
	if err != nil {
		return err
	}
	return Redirect(c, accessOf(id), "Grants saved: "+count(len(saved.Categories), "category", "categories")+", "+count(len(saved.Tools), "tool", "tools")+".")
}

// splitNames reads tool names separated by commas or white space.
func splitNames(s string) []string {
	names := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if names == nil {
		names = []string{}
	}
	return names
}

// pointerField is the form field a problem's JSON pointer names: its
// first segment, unescaped ("/categories/0" → "categories").
func pointerField(ptr string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(ptr, "/"), "/")
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
}

// problemsByField keys each problem by its first pointer segment
// ("/tools/2" → "tools"); a problem without a pointer goes to fallback.
// A field with several problems shows them all.
func problemsByField(ve *models.ValidationError, fallback string) map[string]string {
	out := map[string]string{}
	for _, p := range ve.Problems {
		field := pointerField(p.Pointer)
		if field == "" {
			field = fallback
		}
		msg := p.Message
		if out[field] != "" {
			msg = out[field] + "; " + msg
		}
		out[field] = msg
	}
	return out
}

// count is n with the noun in its number: "1 tool", "3 tools".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
