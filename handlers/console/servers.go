package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/tooldef"
	"toolbelt/services/upstream"
	"toolbelt/views"
)

const serversPage = "/admin/servers"

// serverPage is the Servers page with a server's row open.
func serverPage(name string) string { return serversPage + "?open=" + url.QueryEscape(name) }

// ServersPage shows the upstream MCP servers, a row each that opens to its
// tools and the changes waiting (by itself when the server needs you, or
// with ?open=<name>), and the form to add one.
func (h *Handler) ServersPage(c *gin.Context) error {
	if err := handlers.OnlyQuery(c, "open"); err != nil {
		return err
	}
	return h.renderServers(c, http.StatusOK, views.ServersData{Form: views.ServerForm{Transport: "stdio", Category: "api"}})
}

func (h *Handler) renderServers(c *gin.Context, status int, d views.ServersData) error {
	servers, err := h.Upstreams.Servers(c.Request.Context())
	if err != nil {
		return err
	}
	d.Categories = tooldef.Categories
	for _, t := range upstream.Transports() {
		d.Transports = append(d.Transports, views.ServerTransport{Name: t.Name, Description: t.Description})
	}
	if d.Form.Errors == nil {
		d.Form.Errors = map[string]string{}
	}
	for _, s := range servers {
		card := views.ServerCard{Name: s.Name, Transport: s.Transport, Where: s.URL, Isolation: s.Isolation, Egress: s.Egress, Category: s.Category,
			Disabled: s.DisabledAt != nil, Connections: s.Connections, Failing: s.Failing, Stderr: s.Stderr, Refused: s.Refused,
			AuthType: s.AuthType, PeopleConnected: s.PeopleConnected, Unlisted: s.Unlisted}
		if s.Transport == models.TransportStdio {
			card.Where = strings.Join(s.Command, " ")
		}
		for _, t := range s.Tools {
			card.Tools = append(card.Tools, views.ServerTool{Remote: t.Remote, Tool: t.UpstreamTool.Tool, Status: t.Status, Level: t.Level,
				Alias: t.Alias, Disabled: t.DisabledAt != nil, Refused: t.Refused,
				Changes: t.Changes, Accepted: indent(t.Accepted), Pending: indent(t.Pending)})
		}
		card.Open = card.NeedsYou() || c.Query("open") == s.Name || len(servers) == 1
		d.Servers = append(d.Servers, card)
	}
	return h.Render(c, status, views.Servers(h.Page(c, "Servers"), d))
}

func indent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// AddServerForm tests or adds a server from the page's form; a refused
// one comes back with the form as sent and each problem at its field.
func (h *Handler) AddServerForm(c *gin.Context) error {
	f := views.ServerForm{Name: c.PostForm("name"), Transport: c.PostForm("transport"), Command: c.PostForm("command"),
		Mounts: c.PostForm("mounts"), Env: c.PostForm("env"), URL: c.PostForm("url"), Headers: c.PostForm("headers"),
		Egress: c.PostForm("egress"), Isolation: c.PostForm("isolation"), Category: c.PostForm("category"),
		IdleSeconds: c.PostForm("idle_seconds"), MaxConcurrent: c.PostForm("max_concurrent"), Errors: map[string]string{}}
	spec, err := serverSpec(f)
	if err == nil {
		if c.PostForm("test") != "" {
			var tools []string
			if tools, err = h.Upstreams.Try(c.Request.Context(), spec); err == nil {
				return h.renderServers(c, http.StatusOK, views.ServersData{Form: f, Tried: tools})
			}
		} else {
			var rep *upstream.Report
			if _, rep, err = h.Upstreams.Add(c.Request.Context(), spec, handlers.CurrentPrincipal(c)); err == nil {
				return Redirect(c, serverPage(spec.Name), fmt.Sprintf("%s added: %d tools accepted.", spec.Name, len(rep.Accepted)))
			}
		}
	}
	if ve, ok := err.(*models.ValidationError); ok {
		for _, p := range ve.Problems {
			field := strings.SplitN(strings.TrimPrefix(p.Pointer, "/"), "/", 2)[0]
			if f.Errors[field] == "" {
				f.Errors[field] = p.Message
			}
		}
		return h.renderServers(c, http.StatusUnprocessableEntity, views.ServersData{Form: f, Alert: "Not added: see the fields marked."})
	}
	if refused(err) {
		return h.renderServers(c, handlers.ErrorStatus(err), views.ServersData{Form: f, Alert: "Not added: " + personMessage(err) + "."})
	}
	return err
}

// serverSpec reads the form's lines into a registration.
func serverSpec(f views.ServerForm) (upstream.Spec, error) {
	s := upstream.Spec{Name: strings.TrimSpace(f.Name), Transport: f.Transport, URL: strings.TrimSpace(f.URL),
		Egress: lines(f.Egress), Isolation: f.Isolation, Category: f.Category}
	var ps models.Problems
	for _, line := range lines(f.Command) {
		s.Command = append(s.Command, line)
	}
	pairs := func(field, text, sep string) map[string]string {
		out := map[string]string{}
		for _, line := range lines(text) {
			k, v, ok := strings.Cut(line, sep)
			if !ok {
				ps.Add("/"+field, "%q is not %s", line, map[string]string{"=": "NAME=value", ":": "Name: value"}[sep])
				continue
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	s.Mounts, s.Env, s.Headers = pairs("mounts", f.Mounts, "="), pairs("env", f.Env, "="), pairs("headers", f.Headers, ":")
	for field, text := range map[string]string{"idle_seconds": f.IdleSeconds, "max_concurrent": f.MaxConcurrent} {
		if strings.TrimSpace(text) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil {
			ps.Add("/"+field, "%q is not a whole number", text)
		}
		if field == "idle_seconds" {
			s.IdleSeconds = n
		} else {
			s.MaxConcurrent = n
		}
	}
	if len(ps) > 0 {
		return s, &models.ValidationError{What: "upstream server", Problems: ps}
	}
	return s, nil
}

// lines are a text's non-blank lines, trimmed.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// SyncServerForm looks at a server's tools again.
func (h *Handler) SyncServerForm(c *gin.Context) error {
	name := c.Param("name")
	rep, err := h.Upstreams.Sync(c.Request.Context(), name, false, handlers.CurrentPrincipal(c))
	if err != nil {
		return h.serverRefused(c, err)
	}
	return Redirect(c, serverPage(name), fmt.Sprintf("%s looked at again: %d unchanged, %d waiting for you, %d no longer served.", name, rep.Unchanged, len(rep.Pending), len(rep.Gone)))
}

// AcceptServerToolForm accepts a tool's pending definition.
func (h *Handler) AcceptServerToolForm(c *gin.Context) error {
	tool, err := h.Upstreams.Accept(c.Request.Context(), c.Param("name"), c.Param("tool"), handlers.CurrentPrincipal(c))
	if err != nil {
		return h.serverRefused(c, err)
	}
	return Redirect(c, serverPage(c.Param("name")), fmt.Sprintf("%s now has the definition the server serves.", tool))
}

// AliasServerToolForm names a tool in Toolbelt (an empty alias goes
// back to <server>__<tool>).
func (h *Handler) AliasServerToolForm(c *gin.Context) error {
	tool, err := h.Upstreams.SetAlias(c.Request.Context(), c.Param("name"), c.Param("tool"), strings.TrimSpace(c.PostForm("alias")), handlers.CurrentPrincipal(c))
	if err != nil {
		return h.serverRefused(c, err)
	}
	return Redirect(c, serverPage(c.Param("name")), fmt.Sprintf("%s of %s is now the tool %s.", c.Param("tool"), c.Param("name"), tool))
}

// DisableServerToolForm and EnableServerToolForm switch one tool off and on.
func (h *Handler) DisableServerToolForm(c *gin.Context) error {
	return h.setServerToolDisabled(c, true)
}

// EnableServerToolForm publishes a disabled tool again.
func (h *Handler) EnableServerToolForm(c *gin.Context) error {
	return h.setServerToolDisabled(c, false)
}

func (h *Handler) setServerToolDisabled(c *gin.Context, disabled bool) error {
	tool, err := h.Upstreams.SetToolDisabled(c.Request.Context(), c.Param("name"), c.Param("tool"), disabled, handlers.CurrentPrincipal(c))
	if err != nil {
		return h.serverRefused(c, err)
	}
	if disabled {
		return Redirect(c, serverPage(c.Param("name")), tool+" disabled: it is out of the catalog and its calls are refused.")
	}
	return Redirect(c, serverPage(c.Param("name")), tool+" enabled: it runs again.")
}

// DisableServerForm and EnableServerForm switch a server's tools off and on.
func (h *Handler) DisableServerForm(c *gin.Context) error { return h.setServerDisabled(c, true) }

// EnableServerForm lets a disabled server's tools run again.
func (h *Handler) EnableServerForm(c *gin.Context) error { return h.setServerDisabled(c, false) }

func (h *Handler) setServerDisabled(c *gin.Context, disabled bool) error {
	name := c.Param("name")
	if err := h.Upstreams.SetDisabled(c.Request.Context(), name, disabled); err != nil {
		return h.serverRefused(c, err)
	}
	if disabled {
		return Redirect(c, serverPage(name), name+" disabled: its tools refuse calls and its processes stopped.")
	}
	return Redirect(c, serverPage(name), name+" enabled: its tools run again.")
}

// DeleteServerForm forgets a server and retires its tools.
func (h *Handler) DeleteServerForm(c *gin.Context) error {
	name := c.Param("name")
	if err := h.Upstreams.Delete(c.Request.Context(), name); err != nil {
		return h.serverRefused(c, err)
	}
	return Redirect(c, serversPage, name+" deleted: its tools are retired.")
}

// serverRefused shows the page with why an action was refused, or
// passes on an error that is not a refusal.
func (h *Handler) serverRefused(c *gin.Context, err error) error {
	switch handlers.CodeOf(err) {
	case models.CodeConflict, models.CodeNotFound, models.CodeValidation, models.CodeInvalidRequest:
		return h.renderServers(c, handlers.ErrorStatus(err), views.ServersData{Form: views.ServerForm{Transport: "stdio", Category: "api"},
			Alert: "Not done: " + personMessage(err) + "."})
	}
	return err
}
