package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRedactJSON: whatever JSON document a tool answers, RedactJSON's
// output is valid JSON, and a secret put on a line of its own into any of
// its strings (a key or a value, at any depth) does not survive.
func FuzzRedactJSON(f *testing.F) {
	r, err := New([]string{"configured-secret-value"})
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

// FuzzPlainView: the character view is the text with each of its pieces
// replaced by what that piece reads as on its own, and every span of the
// view maps back to the span of the text it came from (checked against a
// map kept byte by byte): what the redactor removes for a secret found in
// the view is where the text spells that secret.
func FuzzPlainView(f *testing.F) {
	for _, s := range []string{`a\u0041b`, "x\u200by", `&#103;&amp;\x41`, "k:\n        v", `\\x41\"`, "&#x67&#104;z\u202e", "&#001"} {
		f.Add(s, uint(1), uint(3))
	}
	f.Fuzz(func(t *testing.T, s string, a, b uint) {
		v := newPlainView(s)
		// The view rebuilt from the pieces, and where each of its bytes
		// came from.
		var rebuilt strings.Builder
		var from [][2]int
		copied := 0
		copyTo := func(end int) {
			for i := copied; i < end; i++ {
				from = append(from, [2]int{i, i + 1})
			}
			rebuilt.WriteString(s[copied:end])
		}
		for _, pc := range v.pieces {
			if pc.orig < copied || pc.origEnd < pc.orig || pc.origEnd > len(s) {
				t.Fatalf("%q: piece %+v out of order", s, pc)
			}
			copyTo(pc.orig)
			if got, want := newPlainView(s[pc.orig:pc.origEnd]).text, v.text[pc.view:pc.viewEnd]; got != want {
				t.Fatalf("%q: piece %q reads %q on its own, %q in the view", s, s[pc.orig:pc.origEnd], got, want)
			}
			for range pc.viewEnd - pc.view {
				from = append(from, [2]int{pc.orig, pc.origEnd})
			}
			rebuilt.WriteString(v.text[pc.view:pc.viewEnd])
			copied = pc.origEnd
		}
		copyTo(len(s))
		if rebuilt.String() != v.text {
			t.Fatalf("%q: view %q, rebuilt %q", s, v.text, rebuilt.String())
		}
		if len(v.text) == 0 {
			return
		}
		start, end := int(a%uint(len(v.text))), int(b%uint(len(v.text)))
		if start > end {
			start, end = end, start
		}
		end++
		os, oe := v.original(start, end)
		if os != from[start][0] || oe != from[end-1][1] {
			t.Fatalf("%q: view [%d,%d) maps to [%d,%d), want [%d,%d)", s, start, end, os, oe, from[start][0], from[end-1][1])
		}
	})
}
