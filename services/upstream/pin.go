package upstream

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/tooldef"
)

// served is one tool as the upstream serves it: the fields that make its
// definition (what an admin accepts), in a stable encoding.
type served struct {
	Name         string               `json:"name"`
	Title        string               `json:"title,omitempty"`
	Description  string               `json:"description,omitempty"`
	InputSchema  any                  `json:"inputSchema"`
	OutputSchema any                  `json:"outputSchema,omitempty"`
	Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
}

// pin encodes a served tool and hashes it: encoding/json sorts map keys,
// so the same definition always gives the same bytes.
func pin(t *mcp.Tool) (string, string) {
	raw, _ := json.Marshal(served{Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations})
	sum := sha256.Sum256(raw)
	return string(raw), hex.EncodeToString(sum[:])
}

// MaxTools bounds the tools one upstream may serve.
const MaxTools = 500

// list asks the upstream for every tool it serves.
func (m *Manager) list(ctx context.Context, u *models.Upstream) ([]*mcp.Tool, error) {
	c, err := m.acquire(ctx, u, nil)
	if err != nil {
		return nil, err
	}
	defer c.release()
	var out []*mcp.Tool
	seen := map[string]bool{}
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("upstream server %s: tools/list: %w", u.Name, err)
		}
		switch {
		case t == nil || t.Name == "":
			return nil, fmt.Errorf("upstream server %s: tools/list served a tool without a name", u.Name)
		case seen[t.Name]:
			return nil, fmt.Errorf("upstream server %s: tools/list served %q twice", u.Name, t.Name)
		case len(out) == MaxTools:
			return nil, fmt.Errorf("upstream server %s serves more than %d tools", u.Name, MaxTools)
		}
		seen[t.Name] = true
		out = append(out, t)
	}
	return out, nil
}

// ToolName is the Toolbelt name of an upstream's tool: the server's name
// ('-' as '_'), two underscores, and the tool's name in snake_case as
// OpenAPI imports make it (catalog.SnakeCase).
func ToolName(server, remote string) string {
	return strings.ReplaceAll(server, "-", "_") + "__" + catalog.SnakeCase(remote)
}

// Level is the security level an upstream tool gets from its MCP
// annotations: read-only is safe; one that says it is not destructive
// is moderate; anything else (destructive, or unknown: the protocol's
// default is destructive) is dangerous and waits for a reviewer.
func Level(a *mcp.ToolAnnotations) string {
	switch {
	case a == nil:
		return tooldef.LevelDangerous
	case a.ReadOnlyHint:
		return tooldef.LevelSafe
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return tooldef.LevelModerate
	}
	return tooldef.LevelDangerous
}

// define is the Toolbelt definition of an accepted upstream tool.
func define(u *models.Upstream, row *models.UpstreamTool, pinned, version string) (tooldef.Definition, error) {
	var t served
	if err := json.Unmarshal([]byte(pinned), &t); err != nil {
		return tooldef.Definition{}, fmt.Errorf("decode pinned tool: %w", err)
	}
	params, err := json.Marshal(draft2020(t.InputSchema))
	if err != nil {
		return tooldef.Definition{}, fmt.Errorf("encode the input schema of %s: %w", t.Name, err)
	}
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = strings.TrimSpace(t.Title)
	}
	if desc == "" {
		desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, u.Name)
	}
	if len([]rune(desc)) > tooldef.MaxDescriptionLen {
		desc = string([]rune(desc)[:tooldef.MaxDescriptionLen-1]) + "…"
	}
	level := cmp.Or(row.Level, Level(t.Annotations))
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	def := tooldef.Definition{
		Name: ToolName(u.Name, t.Name), Version: version, Description: desc, Category: cmp.Or(row.Category, u.Category),
		Tags:       []string{"mcp", u.Name},
		Parameters: params,
		Security:   tooldef.Security{Level: level, Sandbox: u.Transport == models.TransportStdio, Network: u.Transport != models.TransportStdio || u.Network},
		Execution:  tooldef.Execution{Retryable: readOnly, MaxRetries: map[bool]int{true: 2}[readOnly]},
		Runner:     tooldef.Runner{Kind: tooldef.RunnerMCP, Server: u.Name, Tool: t.Name},
	}
	return def, nil
}

// Report says what a look at an upstream's tools found.
type Report struct {
	// Accepted are the tools made or published now; Pending the changed
	// or new ones waiting for an admin; Gone the ones no longer served;
	// Unchanged how many are as accepted.
	Accepted  []string `json:"accepted"`
	Pending   []string `json:"pending"`
	Gone      []string `json:"gone"`
	Unchanged int      `json:"unchanged"`
	// Refused are tools that could not become Toolbelt tools, with why.
	Refused map[string]string `json:"refused,omitempty"`
}

// Sync reads what the upstream serves now and compares it with what was
// accepted: a changed or new tool is held pending (and audited), a tool
// no longer served is marked gone (its calls refused), one served again
// as accepted is active again. With acceptAll, every pending tool is
// accepted at once (when an admin adds the server, or asks).
func (m *Manager) Sync(ctx context.Context, name string, acceptAll bool, by *models.Principal) (*Report, error) {
	u, err := m.d.Store.UpstreamByName(ctx, name)
	if err != nil {
		return nil, err
	}
	tools, err := m.list(ctx, u)
	if err != nil {
		return nil, err
	}
	rep, err := m.compare(ctx, u, tools, acceptAll, by)
	if err != nil || by == nil {
		return rep, err
	}
	// An admin's sync is recorded whatever it found: what the server
	// served when someone looked is part of the story.
	err = m.d.Store.Audited(ctx, models.AuditUpstreamSync, func(*models.Store) (string, string, error) {
		return "upstream:" + name, fmt.Sprintf("%d unchanged, %d accepted, %d pending, %d gone",
			rep.Unchanged, len(rep.Accepted), len(rep.Pending), len(rep.Gone)), nil
	})
	return rep, err
}

// compare is Sync's work on the tools u serves now.
func (m *Manager) compare(ctx context.Context, u *models.Upstream, tools []*mcp.Tool, acceptAll bool, by *models.Principal) (*Report, error) {
	rows, err := m.d.Store.UpstreamTools(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	byRemote := map[string]*models.UpstreamTool{}
	for i := range rows {
		byRemote[rows[i].Remote] = &rows[i]
	}
	rep := &Report{Accepted: []string{}, Pending: []string{}, Gone: []string{}}
	now := time.Now().UTC()
	for _, t := range tools {
		raw, hash := pin(t)
		row := byRemote[t.Name]
		delete(byRemote, t.Name)
		if row == nil {
			row = &models.UpstreamTool{UpstreamID: u.ID, Remote: t.Name, Status: models.UpstreamToolNew}
		}
		switch {
		case hash == row.AcceptedHash:
			if row.Status == models.UpstreamToolGone || row.PendingHash != "" {
				row.Status, row.Pending, row.PendingHash, row.PendingSince = models.UpstreamToolActive, "", "", nil
				if err := m.d.Store.SaveUpstreamTool(ctx, row); err != nil {
					return nil, err
				}
			}
			rep.Unchanged++
			continue
		case hash != row.PendingHash:
			row.Pending, row.PendingHash, row.PendingSince = raw, hash, &now
			if row.Status == models.UpstreamToolGone {
				row.Status = models.UpstreamToolActive
			}
			if acceptAll { // accepted below, and audited so
				break
			}
			err := m.d.Store.Audited(ctx, models.AuditUpstreamChange, func(tx *models.Store) (string, string, error) {
				what := "a changed definition"
				if row.AcceptedHash == "" {
					what = "a new tool"
				}
				return "upstream:" + u.Name, fmt.Sprintf("%s serves %s, %s; held pending (sha256 %s)", u.Name, what, t.Name, hash[:12]), tx.SaveUpstreamTool(ctx, row)
			})
			if err != nil {
				return nil, err
			}
			m.d.Log.WarnContext(ctx, "upstream tool definition changed: pending an admin", "server", u.Name, "tool", t.Name)
		}
		if !acceptAll {
			rep.Pending = append(rep.Pending, t.Name)
			continue
		}
		tool, err := m.accept(ctx, u, row, by)
		if err != nil {
			if rep.Refused == nil {
				rep.Refused = map[string]string{}
			}
			rep.Refused[t.Name] = err.Error()
			rep.Pending = append(rep.Pending, t.Name)
			if err := m.d.Store.SaveUpstreamTool(ctx, row); err != nil { // held pending
				return nil, err
			}
			continue
		}
		rep.Accepted = append(rep.Accepted, tool)
	}
	for _, row := range byRemote {
		if row.Status == models.UpstreamToolActive {
			row.Status = models.UpstreamToolGone
			if err := m.d.Store.SaveUpstreamTool(ctx, row); err != nil {
				return nil, err
			}
			m.d.Log.WarnContext(ctx, "upstream no longer serves a tool: its calls are refused", "server", u.Name, "tool", row.Remote)
		}
		rep.Gone = append(rep.Gone, row.Remote)
	}
	slices.Sort(rep.Gone)
	m.forgetKnown(u.Name)
	return rep, nil
}

// Accept makes a tool's pending definition the accepted one: a new
// Toolbelt tool, or a new version of it.
func (m *Manager) Accept(ctx context.Context, name, remote string, by *models.Principal) (string, error) {
	u, row, err := m.tool(ctx, name, remote)
	if err != nil {
		return "", err
	}
	if row.PendingHash == "" {
		return "", models.ErrConflict.Errorf("tool %s of %s has no pending definition", remote, name)
	}
	return m.accept(ctx, u, row, by)
}

func (m *Manager) accept(ctx context.Context, u *models.Upstream, row *models.UpstreamTool, by *models.Principal) (string, error) {
	version := "1.0.0"
	if row.Tool != "" {
		next, err := m.d.Registry.NextPatch(ctx, row.Tool)
		if err != nil {
			return "", err
		}
		version = next
	}
	def, err := define(u, row, row.Pending, version)
	if err != nil {
		return "", err
	}
	if row.Tool == "" {
		_, err = m.d.Registry.Register(ctx, def, by)
	} else {
		_, err = m.d.Registry.Publish(ctx, row.Tool, def, by)
	}
	var ve *models.ValidationError
	if errors.As(err, &ve) {
		return "", fmt.Errorf("%s cannot be a Toolbelt tool: %w", def.Name, err)
	}
	if err != nil {
		return "", err
	}
	hash := row.PendingHash
	row.Tool, row.Status = def.Name, models.UpstreamToolActive
	row.Accepted, row.AcceptedHash = row.Pending, row.PendingHash
	row.Pending, row.PendingHash, row.PendingSince = "", "", nil
	defer m.forgetKnown(u.Name)
	err = m.d.Store.Audited(ctx, models.AuditUpstreamAccept, func(tx *models.Store) (string, string, error) {
		return "upstream:" + u.Name, fmt.Sprintf("accepted %s as %s %s (sha256 %s)", row.Remote, def.Name, version, hash[:12]), tx.SaveUpstreamTool(ctx, row)
	})
	return def.Name, err
}

// Override is an admin's choice for one upstream tool, over what its
// annotations and its server give: empty fields keep those.
type Override struct {
	Level    string `json:"level,omitempty" enums:"safe,moderate,dangerous"`
	Category string `json:"category,omitempty"`
}

// SetOverride records an admin's level and category for a tool and
// publishes its accepted definition again with them.
func (m *Manager) SetOverride(ctx context.Context, name, remote string, o Override, by *models.Principal) (string, error) {
	var ps models.Problems
	if o.Level != "" && !slices.Contains(tooldef.Levels, o.Level) {
		ps.Add("/level", "%q is not a level; use one of %s", o.Level, strings.Join(tooldef.Levels, ", "))
	}
	if o.Category != "" && !slices.Contains(tooldef.Categories, o.Category) {
		ps.Add("/category", "%q is not a category; use one of %s", o.Category, strings.Join(tooldef.Categories, ", "))
	}
	if len(ps) > 0 {
		return "", &models.ValidationError{What: "upstream tool", Problems: ps}
	}
	u, row, err := m.tool(ctx, name, remote)
	if err != nil {
		return "", err
	}
	if row.Tool == "" {
		return "", models.ErrConflict.Errorf("tool %s of %s was never accepted; accept it first", remote, name)
	}
	row.Level, row.Category = o.Level, o.Category
	next, err := m.d.Registry.NextPatch(ctx, row.Tool)
	if err != nil {
		return "", err
	}
	def, err := define(u, row, row.Accepted, next)
	if err != nil {
		return "", err
	}
	if _, err := m.d.Registry.Publish(ctx, row.Tool, def, by); err != nil {
		return "", err
	}
	return row.Tool, m.d.Store.SaveUpstreamTool(ctx, row)
}

// tool is an upstream and one of its tools' rows.
func (m *Manager) tool(ctx context.Context, name, remote string) (*models.Upstream, *models.UpstreamTool, error) {
	u, err := m.d.Store.UpstreamByName(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	rows, err := m.d.Store.UpstreamTools(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	for i := range rows {
		if rows[i].Remote == remote {
			return u, &rows[i], nil
		}
	}
	return nil, nil, models.ErrNotFound.Errorf("tool %q of upstream server %q", remote, name)
}
