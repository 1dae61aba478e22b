package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
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
// escapes: the character view finds it, and the span removed is the one
// the file spells it with (issue 14 review: "\u0067hp_…" came back from file_read).
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

// TestRedactSpelledSecrets: a secret spelled otherwise than as it is
// matched is removed where the text spells it, and the text around it is
// kept (issue 30: a TOOLBELT_SECRETS value and an API key came back whole
// once their first characters were \u-escaped; base64, hex, %xx, \xNN,
// HTML references and zero-width characters got through).
func TestRedactSpelledSecrets(t *testing.T) {
	const configured, short = "orbit-maple-quartz-7731", "Zq7!pw-91x"
	r, err := New([]string{configured, short})
	if err != nil {
		t.Fatal(err)
	}
	key := "tb_" + strings.Repeat("3f9a0c", 10) + "beef"
	token := "ghp_4Qx9cVb7Lm2Np8Rt6Yw3Zs5Ka1Df0Gh9Jk2L"
	b64 := base64.StdEncoding.EncodeToString
	cases := []struct{ name, in, secret string }{
		{"configured, first letter \\u-escaped", `\u006frbit-maple-quartz-7731`, configured},
		{"configured, an escape inside", `orbit-maple\u002dquartz-7731`, configured},
		{"api key, first letters \\u-escaped", `\u0074\u0062_` + key[3:], key},
		{"api key, base64", b64([]byte(key)), key},
		{"api key, zero-width joiners", strings.Join(strings.Split(key, ""), "\u200d"), key},
		{"token, base64 of its line", b64([]byte("token = " + token)), token},
		{"token, url-safe base64", base64.RawURLEncoding.EncodeToString([]byte(token)), token},
		{"token, hex", hex.EncodeToString([]byte(token)), token},
		{"token, %xx", url.PathEscape(token[:4]) + "%" + strings.ToUpper(hex.EncodeToString([]byte(token[4:5]))) + token[5:], token},
		{"token, every byte %xx", perByte(token, "%%%02X"), token},
		{"token, \\xNN", perByte(token, `\x%02x`), token},
		{"token, decimal references", "&#103;&#104;&#112;&#95;" + token[4:], token},
		{"token, hex references without semicolons", "&#x67&#x68&#x70_" + token[4:], token},
		{"token, bidi controls", "\u202e" + token[:9] + "\u2066" + token[9:] + "\u202c", token},
		{"token, base64 of %xx", b64([]byte(perByte(token, "%%%02X"))), token},
		{"token, base64 of base64", b64([]byte(b64([]byte(token)))), token},
		// Too short for gitleaks' decoder (32 hex digits, 16 base64
		// characters), as a password may be.
		{"short configured, hex", strings.ToUpper(hex.EncodeToString([]byte(short))), short},
		{"short configured, base64", b64([]byte(short)), short},
		{"configured, hex of base64", hex.EncodeToString([]byte(b64([]byte("pw: " + configured)))), configured},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := "before " + tc.in + " after"
			got := r.Redact(in)
			if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") || !strings.Contains(got, "[REDACTED:") {
				t.Fatalf("Redact(%q) = %q", in, got)
			}
			// Nothing of the spelling is left between the two words (an
			// invisible character at either end may be).
			rest := strings.TrimSuffix(strings.TrimPrefix(got, "before "), " after")
			rest = regexp.MustCompile(`\[REDACTED:[a-z0-9-]+\]|\p{Cf}`).ReplaceAllString(rest, "")
			if len(rest) > 4 {
				t.Errorf("Redact(%q) left %q", in, rest)
			}
			raw, _ := json.Marshal(map[string]string{"content": in})
			if out := string(r.RedactJSON(raw)); strings.Contains(out, tc.secret) || strings.Contains(out, tc.in) {
				t.Errorf("RedactJSON(%s) = %s", raw, out)
			}
		})
	}
	// Escapes, references and invisible characters around no secret are
	// left as they are.
	for _, s := range []string{
		`"name": "caf\u00e9", "path": "C:\\Users\\x", "sep": "\t"`,
		"&lt;a href=&quot;/docs?q=a%20b&amp;page=2&quot;&gt; &#169; 2026",
		"family: 👨\u200d👩\u200d👧, persian: می\u200cخواهم, soft: hy\u00adphen",
		"sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"aGVsbG8gd29ybGQsIHRoaXMgaXMgYmFzZTY0IG9mIG9yZGluYXJ5IHRleHQ=",
	} {
		if got := r.Redact(s); got != s {
			t.Errorf("altered %q -> %q", s, got)
		}
	}
}
