package formats

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// Name rules of the APIs: OpenAI and Anthropic take 1-64 letters, digits,
// underscores and dashes; Gemini also wants a letter or underscore first; MCP
// allows dots and up to 128 characters.
var (
	apiNameRule    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	geminiNameRule = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)
	mcpNameRule    = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
)

// propertyNameRules are the providers' rules for the names of properties
// in a tool's schema: a name outside one makes that API refuse the whole
// request, so such a definition is refused at registration instead.
var propertyNameRules = []struct {
	format, rule string
	re           *regexp.Regexp
}{
	{FormatAnthropic, `letters, digits, "_", "." and "-", 1 to 64 of them`, regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)},
	{FormatGemini, `letters, digits and "_"`, regexp.MustCompile(`^[a-zA-Z0-9_]+$`)},
}

// propertyNameProblems lists, at its pointer, every property name of the
// schema some format's rule refuses, saying which formats and why.
func propertyNameProblems(node any, ptr string) []models.Problem {
	var out []models.Problem
	switch n := node.(type) {
	case []any:
		for i, v := range n {
			out = append(out, propertyNameProblems(v, fmt.Sprintf("%s/%d", ptr, i))...)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(n)) {
			switch k {
			case "enum", "const", "default", "examples", "example", "required":
				continue // data, not schemas
			case "properties":
				props, ok := n[k].(map[string]any)
				if !ok {
					continue
				}
				for _, name := range slices.Sorted(maps.Keys(props)) {
					at := ptr + "/properties/" + tooldef.EscapePointer(name)
					var refused []string
					for _, r := range propertyNameRules {
						if !r.re.MatchString(name) {
							refused = append(refused, fmt.Sprintf("%s (%s)", r.format, r.rule))
						}
					}
					if len(refused) > 0 {
						out = append(out, models.Problem{Pointer: at, Message: fmt.Sprintf(
							"property name %q is refused by %s; rename it", name, strings.Join(refused, " and "))})
					}
					out = append(out, propertyNameProblems(props[name], at)...)
				}
				continue
			}
			out = append(out, propertyNameProblems(n[k], ptr+"/"+tooldef.EscapePointer(k))...)
		}
	}
	return out
}
