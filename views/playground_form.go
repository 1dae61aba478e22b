package views

import "strings"

// pgDescribedBy points a field group at its error, when it has one.
func pgDescribedBy(f PlaygroundForm, field string) string {
	if f.Errors[field] == "" {
		return ""
	}
	return "pg-" + field + "-error"
}

// pgJoin lists learned queries in quotes.
func pgJoin(qs []string) string {
	return "“" + strings.Join(qs, "”, “") + "”"
}
