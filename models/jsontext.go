package models

import "unicode/utf8"

// AppendJSONString appends s as a quoted JSON string, escaped as the
// JSON log handler (log/slog) escapes one: encoding/json's escapes
// without the HTML ones (the call journal and the log are never served
// as HTML, as encoding/json's Encoder.SetEscapeHTML(false)), invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped, and backspace and form
// feed as \u0008 and \u000c where encoding/json writes \b and \f. It is
// the one hand-written escaper: the busiest lines (a call's journal line,
// a request's access line) are appended field by field, and the generic
// encoders' reflection cost several times the appending.
// TestAppendJSONString and FuzzAppendJSONString hold it to both.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
