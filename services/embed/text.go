package embed

import (
	"strings"
	"unicode"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kljensen/snowball/english"
)

// Words splits text into lower-case words: runs of letters or digits, with
// snake_case, kebab-case and camelCase boundaries as breaks, so a tool name
// such as "fileRead" or "file_read" reads as "file read".
func Words(text string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			// A lower-to-upper change starts a new word (camelCase), as
			// does a change between letters and digits ("utf8" stays).
			if len(cur) > 0 && unicode.IsUpper(r) && unicode.IsLower(prev) {
				flush()
			}
			cur = append(cur, r)
		case r == '\'' || r == '\u2019':
			// "don't" and "user's" stay one word.
			if len(cur) == 0 {
				flush()
			}
		default:
			flush()
		}
		prev = r
	}
	flush()
	for i, w := range words {
		words[i] = apostrophes.Replace(w)
	}
	return words
}

var apostrophes = strings.NewReplacer("'", "", "\u2019", "")

// IsStopWord reports whether w (lower case) is an English stop word of the
// Snowball list, which carries little meaning for retrieval.
func IsStopWord(w string) bool { return english.IsStopWord(w) }

// Tokenizer turns text into retrieval terms. It caches Snowball stems:
// tool texts and queries repeat words a lot. The cache is bounded, since
// queries bring arbitrary words, and safe for concurrent use.
type Tokenizer struct {
	stems *lru.Cache[string, string]
}

// NewTokenizer returns a tokenizer with an empty stem cache.
func NewTokenizer() *Tokenizer {
	stems, _ := lru.New[string, string](65536) // fails only for a size below 1
	return &Tokenizer{stems: stems}
}

// Stem returns the Snowball (Porter 2) stem of a lower-case English word.
func (t *Tokenizer) Stem(w string) string {
	if s, ok := t.stems.Get(w); ok {
		return s
	}
	s := english.Stem(w, true)
	t.stems.Add(w, s)
	return s
}

// Terms turns text into retrieval terms: words without stop words, stemmed.
func (t *Tokenizer) Terms(text string) []string {
	words := Words(text)
	out := words[:0]
	for _, w := range words {
		if len(w) < 2 && !unicode.IsDigit(rune(w[0])) || IsStopWord(w) {
			continue
		}
		out = append(out, t.Stem(w))
	}
	return out
}
