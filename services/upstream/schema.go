package upstream

import "strings"

// draft2020 rewrites an input schema written for JSON Schema draft-04, -06
// or -07 (what most MCP servers serve: zod and pydantic emit draft-07) as
// draft 2020-12, the dialect Toolbelt validates parameters with, keyword
// by keyword where the two differ: the $schema of an older draft goes, an
// array of items becomes prefixItems (and additionalItems items),
// dependencies splits into dependentRequired and dependentSchemas, and
// draft-04's boolean exclusiveMinimum/Maximum become numbers. A schema
// that names no draft, or 2020-12, is left as it is.
func draft2020(schema any) any {
	root, ok := schema.(map[string]any)
	if !ok {
		return schema
	}
	dialect, _ := root["$schema"].(string)
	if !olderDraft(dialect) {
		return schema
	}
	out := convert(root)
	delete(out, "$schema")
	return out
}

func olderDraft(uri string) bool {
	for _, d := range []string{"draft-04", "draft-06", "draft-07"} {
		if strings.Contains(uri, "json-schema.org/"+d+"/schema") {
			return true
		}
	}
	return false
}

// Keywords whose value is a schema, a map of schemas, or an array of
// schemas.
var (
	schemaKeys    = []string{"additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "additionalItems", "unevaluatedItems", "unevaluatedProperties"}
	schemaMapKeys = []string{"properties", "patternProperties", "definitions", "$defs", "dependentSchemas"}
	schemaArrKeys = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

// convert returns a converted copy of one schema object.
func convert(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		out[k] = v
	}
	for _, k := range schemaKeys {
		if v, ok := out[k].(map[string]any); ok {
			out[k] = convert(v)
		}
	}
	for _, k := range schemaMapKeys {
		if m, ok := out[k].(map[string]any); ok {
			c := make(map[string]any, len(m))
			for name, v := range m {
				if sub, ok := v.(map[string]any); ok {
					c[name] = convert(sub)
				} else {
					c[name] = v
				}
			}
			out[k] = c
		}
	}
	for _, k := range schemaArrKeys {
		if a, ok := out[k].([]any); ok {
			out[k] = convertAll(a)
		}
	}
	switch items := out["items"].(type) {
	case map[string]any:
		out["items"] = convert(items)
	case []any:
		out["prefixItems"] = convertAll(items)
		delete(out, "items")
		if extra, ok := out["additionalItems"]; ok {
			out["items"] = extra
		}
	}
	delete(out, "additionalItems")
	if deps, ok := out["dependencies"].(map[string]any); ok {
		required, schemas := map[string]any{}, map[string]any{}
		for name, v := range deps {
			if sub, ok := v.(map[string]any); ok {
				schemas[name] = convert(sub)
			} else {
				required[name] = v
			}
		}
		if len(required) > 0 {
			out["dependentRequired"] = required
		}
		if len(schemas) > 0 {
			out["dependentSchemas"] = schemas
		}
		delete(out, "dependencies")
	}
	for _, b := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		if flag, ok := out[b[0]].(bool); ok {
			if flag && out[b[1]] != nil {
				out[b[0]] = out[b[1]]
				delete(out, b[1])
			} else {
				delete(out, b[0])
			}
		}
	}
	return out
}

func convertAll(a []any) []any {
	c := make([]any, len(a))
	for i, v := range a {
		if sub, ok := v.(map[string]any); ok {
			c[i] = convert(sub)
		} else {
			c[i] = v
		}
	}
	return c
}
