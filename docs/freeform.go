package docs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// freeForm says in the OpenAPI 3 document what the API's free-form JSON
// fields hold, which swag cannot: a json.RawMessage field is written as
// the type its swaggertype tag names, and no tag says "any properties" or
// "any value". Swag's {"type": "object"} means any object to JSON Schema,
// but openapi-typescript and other generators read an object that names no
// properties as an empty one (Record<string, never>): a typed client could
// send no arguments. So, in this one place:
//
//   - every object schema that names no properties (a call's arguments, a
//     tool's parameters, a composite step's arguments, a selected tool as
//     its format renders it) says additionalProperties: true;
//   - the fields in fieldSchemas, which are not always objects, take the
//     schema of what they hold.
//
// The Swagger 2.0 document keeps what swag wrote, where {"type": "object"}
// already means any object.
func freeForm(doc *openapi3.T) error {
	seen := map[*openapi3.Schema]bool{}
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		openObjects(doc.Components.Schemas[name], seen)
	}
	fields := fieldSchemas()
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		name, prop, _ := strings.Cut(field, "#")
		def := doc.Components.Schemas[name]
		if def == nil || def.Value == nil || def.Value.Properties[prop] == nil {
			return fmt.Errorf("free-form field %s is not in the document", field)
		}
		old := def.Value.Properties[prop].Value
		s := fields[field]()
		s.Description, s.Example = old.Description, old.Example
		def.Value.Properties[prop] = openapi3.NewSchemaRef("", s)
	}
	return nil
}

// fieldSchemas are the free-form fields that may hold more than an object,
// by schema name and property, with the schema of what they hold.
func fieldSchemas() map[string]func() *openapi3.Schema {
	return map[string]func() *openapi3.Schema{
		// A tool's data is what its runner returned, which the API does not
		// shape: any JSON value (today's runners answer objects). The Go
		// client keeps the map it had (x-go-type), which its callers index.
		"invoke.ToolResult#data": func() *openapi3.Schema {
			s := openapi3.NewSchema()
			s.Extensions = map[string]any{"x-go-type": "map[string]interface{}"}
			return s
		},
		// The document to import is a JSON object, or a string holding JSON
		// or YAML.
		"handlers.OpenAPIImportRequest#document": func() *openapi3.Schema {
			return openapi3.NewOneOfSchema(openapi3.NewObjectSchema().WithAnyAdditionalProperties(), openapi3.NewStringSchema())
		},
		// A message's content is a string or, in the chat APIs' format, a list
		// of parts such as {"type": "text", "text": "…"}.
		"selection.Message#content": func() *openapi3.Schema {
			return openapi3.NewOneOfSchema(openapi3.NewStringSchema(),
				openapi3.NewArraySchema().WithItems(openapi3.NewObjectSchema().WithAnyAdditionalProperties()))
		},
	}
}

// openObjects marks every object schema in s, and in the schemas it holds,
// that names no properties as open to any (additionalProperties: true).
// References are left to the schema they name.
func openObjects(s *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if s == nil || s.Ref != "" || s.Value == nil || seen[s.Value] {
		return
	}
	v := s.Value
	seen[v] = true
	if v.Type.Is(openapi3.TypeObject) && len(v.Properties) == 0 && v.AdditionalProperties.Has == nil &&
		v.AdditionalProperties.Schema == nil && len(v.AllOf)+len(v.OneOf)+len(v.AnyOf) == 0 {
		v.WithAnyAdditionalProperties()
	}
	for _, p := range v.Properties {
		openObjects(p, seen)
	}
	openObjects(v.Items, seen)
	openObjects(v.AdditionalProperties.Schema, seen)
	for _, list := range []openapi3.SchemaRefs{v.AllOf, v.OneOf, v.AnyOf} {
		for _, sub := range list {
			openObjects(sub, seen)
		}
	}
}
