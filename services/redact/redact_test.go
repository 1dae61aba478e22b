package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	r, err := New([]string{"hunter2-very-secret", "short"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, in, secret string
	}{
		{"aws key", "key id AKIAZ7VRSQ4TJNWDEMPX here", "AKIAZ7VRSQ4TJNWDEMPX"},
		{"github token", "token=ghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L", "ghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvredZiKRkgwlL9xNAwxXFg0x/XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC+9aGVd+Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmwIDAQABAoIBAQCQvsRU3ZkZRz3sLoF8vr\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0"},
		{"toolbelt key", "Authorization: Bearer tb_" + strings.Repeat("ab", 32), "tb_" + strings.Repeat("ab", 32)},
		{"configured secret", "password is hunter2-very-secret.", "hunter2-very-secret"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Redact(tc.in)
			if strings.Contains(got, tc.secret) || !strings.Contains(got, "[REDACTED:") {
				t.Errorf("not redacted: %q", got)
			}
		})
	}
	if got := r.Redact("a short note about the weather"); got != "a short note about the weather" {
		t.Errorf("plain text changed: %q", got)
	}
	// A secret written with JSON escapes is found all the same.
	for _, esc := range []string{`{"a":"hunter2\/very-secret"}`, `{"a":"hunter2-very-secr\u0065t"}`} {
		r2, _ := New([]string{"hunter2/very-secret", "hunter2-very-secret"})
		if got := string(r2.RedactJSON([]byte(esc))); strings.Contains(got, "very-secret") || !strings.Contains(got, "REDACTED") {
			t.Errorf("escaped secret survived: %s -> %s", esc, got)
		}
	}
	raw := []byte(`{"out":"token hunter2-very-secret","n":1.50,"list":["ok"]}`)
	var v map[string]any
	if err := json.Unmarshal(r.RedactJSON(raw), &v); err != nil || strings.Contains(v["out"].(string), "hunter2") || v["list"].([]any)[0] != "ok" {
		t.Errorf("RedactJSON: %v %v", v, err)
	}
}

func FuzzRedact(f *testing.F) {
	r, err := New([]string{"configured-secret-value"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`{"a":"AKIAZ7VRSQ4TJNWDEMPX"}`)
	f.Add("plain")
	f.Add("configured-secret-value")
	f.Fuzz(func(t *testing.T, s string) {
		out := r.Redact(s)
		if strings.Contains(out, "configured-secret-value") {
			t.Fatalf("configured secret survived: %q", out)
		}
		_ = r.RedactJSON([]byte(s))
	})
}

// TestRedactJSONDecodedStrings: tool output arrives JSON-encoded, where a
// file's " is \" and its line breaks \n; the secret is redacted all the
// same (issue 14: a curl command with a double-quoted Bearer header came
// back from file_read unredacted, the single-quoted one did not).
func TestRedactJSONDecodedStrings(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	const token = "k9Xq2LmP7vR4tY8wZ3nB6cD1fG5hJ0sA"
	for _, content := range []string{
		`curl -H "Authorization: Bearer ` + token + `" https://api.acme.dev/v1/orders`,
		`curl -H 'Authorization: Bearer ` + token + `' https://api.acme.dev/v1/orders`,
		"#!/bin/sh\nset -e\ncurl -sS \\\n  -H \"Authorization: Bearer " + token + "\" \\\n  https://api.acme.dev/v1/orders\n",
	} {
		raw, _ := json.Marshal(map[string]any{"path": "deploy.sh", "content": content, "size": len(content)})
		out := r.RedactJSON(raw)
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output is not JSON: %s", out)
		}
		if strings.Contains(string(out), token) || !strings.Contains(got["content"].(string), "[REDACTED:") {
			t.Errorf("token survived in %q:\n%s", content, out)
		}
		if got["path"] != "deploy.sh" {
			t.Errorf("path altered: %s", out)
		}
	}
}

// A file that is JSON itself may spell a secret's letters as \uXXXX
// escapes: the unquoted view finds it, and the removal matches it as the
// file spells it (issue 14 review: "\u0067hp_…" came back from file_read).
func TestRedactUnicodeEscapedSecret(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	token := "ghp_" + "wUIGr3Kq9ZpTnX2dLs8vYb6MhCeA1fJo4Q7k"
	for _, file := range []string{
		`{"a": "\u0067hp_` + token[4:] + `"}`,
		`{"a": "\u0067\u0068\u0070\u005f` + token[4:] + `"}`,
		`{"a": "` + token[:10] + fmt.Sprintf(`\u%04x`, token[10]) + token[11:] + `"}`,
	} {
		raw, _ := json.Marshal(map[string]any{"content": file})
		out := string(r.RedactJSON(raw))
		if strings.Contains(out, token[8:20]) {
			t.Errorf("%s came back as %s", file, out)
		}
	}
}
