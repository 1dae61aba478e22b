package invoke

import (
	"context"
	"fmt"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/tooldef"
)

// authorize applies the security levels: admins may call anything,
// reviewers nothing; an agent may call a safe tool granted by name or
// category, a moderate or dangerous one only through its category.
func (inv *Invoker) authorize(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		if c.caller == nil || c.caller.Role == access.RoleAdmin {
			return next(ctx, c)
		}
		denied := refusal(models.CodePermissionDenied,
			fmt.Sprintf("you may not call %s (%s, %s)", c.def.Name, c.def.Category, c.def.Security.Level),
			"Do not retry this tool; ask the user or an administrator to grant it, or choose a tool you may use ("+models.DirectionsOf(ctx).SearchTools()+").")
		if c.caller.Role != access.RoleAgent {
			return denied
		}
		byCategory, err := inv.authz.MayUse(c.caller.ID, "", c.def.Category)
		if err != nil {
			return failure(models.CodeInternal, "internal error", true, "Try again.")
		}
		byName := false
		if c.def.Security.Level == tooldef.LevelSafe && !byCategory {
			if byName, err = inv.authz.MayUse(c.caller.ID, c.def.Name, "\x00"); err != nil {
				return failure(models.CodeInternal, "internal error", true, "Try again.")
			}
		}
		if !byCategory && !byName {
			return denied
		}
		return next(ctx, c)
	}
}
