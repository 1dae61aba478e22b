package selection

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"toolbelt/services/embed"
)

// A task often asks for several things ("find the flights, convert the
// price to euros and add it to my calendar"). One ranking of the whole
// text, lexical or dense, lets the intent with the most words crowd out
// the others: a vector of a long request averages its intents away, and
// BM25 adds up the words of all of them. So a task is cut into its
// intents — sentences, then clauses and the items of an enumeration —
// each ranked on its own, and the rankings are merged (merge.go).
//
// The cut reads punctuation of any script (full stops, question marks,
// semicolons, commas and their CJK forms, line breaks) and a few English
// connectives; a comma or a connective cuts only where the clause after
// it opens with one of the catalog's actions (a word that opens tool
// names: "find", "convert", "get"), so a list of things ("tips,
// strategies and techniques") stays one intent. It needs no model and
// takes microseconds. A piece too short
// to name something of its own ("If possible", "2013", a greeting) joins
// its neighbour, so dates, numbers and lists of values stay with the
// request they belong to.
const (
	// intentWords is the fewest content words (not stop words, with a
	// letter; a run of CJK characters counts one a two characters) a
	// piece needs to be an intent of its own; actionWords is the fewest
	// for a piece that opens with one of the catalog's actions ("add it
	// to my calendar"). A sentence of few words that names no action
	// ("Can you provide me with some updates?") matches some tool's
	// common words strongly and would take that tool a place.
	intentWords, actionWords = 4, 2
	// maxIntents bounds the intents of a task: each costs a ranking, and
	// a selection of 10 to 15 tools cannot give more a place of their own.
	maxIntents = 6
)

// intent is one part of a task's focus that asks for something of its
// own: its text, as it stands in the focus.
type intent struct {
	text string
}

// span is a piece of a text, by its byte offsets.
type span struct{ start, end int }

// connectives are the words that start a new clause within a sentence
// ("… and convert …", "… then add …"). English only: in other languages
// the punctuation alone cuts.
var connectives = map[string]bool{"and": true, "then": true, "also": true}

// intentsOf cuts a focus into its intents, in the order of the text, a
// clause cut where acts says the clause after opens with an action (nil:
// at sentences only); one intent (or none, for a text without words)
// means the task asks for one thing.
func intentsOf(focus string, acts func(word string) bool) []intent {
	var pieces []span
	for _, sentence := range sentencesOf(focus) {
		pieces = append(pieces, joinShort(focus, clausesOf(focus, sentence, acts), acts)...)
	}
	pieces = joinShort(focus, pieces, acts)
	for len(pieces) > maxIntents {
		pieces = joinSmallestPair(focus, pieces)
	}
	out := make([]intent, len(pieces))
	for i, p := range pieces {
		out[i] = intent{text: strings.TrimSpace(focus[p.start:p.end])}
	}
	return out
}

// sentencesOf cuts text after each sentence's end: a full stop, question
// or exclamation mark followed by a space (not after an abbreviation such
// as "e.g." or "Dr."), a CJK full stop, a semicolon, a line break; never
// within brackets. Pieces of nothing but spaces are left out.
func sentencesOf(text string) []span {
	var out []span
	start := 0
	cut := func(end int) {
		if strings.TrimSpace(text[start:end]) != "" {
			out = append(out, span{start, end})
		}
		start = end
	}
	var depth brackets
	for i, r := range text {
		next := i + utf8.RuneLen(r)
		if depth.read(r) {
			continue // within (), [] or {}: values, code, an aside
		}
		switch r {
		case '。', '！', '？', '；', ';', '\n', '\r':
			cut(next)
		case '.', '!', '?':
			if next < len(text) {
				if n, _ := utf8.DecodeRuneInString(text[next:]); !unicode.IsSpace(n) {
					continue // 3.5, www.example.com, "?!"
				}
			}
			if r == '.' && abbreviation(text[start:i]) {
				continue
			}
			cut(next)
		}
	}
	cut(len(text))
	return out
}

// abbreviation reports whether the text before a full stop ends in an
// abbreviation: a single letter, a word with a full stop inside ("e.g",
// "U.S"), or a title of two letters ("Dr", "Mr", "St") or "vs".
func abbreviation(before string) bool {
	i := strings.LastIndexFunc(before, func(r rune) bool { return unicode.IsSpace(r) || r == '(' })
	word := []rune(before[i+1:])
	switch {
	case len(word) == 0:
		return false
	case slices.Contains(word, '.'), string(word) == "vs":
		return true
	case len(word) == 1:
		return unicode.IsLetter(word[0]) && !isCJK(word[0])
	case len(word) == 2:
		return unicode.IsUpper(word[0]) && unicode.IsLower(word[1])
	}
	return false
}

// clausesOf cuts a sentence (s, a span of text) at commas (and their CJK
// forms), colons and before a connective, outside brackets, where the
// clause that follows
// opens with an action (acts: "find the flights, convert the price and
// add it" cuts twice; "tips, strategies and techniques" not at all).
// Words are read past stop words and "please".
func clausesOf(text string, s span, acts func(string) bool) []span {
	if acts == nil {
		return []span{s}
	}
	var out []span
	start := s.start
	cut := func(at int) {
		if !opensWithAction(text[at:s.end], acts) || strings.TrimSpace(text[start:at]) == "" {
			return
		}
		out = append(out, span{start, at})
		start = at
	}
	wordStart := -1
	var depth brackets
	for i, r := range text[s.start:s.end] {
		i += s.start
		if depth.read(r) {
			wordStart = -1
			continue
		}
		if unicode.IsLetter(r) {
			if wordStart < 0 {
				wordStart = i
			}
			continue
		}
		if wordStart >= 0 && connectives[strings.ToLower(text[wordStart:i])] {
			cut(wordStart) // the connective opens the next clause
		}
		wordStart = -1
		switch r {
		case ',', '，', '、', ':', '：':
			cut(i + utf8.RuneLen(r))
		}
	}
	return append(out, span{start, s.end})
}

// brackets follows the brackets a text has opened and not closed.
type brackets int

// read counts r and reports whether it is a bracket or stands within one:
// a text does not cut there ("scores {'math':90, 'music':89}", "(e.g. DNA,
// fibres)"). A closing bracket never opened counts for nothing, so a
// stray one cannot keep the rest of the text whole.
func (b *brackets) read(r rune) bool {
	switch r {
	case '(', '[', '{', '（', '【', '「':
		*b++
		return true
	case ')', ']', '}', '）', '】', '」':
		if *b > 0 {
			*b--
		}
		return true
	}
	return *b > 0
}

// opensWithAction reports whether text's first word that is not a stop
// word, a connective or "please" is an action (acts).
func opensWithAction(text string, acts func(string) bool) bool {
	for _, w := range embed.Words(text) {
		if embed.IsStopWord(w) || connectives[w] || w == "please" {
			continue
		}
		return acts(w)
	}
	return false
}

// joinShort joins each piece of text too short to be an intent to its
// neighbour: the next one when it comes first ("If possible, get …"),
// else the one before ("… from May 25, 2013").
func joinShort(text string, pieces []span, acts func(string) bool) []span {
	var out []span
	carry := -1 // the start of a short first piece, waiting for the next
	for _, p := range pieces {
		if carry >= 0 {
			p.start, carry = carry, -1
		}
		switch {
		case standsAlone(text[p.start:p.end], acts):
			out = append(out, p)
		case len(out) == 0:
			carry = p.start
		default:
			out[len(out)-1].end = p.end
		}
	}
	if carry >= 0 {
		out = append(out, span{carry, pieces[len(pieces)-1].end})
	}
	return out
}

// standsAlone reports whether a piece names enough to be an intent: four
// content words, or two when it opens with an action.
func standsAlone(piece string, acts func(string) bool) bool {
	n := contentWords(piece)
	return n >= intentWords || n >= actionWords && acts != nil && opensWithAction(piece, acts)
}

// joinSmallestPair joins the two neighbouring pieces with the fewest
// content words between them.
func joinSmallestPair(text string, in []span) []span {
	best, at := -1, 0
	for i := 0; i+1 < len(in); i++ {
		if n := contentWords(text[in[i].start:in[i+1].end]); best < 0 || n < best {
			best, at = n, i
		}
	}
	out := append([]span{}, in[:at]...)
	out = append(out, span{in[at].start, in[at+1].end})
	return append(out, in[at+2:]...)
}

// contentWords counts the words of text that can name something: not stop
// words, with a letter, two characters or more; a run of CJK characters,
// written without spaces, counts one word a two characters.
func contentWords(text string) int {
	n := 0
	for _, w := range embed.Words(text) {
		r := []rune(w)
		switch {
		case isCJK(r[0]):
			n += max(1, len(r)/2)
		case len(r) >= 2 && strings.IndexFunc(w, unicode.IsLetter) >= 0 && !embed.IsStopWord(w):
			n++
		}
	}
	return n
}

// isCJK reports whether r is of a script written without spaces between
// words: Han, Hiragana, Katakana or Hangul.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}
