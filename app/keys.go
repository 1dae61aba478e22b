package app

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode"

	"github.com/trustelem/zxcvbn/frequency"
)

// minKeyBits is the entropy a configured admin or callback key must carry
// by keyEntropy's estimate. 128 bits is the usual bar for a symmetric
// secret, out of reach of an offline search of a stolen hash, and what
// `openssl rand -hex 16` gives; the keys Toolbelt makes itself carry 256.
const minKeyBits = 128

// makeKey is how the messages tell an operator to make a good key.
const makeKey = "set it to a random key, such as the output of: openssl rand -hex 32"

// placeholderMarkers, in a key reduced to lowercase letters and digits,
// mark a value copied from an example instead of a key: the deployment
// examples ship CHANGE-ME-… values, and a server that started with one
// would hand admin to anyone who read the example. Each is 6 letters or
// more, so that a random key holds one by chance next to never.
var placeholderMarkers = []string{
	"changeme", "replaceme", "placeholder", "example", "sample",
	"yourkey", "yoursecret", "yourtoken", "yourapikey", "insertkey", "keyhere", "secrethere",
}

// checkKeys refuses an admin, callback, OAuth or vault key that is a placeholder or
// too easy to guess (checkKey). ParseConfig and New both call it, so a
// Config built in code is held to the same bar as the environment.
func (cfg Config) checkKeys() error {
	for _, k := range []struct{ setting, value string }{
		{"TOOLBELT_ADMIN_KEY", cfg.AdminKey},
		{"TOOLBELT_CALLBACK_KEY", cfg.CallbackKey},
		{"TOOLBELT_OAUTH_KEY", cfg.OAuthKey},
	} {
		if err := checkKey(k.setting, k.value); err != nil {
			return err
		}
	}
	// The vault's keys while rotating are a list: each is held to the bar.
	keys := strings.Split(cfg.VaultKey, ",")
	for i, k := range keys {
		setting := "TOOLBELT_VAULT_KEY"
		if len(keys) > 1 {
			setting = fmt.Sprintf("TOOLBELT_VAULT_KEY (key %d of %d)", i+1, len(keys))
		}
		if err := checkKey(setting, strings.TrimSpace(k)); err != nil {
			return err
		}
	}
	return nil
}

// checkKey says why the key set in setting must not be used, nil when it
// may (or is unset). The message names the setting and what is wrong but
// never repeats the key: start-up errors end up in logs.
func checkKey(setting, key string) error {
	if key == "" {
		return nil
	}
	var reduced strings.Builder
	for _, r := range strings.ToLower(key) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			reduced.WriteRune(r)
		}
	}
	for _, m := range placeholderMarkers {
		if strings.Contains(reduced.String(), m) {
			return fmt.Errorf("%s is a placeholder (it contains %q), not a key: %s", setting, m, makeKey)
		}
	}
	e := keyEntropy(key)
	if e.bits < minKeyBits {
		return fmt.Errorf("%s is too easy to guess: about %.0f bits of entropy, %d needed (%d of its %d characters look random, from a pool of %d; the others are common words, repeats or sequences): %s",
			setting, e.bits, minKeyBits, e.free, e.length, e.pool, makeKey)
	}
	return nil
}

// entropy is keyEntropy's estimate and what it is made of.
type entropy struct {
	bits               float64
	free, length, pool int
}

// keyEntropyRunes is how much of a key keyEntropy reads: enough for any
// key, and it bounds the quadratic search for repeats.
const keyEntropyRunes = 256

// keyEntropy estimates how many bits an attacker must guess to find key.
// Every character counts log2 of the pool of the character classes the
// key uses (lowercase 26, uppercase 26, digits 10, anything else 33),
// unless a pattern explains it:
//   - a common word of 4 letters or more, written lowercase, uppercase or
//     capitalised, from zxcvbn's frequency lists (common passwords,
//     English Wikipedia, names, TV and film);
//   - a run with a constant step of -1, 0 or +1 ("aaa", "abc", "321"),
//     from its third character on;
//   - three characters that already appeared in that order.
//
// It is an upper bound: it takes the characters left as uniformly
// random, so it can show a key weak but never prove one strong; a
// sentence of short uncommon words passes. docs/security.md gives how
// often random keys of each length are refused.
func keyEntropy(key string) entropy {
	r := []rune(key)
	if len(r) > keyEntropyRunes {
		r = r[:keyEntropyRunes]
	}
	explained := make([]bool, len(r))
	words := commonWords()
	lower := []rune(strings.ToLower(string(r)))
	if len(lower) != len(r) {
		lower = r // a rune whose lowercase has another length: words are not looked for
	}
	for i := range r {
		for j := i + minWordLen; j <= len(r) && j-i <= maxWordLen; j++ {
			if words[string(lower[i:j])] && wordShaped(r[i:j]) {
				for k := i; k < j; k++ {
					explained[k] = true
				}
			}
		}
	}
	for i := 2; i < len(r); i++ {
		if step := r[i] - r[i-1]; step == r[i-1]-r[i-2] && step >= -1 && step <= 1 {
			explained[i] = true
		}
		if i >= 3 && strings.Contains(string(r[:i-1]), string(r[i-2:i+1])) {
			explained[i] = true
		}
	}
	e := entropy{length: len([]rune(key)), pool: charPool(r)}
	for _, x := range explained {
		if !x {
			e.free++
		}
	}
	if e.pool > 0 {
		e.bits = float64(e.free) * math.Log2(float64(e.pool))
	}
	return e
}

// Words shorter than minWordLen are too likely in a random key to count
// against it; none in the lists that matter is longer than maxWordLen.
const minWordLen, maxWordLen = 4, 24

// commonWords are zxcvbn's frequency lists, lowercase, built once when a
// key is first checked.
var commonWords = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	for _, list := range frequency.FrequencyLists {
		for _, w := range list {
			if n := len([]rune(w)); n >= minWordLen && n <= maxWordLen {
				out[strings.ToLower(w)] = true
			}
		}
	}
	return out
})

// wordShaped says w is written as a person writes a word: all lowercase,
// all uppercase or capitalised. A random key's mixed case rarely is.
func wordShaped(w []rune) bool {
	upper, lower := 0, 0
	for _, c := range w {
		switch {
		case unicode.IsUpper(c):
			upper++
		case unicode.IsLower(c):
			lower++
		}
	}
	return upper == 0 || lower == 0 || (upper == 1 && unicode.IsUpper(w[0]))
}

// charPool is the number of characters of the classes r uses.
func charPool(r []rune) int {
	var lower, upper, digit, other bool
	for _, c := range r {
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		default:
			other = true
		}
	}
	n := 0
	for _, class := range []struct {
		used bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
		if class.used {
			n += class.size
		}
	}
	return n
}
