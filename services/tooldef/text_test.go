package tooldef

import (
	"encoding/json"
	"testing"
)

// hiddenRunes are what an author or an upstream server might slip into a
// tool's text so that the console, an admin's terminal or an agent's LLM
// reads something else than what is stored: every C0 control, the
// right-to-left mark and override, and the isolates.
func hiddenRunes() []rune {
	out := []rune{0x200F, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}
	for r := rune(0); r < 0x20; r++ {
		out = append(out, r)
	}
	return out
}

// notesTool is a valid definition with h put in by edit.
func notesTool(h string, edit func(def *Definition, h string)) *Definition {
	def := &Definition{Name: "read_notes", Version: "1.0.0", Description: "Reads the notes file.", Category: "filesystem",
		Tags: []string{"notes"}, Examples: []string{"show my notes"},
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Where the notes are."}}}`),
		Security:   Security{Level: LevelSafe}, Execution: Execution{Timeout: 1000},
		Runner: Runner{Kind: RunnerBuiltin, Builtin: "file_read"}}
	edit(def, h)
	return def
}

// Every name and text of a definition the console shows refuses hidden
// characters, at its own pointer; a description or title may hold line
// breaks and tabs, nothing else.
func TestDefinitionRefusesHiddenCharacters(t *testing.T) {
	inJSON := func(h string) string { b, _ := json.Marshal(h); return string(b[1 : len(b)-1]) }
	cases := []struct {
		name      string
		multiline bool
		pointer   func(h string) string
		edit      func(d *Definition, h string)
	}{
		{"name", false, func(string) string { return "/name" },
			func(d *Definition, h string) { d.Name = "read" + h + "notes" }},
		{"description", true, func(string) string { return "/description" },
			func(d *Definition, h string) { d.Description = "Reads the notes" + h + " file." }},
		{"example", false, func(string) string { return "/examples/0" },
			func(d *Definition, h string) { d.Examples = []string{"show my" + h + " notes"} }},
		{"tag", false, func(string) string { return "/tags/0" },
			func(d *Definition, h string) { d.Tags = []string{"no" + h + "tes"} }},
		{"property name", false, func(h string) string { return "/parameters/properties/pa" + EscapePointer(h) + "th" },
			func(d *Definition, h string) {
				d.Parameters = json.RawMessage(`{"type":"object","properties":{"pa` + inJSON(h) + `th":{"type":"string"}}}`)
			}},
		{"property description", true, func(string) string { return "/parameters/properties/path/description" },
			func(d *Definition, h string) {
				d.Parameters = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Where the notes ` + inJSON(h) + `are."}}}`)
			}},
		{"title of a property named enum", true, func(string) string { return "/parameters/properties/enum/title" },
			func(d *Definition, h string) {
				d.Parameters = json.RawMessage(`{"type":"object","properties":{"enum":{"type":"string","title":"Which ` + inJSON(h) + `one"}}}`)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range hiddenRunes() {
				h := string(r)
				_, ps := Validate(notesTool(h, tc.edit), func(string) bool { return true })
				if tc.multiline && (r == '\t' || r == '\n' || r == '\r') {
					if len(ps) != 0 {
						t.Errorf("%U refused: %v", r, ps)
					}
					continue
				}
				found := false
				for _, p := range ps {
					found = found || p.Pointer == tc.pointer(h)
				}
				if !found {
					t.Errorf("%U accepted: problems %v, want one at %q", r, ps, tc.pointer(h))
				}
			}
		})
	}
	// Text in other scripts, including those written right to left, is
	// not hidden.
	def := notesTool("", func(d *Definition, _ string) {
		d.Description = "يقرأ ملف الملاحظات. Lit le fichier de notes."
	})
	if _, ps := Validate(def, func(string) bool { return true }); len(ps) != 0 {
		t.Errorf("a description in Arabic and French: %v", ps)
	}
}
