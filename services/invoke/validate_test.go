package invoke

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"toolbelt/models"
	"toolbelt/services/redact"
	"toolbelt/services/tooldef"
)

// TestValidateGuard runs argument validation alone: every field error with
// its JSON pointer, and the schema in the suggestion.
func TestValidateGuard(t *testing.T) {
	schema := `{"type":"object","properties":{
		"query":{"type":"string","minLength":1},
		"limit":{"type":"integer","minimum":1,"maximum":50},
		"filters":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}},
		"required":["query"],"additionalProperties":false}`
	def := tooldef.Definition{Name: "search_docs", Version: "1.0.0", Parameters: json.RawMessage(schema)}
	inv := &Invoker{memo: memos{schemas: newSchemaCache()}}
	step := inv.validate(passed)
	cases := []struct {
		name     string
		args     string
		pointers []string // nil: the call passes
	}{
		{"valid", `{"query":"go","limit":5}`, nil},
		{"valid with nested items", `{"query":"go","filters":[{"name":"lang"}]}`, nil},
		{"missing required", `{"limit":5}`, []string{""}},
		{"empty arguments miss the required field", ``, []string{""}},
		{"wrong type", `{"query":"go","limit":"five"}`, []string{"/limit"}},
		{"out of range", `{"query":"go","limit":500}`, []string{"/limit"}},
		{"nested error", `{"query":"go","filters":[{"name":"a"},{"name":3}]}`, []string{"/filters/1/name"}},
		{"unknown field", `{"query":"go","limti":5}`, []string{""}},
		{"every error listed", `{"query":"","limit":0}`, []string{"/query", "/limit"}},
		{"not an object", `["go"]`, []string{}},
		{"not JSON", `{"query":`, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{def: def, version: 7, req: CallRequest{Arguments: json.RawMessage(tc.args)}}
			res := step(context.Background(), c)
			if tc.pointers == nil {
				if !res.Success || c.args["query"] != "go" {
					t.Fatalf("refused valid arguments: %+v (args %v)", res.Error, c.args)
				}
				return
			}
			if res.Success || res.Error.Code != models.CodeValidation || res.Status != models.StatusRefused {
				t.Fatalf("want VALIDATION_ERROR, got %+v", res)
			}
			var got []string
			for _, p := range res.Error.Problems {
				got = append(got, p.Pointer)
				if p.Message == "" {
					t.Errorf("problem at %q has no message", p.Pointer)
				}
			}
			for _, want := range tc.pointers {
				if !slices.Contains(got, want) {
					t.Errorf("problems at %q; want one at %q", got, want)
				}
			}
			if !strings.Contains(res.Error.Suggestion, `"limit":{"type":"integer"`) && !strings.Contains(res.Error.Suggestion, `"limit"`) {
				t.Errorf("the suggestion does not show the schema: %s", res.Error.Suggestion)
			}
		})
	}
	// The compiled schema is kept per version.
	if _, ok := inv.memo.schemas.Get(7); !ok {
		t.Error("compiled schema not cached")
	}
}

// Arguments with a cached result are not validated again (validation is a
// pure function of the version's schema and the arguments); any others
// still are, a hit for valid arguments notwithstanding.
func TestValidateSkipsCachedArguments(t *testing.T) {
	schema := `{"type":"object","properties":{"q":{"type":"string","minLength":2}},"required":["q"],"additionalProperties":false}`
	def := tooldef.Definition{Name: "t", Category: "search", Parameters: json.RawMessage(schema), Execution: tooldef.Execution{Cacheable: true, CacheTTL: 60_000}}
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{redactor: red, memo: memos{schemas: newSchemaCache(), validated: newValidatedMemo(), results: newResultsCache()}}
	runs := 0
	step := compose(inv.validate, inv.cache)(func(context.Context, *call) ToolResult {
		runs++
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	do := func(args string) (*call, ToolResult) {
		c := &call{def: def, version: 1, req: CallRequest{Arguments: json.RawMessage(args)}}
		return c, step(context.Background(), c)
	}
	if c, res := do(`{"q":"go"}`); !res.Success || c.outcome.cached || runs != 1 {
		t.Fatalf("first call: %+v cached %v runs %d", res, c.outcome.cached, runs)
	}
	// The compiled schema is gone: a hit must not need it.
	inv.memo.schemas.Purge()
	inv.memo.schemas.Add(1, &compiledParams{}) // no compiled schema
	if c, res := do(` { "q" : "go" } `); !res.Success || !c.outcome.cached || runs != 1 || c.args["q"] != "go" {
		t.Fatalf("hit: %+v cached %v runs %d args %v", res, c.outcome.cached, runs, c.args)
	}
	inv.memo.schemas.Purge()
	for _, bad := range []string{`{"q":"g"}`, `{"q":"go","x":1}`, `{}`} {
		if c, res := do(bad); res.Success || res.Error.Code != models.CodeValidation || c.outcome.cached || runs != 1 {
			t.Errorf("%s: %+v cached %v runs %d; want VALIDATION_ERROR", bad, res, c.outcome.cached, runs)
		}
	}
}
