package formats

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"toolbelt/internal/nodetest"
	"toolbelt/services/tooldef"
)

// TestGeminiSDKTypes has TypeScript, with the types of Google's own SDK
// (@google/genai in testdata/frameworks), check every gemini rendering the
// other tests make: the golden cases, the conformance corpus with the
// built-in tools, and the transform cases. Each rendering is written as it
// is served, with no cast, as a FunctionDeclaration and again inside a
// Tool's functionDeclarations, and `tsc --noEmit --strict` must find no
// error: what an agent pastes into its request compiles.
func TestGeminiSDKTypes(t *testing.T) {
	nodetest.Frameworks(t)
	type named struct {
		id  string
		def tooldef.Definition
	}
	var defs []named
	for _, c := range renderCases() {
		defs = append(defs, named{"golden/" + c.name, c.def})
	}
	for _, c := range conformanceCorpus(t) {
		defs = append(defs, named{"conformance/" + c.Name, c.definition()})
	}
	for _, tt := range geminiTransforms() {
		defs = append(defs, named{"transform/" + tt.name, tooldef.Definition{
			Name: "t", Description: "The transform " + tt.name + ".", Parameters: json.RawMessage(tt.parameters()),
		}})
	}

	var src strings.Builder
	src.WriteString("import type { FunctionDeclaration, Tool } from \"@google/genai\";\n\n")
	// A control: the SDK's types refuse JSON Schema's lowercase types in
	// parameters (its Schema takes the Type enum), so a rendering that put
	// them there would fail, and this line fails if the types go missing.
	src.WriteString("// @ts-expect-error parameters is the SDK's Schema, whose type is the Type enum\n" +
		"export const control: FunctionDeclaration = {\"name\":\"control\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}};\n\n")
	var all []string
	for i, d := range defs {
		raw, err := Render(d.def, FormatGemini)
		if err != nil {
			t.Fatalf("%s: %v", d.id, err)
		}
		fmt.Fprintf(&src, "// %s\nexport const declaration%d: FunctionDeclaration = %s;\n\n", d.id, i, raw)
		all = append(all, string(raw))
	}
	// Fresh object literals again, so excess properties are checked where
	// a Tool holds them too.
	fmt.Fprintf(&src, "export const tool: Tool = {functionDeclarations: [\n%s\n]};\n", strings.Join(all, ",\n"))

	out, err := nodetest.TypeCheck(t, src.String(), "@google/genai")
	if err != nil {
		errs := regexp.MustCompile(`(?m)error TS\d+`).FindAll(out, -1)
		const shown = 4000
		report := string(out)
		if len(report) > shown {
			report = report[:shown] + "\n…"
		}
		t.Fatalf("tsc finds %d errors in the gemini renderings of %d tools as @google/genai types: %v\n%s", len(errs), len(defs), err, report)
	}
	t.Logf("tsc accepts the gemini renderings of %d tools as FunctionDeclaration and Tool", len(defs))
}
