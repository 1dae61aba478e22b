package models

import "unicode"

// HiddenRune returns the first rune of s that a reader does not see as
// written, and its index in runes: a control character (Unicode Cc, but
// tab, line feed and carriage return when multiline), a format character
// (Cf: the bidirectional overrides, embeddings and isolates U+202A–U+202E
// and U+2066–U+2069, the marks U+200E, U+200F and U+061C, zero-width
// characters) or a line or paragraph separator. A name holding one can
// pass for another in the console, the audit log or a terminal: U+202E
// shows "admin\u202Enimda" as "adminadmin".
func HiddenRune(s string, multiline bool) (r rune, at int, found bool) {
	i := 0
	for _, r := range s {
		switch {
		case multiline && (r == '\t' || r == '\n' || r == '\r'):
		case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
			return r, i, true
		}
		i++
	}
	return 0, 0, false
}

// CheckText adds a problem at pointer when s holds a HiddenRune, naming
// the rune and where it is.
func (p *Problems) CheckText(pointer, s string, multiline bool) {
	r, at, found := HiddenRune(s, multiline)
	if !found {
		return
	}
	kind := "a control character"
	if !unicode.Is(unicode.Cc, r) {
		kind = "an invisible or bidirectional formatting character"
	}
	p.Add(pointer, "holds U+%04X, %s, at character %d: such characters can make text show as something else", r, kind, at+1)
}
