package models

import (
	"fmt"
	"strings"
	"testing"
)

// hostileRunes are the characters a name or label must never hold: every
// C0 control, DEL and the C1 controls, the bidirectional marks, overrides,
// embeddings and isolates, zero-width characters, the BOM and the line and
// paragraph separators.
func hostileRunes() []rune {
	var out []rune
	for r := rune(0); r < 0x20; r++ {
		out = append(out, r)
	}
	out = append(out, 0x7F, 0x80, 0x85, 0x9F,
		0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F,
		0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
		0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF, 0x2028, 0x2029, 0xE0001)
	return out
}

func TestHiddenRune(t *testing.T) {
	for _, r := range hostileRunes() {
		multilineOK := r == '\t' || r == '\n' || r == '\r'
		for _, s := range []string{string(r), "admin" + string(r) + "nimda", string(r) + "ci deploy"} {
			got, at, found := HiddenRune(s, false)
			if !found || got != r || at != strings.Index(s, string(r)) {
				t.Errorf("HiddenRune(%q) = %U at %d, %v; want %U at %d", s, got, at, found, r, strings.Index(s, string(r)))
			}
			if _, _, found := HiddenRune(s, true); found == multilineOK {
				t.Errorf("HiddenRune(%q, multiline) found %v", s, found)
			}
		}
	}
	// What people write is allowed: accents, scripts written right to
	// left (their direction comes from the letters, not from controls),
	// emoji, and spaces.
	for _, s := range []string{"ci deploy", "clé de déploiement", "مفتاح النشر", "מפתח", "键 🔑", "a\u00a0b", ""} {
		if r, _, found := HiddenRune(s, false); found {
			t.Errorf("HiddenRune(%q) = %U, want none", s, r)
		}
	}
}

func TestCheckTextSaysWhich(t *testing.T) {
	var ps Problems
	ps.CheckText("/label", "ci\u202Eyolped", false)
	ps.CheckText("/label", "bell\a", false)
	ps.CheckText("/description", "line one\nline two", true)
	want := []string{
		"/label: holds U+202E, an invisible or bidirectional formatting character, at character 3: such characters can make text show as something else",
		"/label: holds U+0007, a control character, at character 5: such characters can make text show as something else",
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s: %s", p.Pointer, p.Message))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
