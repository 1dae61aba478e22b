package invoke

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// resolve finds the tool (the requested version, or the current one). An
// unknown name gets the closest real tools as a suggestion.
func (inv *Invoker) resolve(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		name := c.req.Tool
		var rt *resolvedTool
		var err error
		if c.req.Version == "" {
			rt, err = inv.current(ctx, name)
		} else {
			rt, err = inv.version(ctx, name, c.req.Version)
		}
		switch {
		case errors.Is(err, models.ErrNotFound):
			sug, _ := inv.selector.Suggest(ctx, c.caller, c.req.SessionID, name, 5)
			msg := fmt.Sprintf("tool %q does not exist", name)
			if c.req.Version != "" && tooldef.NamePattern.MatchString(name) {
				msg = fmt.Sprintf("tool %q has no version %q (or does not exist)", name, c.req.Version)
			} else if why := inv.retiredWhy(ctx, name); why != "" {
				msg = fmt.Sprintf("tool %q is out of service: %s", name, why)
			}
			hint := "Call " + models.DirectionsOf(ctx).SearchTools() + " with your task to find the right tool."
			if len(sug) > 0 {
				hint = "Use one of these tools instead: " + strings.Join(sug, ", ") + "."
			}
			return refusal(models.CodeToolNotFound, msg, hint)
		case errors.Is(err, errUndecodable):
			return failure(models.CodeInternal, "internal error", false, "Report the call id to an administrator.")
		case err != nil:
			inv.log.ErrorContext(ctx, "resolve tool", "err", err, "call_id", c.id)
			return storeFailure(err)
		}
		c.def, c.version = rt.def, rt.versionID
		return next(ctx, c)
	}
}

// retiredWhy is why a retired tool is out of service, when its retiring
// said ("" otherwise, and for a name that is no tool).
func (inv *Invoker) retiredWhy(ctx context.Context, name string) string {
	if !tooldef.NamePattern.MatchString(name) {
		return ""
	}
	t, _, err := inv.store.ToolByName(ctx, name, true)
	if err != nil || t.RetiredAt == nil {
		return ""
	}
	return t.RetiredWhy
}

// Runner is the kind of runner the tool named runs with ("" when no tool
// of that name is in service): how its results read.
func (inv *Invoker) Runner(ctx context.Context, name string) string {
	rt, err := inv.current(ctx, name)
	if err != nil {
		return ""
	}
	return rt.def.Runner.Kind
}

// errUndecodable is a stored definition that does not decode.
var errUndecodable = errors.New("stored tool definition does not decode")

// current is the version of a tool in service, kept once resolved (until
// the catalog changes).
func (inv *Invoker) current(ctx context.Context, name string) (*resolvedTool, error) {
	if rt, ok := inv.memo.tools.Load(name); ok {
		return rt.(*resolvedTool), nil
	}
	if !tooldef.NamePattern.MatchString(name) {
		return nil, models.ErrNotFound
	}
	_, ver, err := inv.store.ToolByName(ctx, name, false)
	if err != nil {
		// The database does not answer (a restart): the version this
		// instance resolved last runs, rather than no tool at all.
		if last, ok := inv.memo.stale.Load(name); ok && !errors.Is(err, models.ErrNotFound) {
			inv.log.WarnContext(ctx, "the database does not answer: running the tool's last known version", "tool", name, "err", err)
			return last.(*resolvedTool), nil
		}
		return nil, err
	}
	rt, err := resolved(ver)
	if err != nil {
		return nil, err
	}
	inv.memo.tools.Store(name, rt)
	return rt, nil
}

// version is one version of a tool in service (a retired tool runs in no
// version).
func (inv *Invoker) version(ctx context.Context, name, version string) (*resolvedTool, error) {
	if !tooldef.NamePattern.MatchString(name) {
		return nil, models.ErrNotFound
	}
	t, ver, err := inv.store.ToolVersion(ctx, name, version)
	if err != nil {
		return nil, err
	}
	if t.RetiredAt != nil {
		return nil, models.ErrNotFound
	}
	return resolved(ver)
}

func resolved(ver *models.ToolVersion) (*resolvedTool, error) {
	def, err := tooldef.Decode(ver.Definition)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	return &resolvedTool{def: def, versionID: ver.ID}, nil
}

// resolvedTool is a current version kept in memory between catalog
// changes.
type resolvedTool struct {
	def       tooldef.Definition
	versionID uint
}

// CatalogChanged forgets the resolved current versions; the registry calls
// it after every change.
//
// The versions resolved until now are kept aside (stale), used only while
// the database does not answer: a lost notice connection (a Postgres
// restart) counts as a change, and must not leave the instance unable to
// run any tool until the database is back.
func (inv *Invoker) CatalogChanged() {
	inv.memo.tools.Range(func(name, rt any) bool {
		inv.memo.stale.Store(name, rt)
		return true
	})
	inv.memo.tools.Clear()
}
