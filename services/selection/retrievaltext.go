package selection

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"toolbelt/services/embed"
	"toolbelt/services/tooldef"
)

// retrievalTexts returns the text a tool is found by, lexical: its name
// with words split, description, category, tags, parameter names and
// descriptions, and examples; and the text a real model embeds, model,
// which reads "name: description" and has no category: a one-word label
// that every tool of the category shares pulls their vectors together,
// while BM25 and the category filter use it as it is (a real model ranks
// better with it left out: docs/benchmarks.md#tuning).
func retrievalTexts(def *tooldef.Definition) (lexical, model string) {
	name := strings.Join(embed.Words(def.Name), " ")
	rest := retrievalDetails(def)
	return name + ". " + def.Description + "\nCategory: " + def.Category + rest, name + ": " + def.Description + rest
}

// retrievalDetails is what both retrieval texts end with: tags,
// parameters, and examples, a line each. A parameter's line holds its
// name (with its parents', for the properties of an object or of an
// array's items, to paramDepth levels), its description, and the values
// an enum allows (the first enumShown): what an agent's task names, as
// "in fahrenheit" or "on Delta".
func retrievalDetails(def *tooldef.Definition) string {
	var b strings.Builder
	if len(def.Tags) > 0 {
		b.WriteString("\nTags: " + strings.Join(def.Tags, ", "))
	}
	var schema map[string]any
	if json.Unmarshal(def.Parameters, &schema) == nil {
		writeParams(&b, "", schema, paramDepth)
	}
	for _, e := range def.Examples {
		b.WriteString("\nExample: " + e)
	}
	return b.String()
}

// paramDepth is how deep nested properties are read; enumShown how many of
// an enum's values.
const (
	paramDepth = 3
	enumShown  = 20
)

// writeParams writes a line for each property of an object schema, in
// name order, then the lines of its nested properties.
func writeParams(b *strings.Builder, parent string, schema map[string]any, depth int) {
	props, _ := schema["properties"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		name := strings.TrimSpace(parent + " " + strings.Join(embed.Words(k), " "))
		b.WriteString("\nParameter " + name)
		p, _ := props[k].(map[string]any)
		if d, ok := p["description"].(string); ok {
			b.WriteString(": " + d)
		}
		if values := enumText(p); values != "" {
			b.WriteString(" (one of: " + values + ")")
		}
		if depth <= 1 || p == nil {
			continue
		}
		if items, ok := p["items"].(map[string]any); ok {
			p = items
		}
		writeParams(b, name, p, depth-1)
	}
}

// enumText is the first enumShown string values of a schema's enum.
func enumText(schema map[string]any) string {
	values, _ := schema["enum"].([]any)
	var out []string
	for _, v := range values {
		if s, ok := v.(string); ok && len(out) < enumShown {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}
