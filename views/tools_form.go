package views

import (
	"strings"

	"github.com/a-h/templ"
)

// FormProblem is one problem of a submitted tool form: the field it
// concerns (empty when it fits none), where in the definition it is, and
// what is wrong.
type FormProblem struct {
	Field   string
	Pointer string
	Message string
}

// ToolForm is the register or edit form with the values as submitted
// (or as the current version has them), keyed by field name, and the
// problems of the last submission.
type ToolForm struct {
	// Edit publishes a new version of Name instead of registering.
	Edit bool
	Name string
	// Latest is the highest published version (edit only).
	Latest string
	Values map[string]string
	// Errors are the problems per field; Problems all of them, in order.
	Errors   map[string][]string
	Problems []FormProblem

	Categories  []string
	Levels      []string
	RunnerKinds []string
	Builtins    []string
	Methods     []string
}

// Action is where the form posts.
func (f ToolForm) Action() templ.SafeURL {
	if f.Edit {
		return templ.SafeURL("/admin/tools/" + f.Name + "/edit")
	}
	return "/admin/tools/new"
}

// Checked reports whether a checkbox field was ticked.
func (f ToolForm) Checked(field string) bool { return f.Values[field] == "on" }

// Unmapped are the problems no field shows.
func (f ToolForm) Unmapped() []FormProblem {
	var out []FormProblem
	for _, p := range f.Problems {
		if p.Field == "" {
			out = append(out, p)
		}
	}
	return out
}

// fieldAttrs marks a form input invalid and points to its error and hint.
func (f ToolForm) fieldAttrs(field string, hint bool) templ.Attributes {
	a := templ.Attributes{"id": "f-" + field, "name": field, "data-testid": "field-" + field}
	describedBy := ""
	if hint {
		describedBy = "f-" + field + "-hint"
	}
	if len(f.Errors[field]) > 0 {
		a["aria-invalid"] = "true"
		describedBy = "f-" + field + "-error " + describedBy
	}
	if describedBy != "" {
		a["aria-describedby"] = describedBy
	}
	return a
}

// toolsInvalid marks an input invalid, naming the element holding its error.
func toolsInvalid(bad bool, errID string) templ.Attributes {
	if !bad {
		return templ.Attributes{}
	}
	return templ.Attributes{"aria-invalid": "true", "aria-errormessage": errID}
}

func toolsPlural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// toolsSpell turns the browser's spell check off for code fields.
func toolsSpell(code bool) string {
	if code {
		return "false"
	}
	return "true"
}

// toolErrorText makes a problem read as a sentence beside its field: the
// registry's messages often start with the verb ("is required", "must
// be …"), so the field's label is put before them.
func toolErrorText(label, msg string) string {
	for _, verb := range []string{"is ", "must ", "has ", "does ", "only ", "nests ", "carries "} {
		if strings.HasPrefix(msg, verb) {
			return label + " " + msg
		}
	}
	return msg
}
