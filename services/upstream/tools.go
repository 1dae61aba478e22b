package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// Alias is the Toolbelt name an admin gives an upstream's tool; empty,
// the tool goes back to <server>__<tool>.
type Alias struct {
	Alias string `json:"alias" example:"weather_now"`
}

// SetAlias names an upstream's tool in Toolbelt. An accepted tool is
// published under the new name (its accepted definition, level and
// category) and its old name retired, telling callers the new one. The
// name must be free: no other tool, upstream or not, active or retired,
// has it, and no other upstream's tool would take it when accepted. It is
// the tool's name from then on, kept when later definitions are accepted.
func (m *Manager) SetAlias(ctx context.Context, name, remote, alias string, by *models.Principal) (string, error) {
	u, row, err := m.tool(ctx, name, remote)
	if err != nil {
		return "", err
	}
	if row.DisabledAt != nil {
		return "", models.ErrConflict.Errorf("tool %s of %s is disabled: enable it before renaming it", remote, name)
	}
	next := alias
	if next == "" {
		next = ToolName(u.Name, remote)
	}
	if !tooldef.NamePattern.MatchString(next) || tooldef.ReservedToolNames[next] != "" {
		return "", &models.ValidationError{What: "alias", Problems: []models.Problem{{Pointer: "/alias",
			Message: fmt.Sprintf("%q must be snake_case ASCII: a lowercase letter, then up to 63 lowercase letters, digits or underscores, and not a name Toolbelt reserves", next)}}}
	}
	old := toolbeltName(u.Name, row)
	if next == old {
		row.Alias = alias
		return next, m.d.Store.SaveUpstreamTool(ctx, row)
	}
	own, err := m.nameFree(ctx, u, row, next)
	if err != nil {
		return "", err
	}
	if row.Tool != "" {
		if err := m.rename(ctx, u, row, next, own, by); err != nil {
			return "", err
		}
	}
	row.Alias = alias
	defer m.forgetKnown(u.Name)
	err = m.d.Store.Audited(ctx, models.AuditUpstreamAlias, func(tx *models.Store) (string, string, error) {
		return "upstream:" + u.Name, fmt.Sprintf("%s of %s: %s is now %s", remote, u.Name, old, next), tx.SaveUpstreamTool(ctx, row)
	})
	return next, err
}

// nameFree checks that next may be row's Toolbelt name: no tool has it
// but this one's own earlier name (retired when renamed: own is true),
// and no upstream's tool would take it.
func (m *Manager) nameFree(ctx context.Context, u *models.Upstream, row *models.UpstreamTool, next string) (own bool, err error) {
	t, ver, err := m.d.Store.ToolByName(ctx, next, true)
	switch {
	case err == nil:
		def, derr := tooldef.Decode(ver.Definition)
		own = derr == nil && t.RetiredAt != nil && def.Runner.Kind == tooldef.RunnerMCP && def.Runner.Server == u.Name && def.Runner.Tool == row.Remote
		if !own {
			return false, models.ErrConflict.Errorf("the name %s is another tool's (retired tools keep their names)", next)
		}
	case !errors.Is(err, models.ErrNotFound):
		return false, err
	}
	ups, err := m.d.Store.Upstreams(ctx)
	if err != nil {
		return false, err
	}
	for i := range ups {
		rows, err := m.d.Store.UpstreamTools(ctx, ups[i].ID)
		if err != nil {
			return false, err
		}
		for j := range rows {
			if rows[j].ID != row.ID && toolbeltName(ups[i].Name, &rows[j]) == next {
				return false, models.ErrConflict.Errorf("the name %s is that of %s's tool %s", next, ups[i].Name, rows[j].Remote)
			}
		}
	}
	return own, nil
}

// rename publishes row's accepted definition as the tool next (own: its
// own earlier name, restored) and retires its old name, saying where it
// went.
func (m *Manager) rename(ctx context.Context, u *models.Upstream, row *models.UpstreamTool, next string, own bool, by *models.Principal) error {
	old := row.Tool
	row.Tool = next
	var err error
	if own {
		err = m.republish(ctx, u, row, by)
	} else {
		var def tooldef.Definition
		if def, err = define(u, row, row.Accepted, "1.0.0"); err == nil {
			_, err = m.d.Registry.Register(ctx, def, by)
		}
	}
	if err != nil {
		row.Tool = old
		return err
	}
	err = m.d.Registry.RetireWhy(ctx, old, fmt.Sprintf("an administrator renamed it %s; call %s", next, next), by)
	if errors.Is(err, models.ErrNotFound) { // retired already
		err = nil
	}
	return err
}

// republish publishes row's accepted definition again as its tool's next
// patch version (with the admin's level and category; restoring it if
// retired).
func (m *Manager) republish(ctx context.Context, u *models.Upstream, row *models.UpstreamTool, by *models.Principal) error {
	next, err := m.d.Registry.NextPatch(ctx, row.Tool)
	if err != nil {
		return err
	}
	def, err := define(u, row, row.Accepted, next)
	if err != nil {
		return err
	}
	_, err = m.d.Registry.Publish(ctx, row.Tool, def, by)
	return err
}

// SetToolDisabled switches one tool of an upstream off or on. Disabled,
// its Toolbelt tool is retired — out of the catalog, selection and
// exports — and its calls are refused saying so; enabled, its accepted
// definition is published again as the next patch version.
func (m *Manager) SetToolDisabled(ctx context.Context, name, remote string, disabled bool, by *models.Principal) (string, error) {
	u, row, err := m.tool(ctx, name, remote)
	if err != nil {
		return "", err
	}
	if row.Tool == "" {
		return "", models.ErrConflict.Errorf("tool %s of %s was never accepted: it is no Toolbelt tool to disable", remote, name)
	}
	if (row.DisabledAt != nil) == disabled {
		return row.Tool, nil
	}
	action := models.AuditUpstreamToolEnable
	if disabled {
		action = models.AuditUpstreamToolDisable
		err = m.d.Registry.RetireWhy(ctx, row.Tool, fmt.Sprintf("an administrator disabled it on its MCP server %s", u.Name), by)
		if errors.Is(err, models.ErrNotFound) {
			err = nil
		}
		now := time.Now().UTC()
		row.DisabledAt = &now
	} else {
		err = m.republish(ctx, u, row, by)
		row.DisabledAt = nil
	}
	if err != nil {
		return "", err
	}
	defer m.forgetKnown(u.Name)
	err = m.d.Store.Audited(ctx, action, func(tx *models.Store) (string, string, error) {
		return "upstream:" + u.Name, fmt.Sprintf("%s (%s)", remote, row.Tool), tx.SaveUpstreamTool(ctx, row)
	})
	return row.Tool, err
}
