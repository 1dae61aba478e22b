package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"toolbelt/services/catalog"
	"toolbelt/services/tooldef"

	"toolbelt/models"
)

// FuzzCheckPath: a path the guard accepts never leaves the work directory
// once joined and cleaned.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "/etc/passwd", "a/../../b", "..\\\\x", "a/./b", "....//x", "C:\\\\x", "%2e%2e/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkPath(p, nil) != "" {
			return
		}
		joined := filepath.Clean(filepath.Join("/work/root", p))
		if joined != "/work/root" && !strings.HasPrefix(joined, "/work/root/") {
			t.Fatalf("accepted %q, which resolves to %s", p, joined)
		}
	})
}

// FuzzValidateArguments: no argument bytes panic the validate guard, and
// what it lets through is a JSON object the schema accepts.
func FuzzValidateArguments(f *testing.F) {
	for _, s := range []string{`{"path":"a.txt"}`, `{"path":1}`, `[]`, `null`, ``, `{"path":"a","extra":{"$ref":"#"}}`, `{"path":"\u0000"}`, `{"a":` + strings.Repeat("[", 200)} {
		f.Add([]byte(s))
	}
	defs, _ := catalog.BuiltinDefinitions()
	var def tooldef.Definition
	for _, d := range defs {
		if d.Name == "file_read" {
			def = d
		}
	}
	inv := &Invoker{memo: memos{schemas: newSchemaCache(), validated: newValidatedMemo(), results: newResultsCache()}}
	step := inv.validate(func(_ context.Context, c *call) ToolResult {
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := &call{def: def, version: 1, req: CallRequest{Arguments: raw}}
		res := step(context.Background(), c)
		if !res.Success {
			if res.Error == nil || res.Error.Code != models.CodeValidation {
				t.Fatalf("refused without VALIDATION_ERROR: %+v", res)
			}
			return
		}
		if _, ok := c.args["path"].(string); !ok {
			t.Fatalf("accepted %q without a string path", raw)
		}
	})
}

// A result without an error is encoded by hand: byte for byte what
// encoding/json makes of it, or refused (Data that is not JSON) so that
// encoding/json says why.
func FuzzResultJSON(f *testing.F) {
	for _, d := range []string{``, `{"content":"hello"}`, ` { "a" : [1, 2.5e3, null, true] } `, `"<&>\u2028 é"`, `{"a":`, `nul`, `"\u0000\n"`} {
		f.Add(d, "5d1e0c2a9b7f4e31", "succeeded", "1.0.0", int64(12), true)
	}
	f.Add(`{}`, "id\"x", "failed", "2.0.0-rc<1>", int64(-1), false)
	f.Fuzz(func(t *testing.T, data, id, status, version string, ms int64, cached bool) {
		r := ToolResult{CallID: id, Status: status, Success: cached, Data: json.RawMessage(data),
			Metadata: CallMetadata{Duration: ms, Cached: cached, Attempts: int(ms % 7), ToolVersion: version}}
		got, ok := r.appendSuccess(nil)
		want, err := json.Marshal(r)
		if !ok {
			if err == nil && plainASCII(id) && plainASCII(status) && plainASCII(version) {
				t.Fatalf("refused %+v, which encoding/json encodes as %s", r, want)
			}
			return
		}
		if err != nil {
			t.Fatalf("encoded %s, which encoding/json refuses: %v", got, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encoded\n%s\nencoding/json\n%s", got, want)
		}
		// A cached result's data, encoded once, encodes the same.
		if data, ok := encodedData(r.Data); ok && len(r.Data) > 0 {
			cached := r
			cached.Data, cached.dataEncoded = data, true
			if again, _ := cached.appendSuccess(nil); !bytes.Equal(again, want) {
				t.Fatalf("with its data encoded once: %s, want %s", again, want)
			}
		}
		if e := (ToolResult{Error: &ToolError{Code: "X"}}); !bytes.Equal(e.JSON(), must(json.Marshal(e))) {
			t.Fatal("a result with an error is not encoded as encoding/json does")
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
