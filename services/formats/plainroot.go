package formats

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// rootCombinators are the keywords OpenAI (Chat Completions and Responses)
// and Anthropic refuse at the top level of a tool's parameters: each
// answers 400 for a oneOf, anyOf, allOf or not there.
var rootCombinators = []string{"allOf", "anyOf", "oneOf", "not"}

// plainRoot makes the root of parameters a plain object for the formats
// that refuse root combinators and for MCP, whose clients pass the schema
// on to them, as Gemini's rendering does: allOf parts
// that are plain objects merge into the root; the properties of anyOf and
// oneOf branches join the root's (all optional but those every branch
// requires); and what the combinators required is stated in the
// description. Calls are still validated against the whole schema, so the
// constraint holds even when the model misses the note. It never modifies
// schema.
func plainRoot(schema map[string]any) map[string]any {
	found := false
	for _, k := range rootCombinators {
		if _, ok := schema[k]; ok {
			found = true
		}
	}
	if !found {
		return schema
	}
	out := maps.Clone(schema)
	props, _ := out["properties"].(map[string]any)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	required := stringList(out["required"])
	var notes []string
	addProps := func(branch map[string]any) {
		bp, _ := branch["properties"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(bp)) {
			if _, ok := props[name]; !ok {
				props[name] = bp[name]
			}
		}
	}
	if parts, ok := out["allOf"].([]any); ok {
		delete(out, "allOf")
		for i, p := range parts {
			part, ok := p.(map[string]any)
			if !ok || !plainObjectBranch(part) {
				notes = append(notes, fmt.Sprintf("The input must also match: %s.", jsonText(parts[i])))
				continue
			}
			addProps(part)
			for _, r := range stringList(part["required"]) {
				if !slices.Contains(required, r) {
					required = append(required, r)
				}
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		branches, ok := out[k].([]any)
		if !ok {
			continue
		}
		delete(out, k)
		alternatives := make([]string, 0, len(branches))
		var common []string // required by every branch
		for i, b := range branches {
			branch, ok := b.(map[string]any)
			if !ok || !plainObjectBranch(branch) {
				alternatives = append(alternatives, jsonText(b))
				common = nil
				continue
			}
			addProps(branch)
			req := stringList(branch["required"])
			if i == 0 {
				common = req
			} else {
				common = slices.DeleteFunc(common, func(r string) bool { return !slices.Contains(req, r) })
			}
			alternatives = append(alternatives, describeBranch(branch, req))
		}
		for _, r := range common {
			if !slices.Contains(required, r) {
				required = append(required, r)
			}
		}
		which := "at least one"
		if k == "oneOf" {
			which = "exactly one"
		}
		notes = append(notes, fmt.Sprintf("The input must have %s of: %s.", which, strings.Join(alternatives, "; or ")))
	}
	if not, ok := out["not"]; ok {
		delete(out, "not")
		notes = append(notes, fmt.Sprintf("The input must not match: %s.", jsonText(not)))
	}
	out["type"] = "object"
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = toAnyList(required)
	}
	addNotes(out, notes...)
	return out
}

// plainObjectBranch reports whether a combinator branch only constrains
// the object's own fields (properties, required, a description), so its
// fields can join the root's.
func plainObjectBranch(b map[string]any) bool {
	for k := range b {
		switch k {
		case "properties", "required", "description", "title", "type", "additionalProperties":
		default:
			return false
		}
	}
	t, hasType := b["type"]
	return !hasType || t == "object"
}

// describeBranch says what one alternative of anyOf or oneOf asks for:
// the fields it requires ("name and content"), else the fields it defines.
func describeBranch(b map[string]any, req []string) string {
	var what string
	switch bp, _ := b["properties"].(map[string]any); {
	case len(req) > 0:
		what = strings.Join(req, " and ")
	case len(bp) > 0:
		what = "the fields " + strings.Join(slices.Sorted(maps.Keys(bp)), ", ")
	default:
		what = "any input"
	}
	if d, _ := b["description"].(string); d != "" {
		what += " (" + strings.TrimRight(d, ". ") + ")"
	}
	return what
}
