package models

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// jsonStrings are the inputs where escapers differ: every ASCII control,
// quotes and backslashes, the HTML characters encoding/json escapes by
// default, DEL, multi-byte runes, the line and paragraph separators and
// invalid or cut-short UTF-8.
var jsonStrings = []string{
	"", "plain", `{"path":"a.txt"}`, "quote \" backslash \\ slash /",
	"\x00\x01\x07\b\t\n\v\f\r\x1b\x1f\x7f", "<script>&amp;</script>",
	"é ☃ 😀 名前", "line\u2028para\u2029end", "\u2027\u202a",
	"bad \xff\xfe utf8 \xe2\x82", "\xe2\x82\b\xe2\x80\xa8", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 too high",
	"ends \\", "\ufffd",
}

// encodingJSON is s as encoding/json writes it without HTML escapes, but
// for \b and \f, which it shortens where the log handler (and
// AppendJSONString) write \u0008 and \u000c. An ASCII byte is never part
// of a multi-byte sequence, so s is escaped piecewise between them.
func encodingJSON(t testing.TB, s string) string {
	var out strings.Builder
	out.WriteByte('"')
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '\b' && s[i] != '\f' {
			continue
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s[start:i]); err != nil {
			t.Fatal(err)
		}
		quoted := strings.TrimSuffix(b.String(), "\n")
		out.WriteString(quoted[1 : len(quoted)-1])
		if i < len(s) {
			out.WriteString(map[byte]string{'\b': `\u0008`, '\f': `\u000c`}[s[i]])
		}
		start = i + 1
	}
	out.WriteByte('"')
	return out.String()
}

// slogJSON is s as the JSON log handler writes a string attribute.
func slogJSON(t testing.TB, s string) string {
	var b bytes.Buffer
	h := slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}})
	r := slog.NewRecord(time.Time{}, slog.LevelInfo, "", 0)
	r.AddAttrs(slog.String("s", s))
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), `{"s":`), "}\n")
}

func checkJSONString(t *testing.T, s string) {
	t.Helper()
	got := string(AppendJSONString([]byte("x"), s))[1:]
	if want := encodingJSON(t, s); got != want {
		t.Errorf("%q: got %s, encoding/json (no HTML escapes) writes %s", s, got, want)
	}
	if want := slogJSON(t, s); got != want {
		t.Errorf("%q: got %s, the JSON log handler writes %s", s, got, want)
	}
	var back string
	if err := json.Unmarshal([]byte(got), &back); err != nil {
		t.Fatalf("%q: %s does not decode: %v", s, got, err)
	}
	if utf8.ValidString(s) && back != s {
		t.Errorf("%q reads back as %q", s, back)
	}
}

func TestAppendJSONString(t *testing.T) {
	t.Parallel()
	for _, s := range jsonStrings {
		checkJSONString(t, s)
	}
	for c := range 0x80 {
		checkJSONString(t, string(rune(c))+"x"+string(rune(c)))
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(checkJSONString)
}
