package docs

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"

	"toolbelt/services/formats"
)

// renderingPath is the operation that answers a tool, or with ?format= its
// rendering for an LLM API.
const renderingPath = "/api/v1/tools/{name}"

// renderings says in the OpenAPI 3 document that GET /tools/{name}
// answers either of two bodies, which Swagger 2.0 cannot (one schema per
// status): the stored tool, or with format the tool as that LLM API takes
// it. Each rendering's shape is a branch titled with its format. The Go
// client keeps the tool type it had (x-go-type): it asks without format.
func renderings(doc *openapi3.T) error {
	item := doc.Paths.Find(renderingPath)
	if item == nil || item.Get == nil {
		return fmt.Errorf("GET %s is not in the document", renderingPath)
	}
	ok := item.Get.Responses.Status(200)
	if ok == nil || ok.Value == nil || ok.Value.Content.Get("application/json") == nil {
		return fmt.Errorf("GET %s answers no JSON 200", renderingPath)
	}
	media := ok.Value.Content.Get("application/json")
	tool := media.Schema
	shapes := openapi3.NewAnyOfSchema()
	for _, f := range formats.All() {
		props, ok := renderingShapes[f.Name]
		if !ok {
			return fmt.Errorf("format %q has no rendering shape in docs/renderings.go; add one", f.Name)
		}
		shapes.AnyOf = append(shapes.AnyOf, openapi3.NewSchemaRef("", shape(f.Name, f.Renders, props.properties, props.required...)))
	}
	shapes.Title = "rendering"
	shapes.Description = "With format: the tool exactly as that LLM API takes it in its tools array."
	body := openapi3.NewAnyOfSchema(nil...)
	body.AnyOf = openapi3.SchemaRefs{tool, openapi3.NewSchemaRef("", shapes)}
	body.Description = "The tool's current version, or with format its rendering for that LLM API."
	body.Extensions = map[string]any{"x-go-type": "CatalogTool"}
	media.Schema = openapi3.NewSchemaRef("", body)
	return nil
}

// renderingShapes are the properties and required ones of each format's
// rendering, by format name; the formats, their order and descriptions
// come from services/formats' table.
var renderingShapes = map[string]struct {
	properties map[string]*openapi3.Schema
	required   []string
}{
	formats.FormatOpenAI: {map[string]*openapi3.Schema{
		"type":     openapi3.NewStringSchema().WithEnum("function"),
		"function": shape("", "", map[string]*openapi3.Schema{"name": openapi3.NewStringSchema()}, "name"),
	}, []string{"type", "function"}},
	formats.FormatOpenAIResponses: {map[string]*openapi3.Schema{
		"type": openapi3.NewStringSchema().WithEnum("function"), "name": openapi3.NewStringSchema(),
		"parameters": anyObject(), "strict": openapi3.NewBoolSchema(),
	}, []string{"type", "name", "strict"}},
	formats.FormatAnthropic: {map[string]*openapi3.Schema{
		"name": openapi3.NewStringSchema(), "input_schema": anyObject(),
	}, []string{"name", "input_schema"}},
	formats.FormatGemini: {map[string]*openapi3.Schema{
		"name": openapi3.NewStringSchema(), "parametersJsonSchema": anyObject(),
	}, []string{"name"}},
	formats.FormatMCP: {map[string]*openapi3.Schema{
		"name": openapi3.NewStringSchema(), "inputSchema": anyObject(), "annotations": anyObject(),
	}, []string{"name", "inputSchema"}},
}

// shape is an object schema titled title with properties, required.
func shape(title, description string, properties map[string]*openapi3.Schema, required ...string) *openapi3.Schema {
	s := openapi3.NewObjectSchema().WithProperties(properties).WithAnyAdditionalProperties()
	s.Title, s.Description, s.Required = title, description, required
	return s
}

// anyObject is an object with any properties.
func anyObject() *openapi3.Schema { return openapi3.NewObjectSchema().WithAnyAdditionalProperties() }
