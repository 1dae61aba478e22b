package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"toolbelt/services/catalog"
	"toolbelt/services/redact"
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
	inv := &Invoker{schemas: newSchemaCache(), validated: newValidatedMemo(), results: newResultsCache()}
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

// FuzzRedactJSON: whatever JSON document a tool answers, RedactJSON's
// output is valid JSON, and a secret put on a line of its own into any of
// its strings (a key or a value, at any depth) does not survive.
func FuzzRedactJSON(f *testing.F) {
	r, err := redact.New([]string{"configured-secret-value"})
	if err != nil {
		f.Fatal(err)
	}
	secrets := []struct{ line, secret string }{
		{"configured-secret-value", "configured-secret-value"},
		{"ghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L", "ghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L"},
		{`curl -H "Authorization: Bearer k9Xq2LmP7vR4tY8wZ3nB6cD1fG5hJ0sA" https://api.acme.dev`, "k9Xq2LmP7vR4tY8wZ3nB6cD1fG5hJ0sA"},
		{"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ9bX2kL8p", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ9bX2kL8p"},
		{"DATABASE_URL=postgres://app:Qz7!vR2mK9xP@db.internal:5432/orders", "Qz7!vR2mK9xP"},
	}
	for _, s := range []string{`{"path":"a.txt","content":"hello\nworld","size":11}`, `["a",{"b":"c"},1.50,null]`, `"x"`, `{"k\"ey":"v\\u0041\n"}`, `{}`, `[[["deep"]]]`} {
		for which := range len(secrets) {
			f.Add([]byte(s), uint(which), uint(3*which), uint8(which))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte, where, at uint, which uint8) {
		if !json.Valid(doc) {
			return
		}
		out := r.RedactJSON(doc)
		if !json.Valid(out) {
			t.Fatalf("RedactJSON(%q) = %q, not JSON", doc, out)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		s := secrets[int(which)%len(secrets)]
		n := 0
		countStrings(v, &n)
		if n == 0 {
			return
		}
		target := int(where % uint(n))
		v = insertSecret(v, &target, int(at), "\n"+s.line+"\n")
		in, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = r.RedactJSON(in)
		if !json.Valid(out) {
			t.Fatalf("RedactJSON(%q) = %q, not JSON", in, out)
		}
		var back any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		if text := fmt.Sprint(back); strings.Contains(text, s.secret) || strings.Contains(string(out), s.secret) {
			t.Fatalf("secret survived: %s", out)
		}
	})
}

func countStrings(v any, n *int) {
	switch x := v.(type) {
	case string:
		*n++
	case []any:
		for _, e := range x {
			countStrings(e, n)
		}
	case map[string]any:
		for k, e := range x {
			countStrings(k, n)
			countStrings(e, n)
		}
	}
}

// insertSecret puts line into the target-th string of v (in the order
// countStrings counts them, keys before their values), at byte at (moved
// back to a rune boundary).
func insertSecret(v any, target *int, at int, line string) any {
	insert := func(s string) string {
		i := at % (len(s) + 1)
		for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
			i--
		}
		return s[:i] + line + s[i:]
	}
	switch x := v.(type) {
	case string:
		if *target == 0 {
			*target = -1
			return insert(x)
		}
		*target--
		return x
	case []any:
		for i := range x {
			x[i] = insertSecret(x[i], target, at, line)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			nk := insertSecret(k, target, at, line).(string)
			out[nk] = insertSecret(x[k], target, at, line)
		}
		return out
	}
	return v
}
