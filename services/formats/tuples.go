package formats

import (
	"encoding/json"
	"maps"
	"strconv"
)

// Subschemas by where they sit in a schema: one schema, a list, or a map
// of them. Keywords elsewhere (const, enum, default, examples) hold data.
var (
	oneSchema = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
	schemaLists = []string{"prefixItems", "allOf", "anyOf", "oneOf"}
	schemaMaps  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

// withoutBooleanItems turns each boolean items into the bounds it means,
// so that readers of every draft agree: items false after prefixItems (a
// closed tuple) becomes maxItems, the number of prefixItems (0 without
// them), and items true goes (it allows what is allowed anyway). A
// reader of draft-07, as the MCP SDKs' default validators are, knows no
// prefixItems and reads items false as "no items at all", refusing every
// tuple; a strict client refuses a boolean where it wants a schema. The
// 2020-12 meaning is kept whole. It never modifies schema.
func withoutBooleanItems(schema map[string]any) map[string]any {
	out, _ := booleanItems(schema).(map[string]any)
	return out
}

func booleanItems(v any) any {
	s, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := maps.Clone(s)
	if items, isBool := out["items"].(bool); isBool {
		delete(out, "items")
		if !items {
			prefix, _ := out["prefixItems"].([]any)
			limit := len(prefix)
			if m, ok := maxItemsOf(out["maxItems"]); !ok || m > limit {
				out["maxItems"] = json.Number(strconv.Itoa(limit))
			}
		}
	}
	for _, k := range oneSchema {
		if sub, ok := out[k]; ok {
			out[k] = booleanItems(sub)
		}
	}
	for _, k := range schemaLists {
		if list, ok := out[k].([]any); ok {
			copied := make([]any, len(list))
			for i, sub := range list {
				copied[i] = booleanItems(sub)
			}
			out[k] = copied
		}
	}
	for _, k := range schemaMaps {
		if m, ok := out[k].(map[string]any); ok {
			copied := make(map[string]any, len(m))
			for name, sub := range m {
				copied[name] = booleanItems(sub)
			}
			out[k] = copied
		}
	}
	return out
}

// maxItemsOf reads a maxItems value.
func maxItemsOf(v any) (int, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	case float64:
		return int(n), true
	}
	return 0, false
}
