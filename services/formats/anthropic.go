package formats

// anthropicTool is a Messages API tool; its fields keep the order the API
// documents.
type anthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"input_schema"`
}

// newAnthropicTool is a Messages API tool, its schema with a plain root.
func newAnthropicTool(name, desc string, schema map[string]any) anthropicTool {
	return anthropicTool{Name: name, Description: desc, InputSchema: plainRoot(withoutDialect(withoutBooleanItems(schema)))}
}
