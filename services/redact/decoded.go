package redact

import (
	"encoding/base64"
	"encoding/hex"
	"html"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/zricethezav/gitleaks/v8/detect/codec"
)

// A secret may reach the redactor spelled otherwise than as it is matched:
// escaped in a string literal (\" and \n before it, \u0067 for its first
// letter), as \xNN or HTML character references, with zero-width or bidi
// characters between its letters, or encoded whole in base64, hex or %xx.
// The redactor reads the text as it would read once undone, finds the
// secrets there, and removes the spans of the original text they came
// from. Two layers do the undoing:
//
//   - a character view (plainView) undoes what is spelled character by
//     character: string escapes, \xNN, \uNNNN, HTML references, and the
//     invisible format characters, which it drops;
//   - gitleaks' own decoder (detect/codec) then undoes base64, hex and
//     percent-encoding, pass after pass for what is encoded within an
//     encoding, as gitleaks' detector does with a decode depth, and maps
//     each match back to the encoded text it came from.

// maxDecodeDepth is how many decoding passes run on a text, gitleaks'
// command-line default: each pass decodes what the previous one revealed
// (base64 holding percent-encoded text takes two).
const maxDecodeDepth = 5

// redactDecoded removes the secrets that s holds once its character
// spellings and encodings are undone, where s spells them.
func (r *Redactor) redactDecoded(s string) string {
	view := newPlainView(s)
	var marks []mark
	if len(view.pieces) > 0 { // else s itself was searched already
		for _, m := range r.secretsIn(view.text) {
			m.start, m.end = view.original(m.start, m.end)
			marks = append(marks, m)
		}
	}
	text := view.text
	var segments []*codec.EncodedSegment
	var decoder *codec.Decoder
	for depth := 1; depth <= maxDecodeDepth && mayDecode(text); depth++ {
		if decoder == nil {
			decoder = codec.NewDecoder()
		}
		// gitleaks' decoder logs each segment it decodes at debug level,
		// decoded value included; its logger stays at info.
		text, segments = decoder.Decode(text, segments)
		if len(segments) == 0 {
			break
		}
		for _, m := range r.secretsIn(text) {
			overlap := codec.SegmentsWithDecodedOverlap(segments, m.start, m.end)
			if len(overlap) == 0 {
				continue // in text decoded in an earlier pass
			}
			at := codec.AdjustMatchIndex(overlap, []int{m.start, m.end})
			if start, end := max(at[0], 0), min(at[1], len(view.text)); start < end {
				m.start, m.end = view.original(start, end)
				marks = append(marks, m)
			}
		}
	}
	return redactMarks(s, marks)
}

// mayDecode reports whether gitleaks' decoder could decode something in
// text: a %xx, \uNNNN or U+NNNN, a run of 32 hex digits, or a run of 16
// base64 characters, each standing for printable text as its decoder
// requires. Its decoder finds candidates with one regular expression
// holding a group per encoding, slow in Go's engine on long text, and most
// output holds no candidate (see docs/benchmarks.md).
func mayDecode(text string) bool {
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '%' && i+2 < len(text):
			if n, ok := hexValue(text[i+1 : i+3]); ok && printable(n) {
				return true
			}
		case c == '\\' && i+5 < len(text) && (text[i+1] == 'u' || text[i+1] == 'U'):
			if _, ok := hexValue(text[i+2 : i+6]); ok {
				return true
			}
		case isBase64Char(c):
			end, plus := i+1, false
			for end < len(text) && isBase64Char(text[end]) {
				plus = plus || text[end] == '+'
				end++
			}
			if run := text[i:end]; plus && strings.Contains(run, "U+") || len(run) >= 16 && decodesToText(run) {
				return true
			}
			i = end
			continue
		}
		i++
	}
	return false
}

func isBase64Char(c byte) bool { return byteClass[c] == base64Char }

func isHexDigit(c byte) bool {
	_, ok := hexDigit(c)
	return ok
}

// hexValue reads s, of hex digits only, as a number.
func hexValue(s string) (rune, bool) {
	var n rune
	for i := 0; i < len(s); i++ {
		d, ok := hexDigit(s[i])
		if !ok {
			return 0, false
		}
		n = n<<4 | d
	}
	return n, true
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// decodesToText reports whether run, of base64 characters, holds what
// gitleaks' decoder decodes: hex digits, 32 or more, or the whole run as
// base64, standing for printable ASCII.
func decodesToText(run string) bool {
	for i := 0; i < len(run); {
		end := i
		for end < len(run) && isHexDigit(run[end]) {
			end++
		}
		if h := run[i:end]; len(h) >= 32 && (hexToText(h) || hexToText(h[1:])) {
			return true
		}
		i = end + 1
	}
	if !strings.ContainsAny(run, "0123456789+/-_") {
		return false // gitleaks' decoder passes over it as well
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(run); err == nil && printableASCII(b) {
			return true
		}
	}
	return false
}

func hexToText(h string) bool {
	b, err := hex.DecodeString(h[:len(h)/2*2])
	return err == nil && printableASCII(b)
}

// printableASCII is gitleaks' decoder's test of what it decoded.
func printableASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x7f || c <= 0x08 {
			return false
		}
	}
	return true
}

// mark is a span of a text to replace with [REDACTED:rule].
type mark struct {
	start, end int
	rule       string
}

// secretsIn returns where text holds a configured secret, a Toolbelt key
// or a secret gitleaks' rules find (each occurrence of its value).
func (r *Redactor) secretsIn(text string) []mark {
	var marks []mark
	all := func(value, rule string) {
		for i := 0; ; {
			j := strings.Index(text[i:], value)
			if j < 0 {
				return
			}
			marks = append(marks, mark{i + j, i + j + len(value), rule})
			i += j + len(value)
		}
	}
	for _, v := range r.values {
		all(v, "configured-secret")
	}
	if strings.Contains(text, "tb_") {
		for _, at := range toolbeltKey.FindAllStringIndex(text, -1) {
			marks = append(marks, mark{at[0], at[1], "toolbelt-api-key"})
		}
	}
	if r.keywords == nil || r.keywords.MatchFirstString(strings.ToLower(text)) != nil {
		for _, f := range r.find(text) {
			if f.Secret != "" {
				all(f.Secret, f.RuleID)
			}
		}
	}
	return marks
}

// redactMarks replaces each marked span of s (overlapping ones as one)
// with its mark.
func redactMarks(s string, marks []mark) string {
	if len(marks) == 0 {
		return s
	}
	sort.Slice(marks, func(a, b int) bool {
		if marks[a].start != marks[b].start {
			return marks[a].start < marks[b].start
		}
		return marks[a].end > marks[b].end
	})
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for i := 0; i < len(marks); {
		m := marks[i]
		for i++; i < len(marks) && marks[i].start < m.end; i++ {
			m.end = max(m.end, marks[i].end)
		}
		b.WriteString(s[at:m.start])
		b.WriteString("[REDACTED:" + m.rule + "]")
		at = m.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// plainView is a text with its character-level spellings undone, and the
// way back from a span of the view to the span of the text it came from.
type plainView struct {
	text string
	// pieces are the stretches of the view that differ from the text, in
	// order; between two, the view is the text shifted.
	pieces []piece
}

// piece: view[view:viewEnd] stands for text[orig:origEnd] (empty in the
// view when a character was dropped).
type piece struct{ view, viewEnd, orig, origEnd int }

// newPlainView reads s as a string literal and as HTML would have it: the
// escapes \" \' \\ \/ \n \r \t, \uNNNN and \xNN, and HTML character
// references are undone; invisible format characters (zero-width spaces
// and joiners, bidi controls, the byte-order mark, soft hyphens) are
// dropped; runs of more than five blanks become one line break or space
// (gitleaks' patterns allow up to five between a key and its value).
func newPlainView(s string) plainView {
	if !mayBeSpelled(s) {
		return plainView{text: s}
	}
	var (
		v    plainView
		b    strings.Builder
		last int // s[last:i] is yet to be copied to the view
	)
	b.Grow(len(s))
	replace := func(i, end int, with string) {
		b.WriteString(s[last:i])
		v.pieces = append(v.pieces, piece{b.Len(), b.Len() + len(with), i, end})
		b.WriteString(with)
		last = end
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			if with, n := unescape(s[i:]); n > 0 {
				replace(i, i+n, with)
				i += n
				continue
			}
		case c == '&':
			if with, n := unreference(s[i:]); n > 0 {
				replace(i, i+n, with)
				i += n
				continue
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			n := 1
			for i+n < len(s) && strings.IndexByte(" \t\n\r", s[i+n]) >= 0 {
				n++
			}
			if n > 5 {
				with := " "
				if strings.IndexByte(s[i:i+n], '\n') >= 0 {
					with = "\n"
				}
				replace(i, i+n, with)
			}
			i += n
			continue
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(s[i:])
			if unicode.Is(unicode.Cf, r) {
				replace(i, i+n, "")
			}
			i += n
			continue
		}
		i++
	}
	b.WriteString(s[last:])
	v.text = b.String()
	return v
}

// mayBeSpelled reports whether s holds anything newPlainView undoes.
func mayBeSpelled(s string) bool {
	if strings.IndexByte(s, '\\') >= 0 || strings.IndexByte(s, '&') >= 0 {
		return true
	}
	blanks := 0
	for i := 0; i < len(s); i++ {
		switch byteClass[s[i]] {
		case blank:
			if blanks++; blanks > 5 {
				return true
			}
			continue
		case nonASCII:
			return true
		}
		blanks = 0
	}
	return false
}

// byteClass sorts bytes for the scans that decide whether a text needs a
// view or a decoding pass, which look at every byte of every output.
var byteClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			t[c] = blank
		case c >= utf8.RuneSelf:
			t[c] = nonASCII
		case isAlnum(byte(c)) || c == '_' || c == '/' || c == '+' || c == '-':
			t[c] = base64Char
		}
	}
	return t
}()

const (
	other uint8 = iota
	blank
	nonASCII
	base64Char
)

// unescape undoes the backslash escape s starts with: what it stands for
// and its length, or 0 when s starts with none (or one standing for a
// control character other than a blank).
func unescape(s string) (string, int) {
	switch s[1] {
	case 'n':
		return "\n", 2
	case 'r':
		return "\r", 2
	case 't':
		return "\t", 2
	case '"', '\'', '\\', '/':
		return s[1:2], 2
	case 'x', 'X':
		if len(s) >= 4 {
			if n, ok := hexValue(s[2:4]); ok && printable(n) {
				return string(n), 4
			}
		}
	case 'u', 'U':
		if len(s) >= 6 {
			if n, ok := hexValue(s[2:6]); ok && printable(n) {
				return string(n), 6
			}
		}
	}
	return "", 0
}

// unreference undoes the HTML character reference s starts with (&#103;,
// &#x67;, &quot;; a numeric one may lack its semicolon, as browsers
// allow): what it stands for and its length, or 0.
func unreference(s string) (string, int) {
	end := 1
	numeric := len(s) > 1 && s[1] == '#'
	if numeric {
		end = 2
		if len(s) > 2 && (s[2] == 'x' || s[2] == 'X') {
			end = 3
		}
	}
	for end < len(s) && end < 34 && isAlnum(s[end]) {
		end++
	}
	if end < len(s) && s[end] == ';' {
		end++
	} else if !numeric {
		return "", 0
	}
	with := html.UnescapeString(s[:end])
	if with == s[:end] {
		return "", 0
	}
	if r, _ := utf8.DecodeRuneInString(with); !printable(r) {
		return "", 0
	}
	return with, end
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// printable: a character a secret, or the text around one, may hold.
func printable(r rune) bool {
	return r == '\n' || r == '\r' || r == '\t' || unicode.IsPrint(r) && !unicode.Is(unicode.Cf, r)
}

// original returns the span of the text that the view's [start, end)
// came from.
func (v plainView) original(start, end int) (int, int) {
	if len(v.pieces) == 0 {
		return start, end
	}
	return v.originalAt(start, false), v.originalAt(end-1, true) + 1
}

// originalAt maps the view's byte at p to the text: the first byte of
// what it came from, or the last when last is set.
func (v plainView) originalAt(p int, last bool) int {
	// The last piece starting at or before p (deletions, empty in the
	// view, sort before the piece that follows them).
	i := sort.Search(len(v.pieces), func(i int) bool { return v.pieces[i].view > p }) - 1
	if i < 0 {
		return p
	}
	pc := v.pieces[i]
	if p < pc.viewEnd {
		if last {
			return pc.origEnd - 1
		}
		return pc.orig
	}
	return pc.origEnd + (p - pc.viewEnd)
}
