package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// MaxCompositeDepth bounds composites calling composites (a cycle through
// other tools would otherwise run until its timeout).
const MaxCompositeDepth = 5

// A reference is an object of exactly one key, "$ref", whose value names a
// JSON value: "#/input/..." and "#/steps/N/data/..." inside a composite's
// step arguments, "call:<id>#/..." in any call's arguments (an earlier
// call of the same session, as the caller may read it).
const refKey = "$ref"

// refOf returns the reference an argument value is, if it is one.
func refOf(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	s, ok := m[refKey].(string)
	return s, ok
}

// replaceRefs returns v with every reference replaced by what lookup finds.
func replaceRefs(v any, lookup func(ref string) (any, error)) (any, error) {
	if ref, ok := refOf(v); ok {
		return lookup(ref)
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := replaceRefs(e, lookup)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := replaceRefs(e, lookup)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// decodeValue decodes JSON as the validator expects it (numbers exact).
func decodeValue(raw []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// contextRefs replaces "call:<id>#/pointer" references in a call's
// arguments with values of earlier results: the call must be one the
// caller may read, in the same session, and have succeeded.
func (inv *Invoker) contextRefs(ctx context.Context, c *call, args map[string]any) (map[string]any, error) {
	out, err := replaceRefs(args, func(ref string) (any, error) {
		rest, ok := strings.CutPrefix(ref, "call:")
		if !ok {
			return nil, fmt.Errorf("reference %q: use \"call:<call id>#/pointer\", e.g. \"call:%s#/data/url\"", ref, "01a2…")
		}
		id, ptr, _ := strings.Cut(rest, "#")
		rec, err := inv.CallRecord(ctx, c.caller, id)
		if err != nil {
			return nil, fmt.Errorf("reference %q: no call %s that you may read", ref, id)
		}
		if rec.SessionID != c.req.SessionID {
			return nil, fmt.Errorf("reference %q: call %s belongs to another session", ref, id)
		}
		if rec.Status != models.StatusSucceeded {
			return nil, fmt.Errorf("reference %q: call %s did not succeed (%s)", ref, id, rec.Status)
		}
		result, err := decodeValue([]byte(rec.Result))
		if err != nil {
			return nil, fmt.Errorf("reference %q: the result of call %s is not readable", ref, id)
		}
		v, err := tooldef.Pointer(result, ptr)
		if err != nil {
			return nil, fmt.Errorf("reference %q: %v", ref, err)
		}
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

// stepsNeedApproval reports whether a composite calls a tool that needs a
// reviewer's approval, itself or through a composite among its steps; the
// composite then needs one itself, and it covers every step below it.
func (inv *Invoker) stepsNeedApproval(ctx context.Context, def tooldef.Definition, depth int) bool {
	for _, st := range def.Runner.Steps {
		rt, err := inv.current(ctx, st.Tool)
		if err != nil {
			continue // an unknown step fails when it runs
		}
		d := rt.def
		if d.Security.Level == tooldef.LevelDangerous || d.Security.RequireConfirm ||
			(d.Runner.Kind == tooldef.RunnerComposite && depth < MaxCompositeDepth && inv.stepsNeedApproval(ctx, d, depth+1)) {
			return true
		}
	}
	return false
}

// composite runs the steps of a composite tool in order. Each step is a
// call of its own through the whole guard chain, by the same principal
// in the same session, recorded with the composite as its parent; its
// arguments may refer to the composite's input (#/input/...) and to
// earlier steps' results (#/steps/N/data/..., N from 0). The first step
// that does not succeed ends the composite with its error.
func (inv *Invoker) composite(ctx context.Context, c *call) ToolResult {
	if c.lineage.depth >= MaxCompositeDepth {
		return failure(models.CodeExecutionFailed, fmt.Sprintf("composites call composites %d deep here; at most %d levels run", c.lineage.depth+1, MaxCompositeDepth), false,
			"A composite tool calls itself through others: ask an administrator to fix its steps.")
	}
	scope := map[string]any{"input": c.args, "steps": []any{}}
	var steps []map[string]any
	for i, st := range c.def.Runner.Steps {
		args := map[string]any{}
		if len(bytes.TrimSpace(st.Arguments)) > 0 {
			tmpl, err := decodeValue(st.Arguments)
			if err != nil {
				return failure(models.CodeInternal, fmt.Sprintf("step %d (%s): its arguments do not load", i, st.Tool), false, "Report this tool to an administrator.")
			}
			filled, err := replaceRefs(tmpl, func(ref string) (any, error) {
				ptr, ok := strings.CutPrefix(ref, "#")
				if !ok {
					return nil, fmt.Errorf("reference %q: use \"#/input/...\" or \"#/steps/N/data/...\"", ref)
				}
				return tooldef.Pointer(scope, ptr)
			})
			if err != nil {
				res := failure(models.CodeValidation, fmt.Sprintf("step %d (%s): %v", i, st.Tool, err), false,
					"Check the composite's input against its schema; a step refers to a value it did not get.")
				res.Data = mustMarshal(map[string]any{"steps": steps})
				return res
			}
			args, _ = filled.(map[string]any)
		}
		raw, _ := json.Marshal(args)
		child := &call{id: models.NewID(), req: CallRequest{Tool: st.Tool, Arguments: raw, SessionID: c.req.SessionID, SubjectToken: c.req.SubjectToken},
			caller: c.caller, timing: callTiming{started: time.Now()}, lineage: callLineage{parent: c.id, up: c, depth: c.lineage.depth + 1},
			review: callReview{preApproved: c.review.approvedRun}}
		res := inv.finish(ctx, child, inv.guarded(ctx, child))
		// The composite's answer names each step's call: the steps'
		// records are made to survive a crash first, as answered calls.
		if err := inv.acknowledge(ctx, res); err != nil {
			inv.log.ErrorContext(ctx, "composite step not recorded", "call_id", res.CallID, "err", err)
			res = notRecorded(res, err)
		}
		entry := map[string]any{"step": i, "tool": st.Tool, "call_id": res.CallID, "status": res.Status}
		var data any
		if res.Success {
			data, _ = decodeValue(res.Data)
			entry["data"] = data
		} else if res.Error != nil {
			entry["error"] = res.Error
		}
		steps = append(steps, entry)
		scope["steps"] = append(scope["steps"].([]any), map[string]any{"data": data, "status": res.Status})
		if !res.Success {
			e := res.Error
			if e == nil {
				e = &ToolError{Code: models.CodeExecutionFailed, Message: res.Status}
			}
			out := ToolResult{Status: models.StatusFailed, Error: &ToolError{Code: e.Code, Retryable: e.Retryable, Suggestion: e.Suggestion, ConnectURL: e.ConnectURL,
				Problems: e.Problems, Message: fmt.Sprintf("step %d (%s) ended %s: %s", i, st.Tool, res.Status, e.Message)}}
			out.Data = mustMarshal(map[string]any{"steps": steps})
			return out
		}
	}
	out := map[string]any{"steps": steps}
	if len(steps) > 0 {
		out["output"] = steps[len(steps)-1]["data"]
	}
	return ToolResult{Status: models.StatusSucceeded, Success: true, Data: mustMarshal(out)}
}

func mustMarshal(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return raw
}
