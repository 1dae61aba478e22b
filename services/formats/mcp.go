package formats

import (
	"strings"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// The shapes of an MCP Tool and its annotations, in the order the MCP
// schema documents them.
type (
	mcpTool struct {
		Name        string         `json:"name"`
		Title       string         `json:"title"`
		Description string         `json:"description,omitempty"`
		InputSchema map[string]any `json:"inputSchema"`
		Annotations mcpAnnotations `json:"annotations"`
	}
	mcpAnnotations struct {
		Title           string `json:"title"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		DestructiveHint bool   `json:"destructiveHint"`
		IdempotentHint  bool   `json:"idempotentHint"`
		OpenWorldHint   bool   `json:"openWorldHint"`
	}
)

// newMCPTool is an MCP Tool with its annotations.
func newMCPTool(def tooldef.Definition, desc string, schema map[string]any) (mcpTool, error) {
	ann, err := mcpAnnotationsFor(def)
	if err != nil {
		return mcpTool{}, err
	}
	// A plain root, as for OpenAI and Anthropic: agent frameworks
	// (the Vercel AI SDK, OpenAI Agents, LangChain) pass an MCP tool's
	// inputSchema on to those APIs, which refuse root combinators, and
	// the AI SDK closes the root, which makes a root oneOf unsatisfiable.
	return mcpTool{Name: def.Name, Title: ann.Title, Description: desc, InputSchema: plainRoot(withoutDialect(withoutBooleanItems(schema))), Annotations: ann}, nil
}

// mcpAnnotationsFor derives the MCP behaviour hints from the security level,
// category and network setting, so a client can warn before a destructive
// call or one that reaches outside the host. A hint says false only when
// that is known: only a safe tool is known not to destroy.
func mcpAnnotationsFor(def tooldef.Definition) (mcpAnnotations, error) {
	a := mcpAnnotations{Title: mcpTitle(def.Name)}
	switch def.Security.Level {
	case tooldef.LevelSafe:
		a.ReadOnlyHint, a.IdempotentHint = true, true
	case tooldef.LevelModerate, tooldef.LevelDangerous:
		// A moderate tool may write, send or delete (file_write,
		// http_request's DELETE, code_execute): that its changes are
		// only additive is not known, so it keeps MCP's default, true.
		a.DestructiveHint = true
	default:
		return a, models.ErrInvalid.Errorf("tool %q has unknown security level %q (want one of %s)", def.Name, def.Security.Level, strings.Join(tooldef.Levels, ", "))
	}
	switch def.Category {
	case "browser", "search", "api":
		a.OpenWorldHint = true
	default:
		a.OpenWorldHint = def.Security.Network
	}
	return a, nil
}

// mcpTitle turns a snake_case name into a display title: "file_read" becomes
// "File Read".
func mcpTitle(name string) string {
	words := strings.FieldsFunc(name, func(r rune) bool { return r == '_' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}
