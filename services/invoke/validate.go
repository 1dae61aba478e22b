package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// validate checks the arguments against the version's compiled schema and
// lists every field error with a suggestion the LLM can act on.
func (inv *Invoker) validate(next step) step {
	return func(ctx context.Context, c *call) ToolResult {
		params, ok := inv.memo.schemas.Get(c.version)
		if !ok {
			var doc any
			dec := json.NewDecoder(bytes.NewReader(c.def.Parameters))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				return failure(models.CodeInternal, "the tool's schema does not load", false, "Report this tool to an administrator.")
			}
			s, err := tooldef.CompileSchema(doc)
			if err != nil {
				return failure(models.CodeInternal, "the tool's schema does not compile", false, "Report this tool to an administrator.")
			}
			params = &compiledParams{schema: s, plan: tooldef.PlanArgs(doc)}
			inv.memo.schemas.Add(c.version, params)
		}
		schema := params.schema
		raw := c.req.Arguments
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage(`{}`)
		}
		args, err := decodeArgs(raw)
		obj, isObj := args.(map[string]any)
		if err != nil || !isObj {
			return ToolResult{Status: models.StatusRefused, Error: &ToolError{Code: models.CodeValidation, Message: "arguments must be a JSON object",
				Suggestion: "Send arguments as a JSON object matching this schema: " + string(c.def.Parameters)}}
		}
		// References to earlier results of the session are filled in
		// first, and the filled arguments are what is validated and run.
		if bytes.Contains(raw, []byte(`"`+refKey+`"`)) {
			if obj, err = inv.contextRefs(ctx, c, obj); err != nil {
				return refusal(models.CodeValidation, err.Error(),
					`Refer to a succeeded call of this session you may read: {"$ref": "call:<call id>#/data/<field>"}.`)
			}
			args = obj
		}
		// A null for an optional field that does not take null is the
		// field left out, as an LLM in OpenAI's strict mode sends it; a
		// free-form object may come as JSON text, as Gemini is asked to
		// write it.
		params.plan.Apply(obj)
		// Validation is a pure function of the version's schema and the
		// arguments, so arguments of a cacheable tool that passed once
		// are not validated again (it was a fifth of a cached call's
		// chain); the memo is this guard's own.
		if c.def.Execution.Cacheable {
			if _, ok := inv.memo.validated.Get(inv.cacheKey(c, obj)); ok {
				c.args = obj
				return next(ctx, c)
			}
		}
		if err := schema.Validate(args); err != nil {
			var ve *jsonschema.ValidationError
			var ps []models.Problem
			if errors.As(err, &ve) {
				printer := message.NewPrinter(language.English)
				for _, leaf := range tooldef.Leaves(ve) {
					ptr := ""
					for _, seg := range leaf.InstanceLocation {
						ptr += "/" + tooldef.EscapePointer(seg)
					}
					ps = append(ps, models.Problem{Pointer: ptr, Message: leaf.ErrorKind.LocalizedString(printer)})
				}
			}
			fields := make([]string, 0, len(ps))
			for _, p := range ps {
				fields = append(fields, p.Pointer+" "+p.Message)
			}
			return ToolResult{Status: models.StatusRefused, Error: &ToolError{Code: models.CodeValidation,
				Message:    fmt.Sprintf("the arguments do not match the schema of %s: %s", c.def.Name, strings.Join(fields, "; ")),
				Problems:   ps,
				Suggestion: fmt.Sprintf("Fix the fields listed and call %s again. Its parameters schema is: %s", c.def.Name, string(c.def.Parameters))}}
		}
		// A command tool's arguments are checked for their place in its
		// template too, before the call waits for a reviewer or a queue
		// slot: a value the program would read as an option never runs.
		if c.def.Runner.Kind == tooldef.RunnerCommand {
			var ae *tooldef.ArgvError
			if _, err := tooldef.FillArgv(c.def, obj); errors.As(err, &ae) {
				return ToolResult{Status: models.StatusRefused, Error: &ToolError{Code: models.CodeValidation, Message: ae.Message,
					Problems: []models.Problem{{Pointer: "/" + tooldef.EscapePointer(ae.Param), Message: ae.Message}}, Suggestion: ae.Suggestion}}
			}
		}
		c.args = obj
		if c.def.Execution.Cacheable {
			inv.memo.validated.Add(inv.cacheKey(c, obj), struct{}{})
		}
		return next(ctx, c)
	}
}

// decodeArgs decodes arguments as jsonschema.UnmarshalJSON does (numbers
// as json.Number, one value and white space only), without the second
// read of the decoder's buffer its check for more input costs.
func decodeArgs(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if len(bytes.TrimLeft(raw[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, errors.New("invalid character after top-level value")
	}
	return doc, nil
}

// newValidatedMemo remembers, by cache key, the arguments of cacheable
// tools that passed their version's schema.
func newValidatedMemo() *ttlcache.Cache[string, struct{}] {
	return ttlcache.New[string, struct{}](8192, time.Hour)
}

// compiledParams is a version's parameters schema, compiled, and the
// plan that turns arguments as the renderings ask models to write them
// into what the schema describes.
type compiledParams struct {
	schema *jsonschema.Schema
	plan   *tooldef.ArgsPlan
}

// newSchemaCache keeps compiled parameter schemas by version id.
func newSchemaCache() *ttlcache.Cache[uint, *compiledParams] {
	return ttlcache.New[uint, *compiledParams](4096, time.Hour)
}
