package views

// accGrantDescribedBy points an agent's category checkboxes at their
// error, when they have one.
func accGrantDescribedBy(id uint, g *AccessGrants, field string) string {
	if g.Errors[field] == "" {
		return ""
	}
	return accID("grants-"+field+"-error-", id)
}
