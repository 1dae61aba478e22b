package redact

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"html"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
)

// A tool's output may hold a secret spelled in some encoding (a hostile
// agent asks for it so, or the file holds it so): issue 30 read 300
// secrets back with file_read in ten encodings and 216 came back whole.
// The tests here measure, per encoding, how many secrets of the corpus
// survive and how much ordinary text is altered.

// secretEncoding is one way to spell a text.
type secretEncoding struct {
	name   string
	goal   float64 // the least share of secrets redacted
	encode func(s string, rng *rand.Rand) string
	// perChar: each character is spelled on its own, so spelling only the
	// first few (the rest plain) is a form of its own.
	perChar bool
	// snippet: the whole snippet (context and all) may be spelled so, as a
	// base64 blob of a configuration file is.
	snippet bool
	// reveal undoes the encoding wherever it is in out, independently of
	// the redactor's decoders: what an agent reading out could recover.
	reveal func(out string) []string
}

var secretEncodings = []secretEncoding{
	{name: "plain", goal: 0.999, encode: func(s string, _ *rand.Rand) string { return s }},
	{name: "json-escaped", goal: 0.999, encode: func(s string, _ *rand.Rand) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}, snippet: true, reveal: revealEscapes},
	{name: "base64", goal: 0.95, encode: func(s string, rng *rand.Rand) string {
		if rng.IntN(2) == 0 {
			return base64.StdEncoding.EncodeToString([]byte(s))
		}
		return base64.RawURLEncoding.EncodeToString([]byte(s))
	}, snippet: true, reveal: revealBase64},
	{name: "hex", goal: 0.95, encode: func(s string, rng *rand.Rand) string {
		if rng.IntN(2) == 0 {
			return strings.ToUpper(hex.EncodeToString([]byte(s)))
		}
		return hex.EncodeToString([]byte(s))
	}, snippet: true, reveal: revealHex},
	{name: "percent", goal: 0.95, encode: func(s string, _ *rand.Rand) string { return perByte(s, "%%%02X") },
		perChar: true, snippet: true, reveal: revealPattern(`%([0-9A-Fa-f]{2})`, 16, 8)},
	{name: `\x`, goal: 0.95, encode: func(s string, _ *rand.Rand) string { return perByte(s, `\x%02x`) },
		perChar: true, snippet: true, reveal: revealPattern(`\\x([0-9A-Fa-f]{2})`, 16, 8)},
	{name: `\u`, goal: 0.95, encode: func(s string, _ *rand.Rand) string {
		var b strings.Builder
		for _, r := range s {
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		}
		return b.String()
	}, perChar: true, snippet: true, reveal: revealEscapes},
	{name: "html-entities", goal: 0.95, encode: func(s string, rng *rand.Rand) string {
		var b strings.Builder
		for _, r := range s {
			if rng.IntN(2) == 0 {
				fmt.Fprintf(&b, "&#%d;", r)
			} else {
				fmt.Fprintf(&b, "&#x%x;", r)
			}
		}
		return b.String()
	}, perChar: true, snippet: true, reveal: func(out string) []string { return []string{html.UnescapeString(out)} }},
	{name: "zero-width", goal: 0.95, encode: func(s string, rng *rand.Rand) string {
		// Between every two characters, or between a few.
		marks := []rune{'\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u00ad', '\u202c'}
		every := rng.IntN(2) == 0
		rs := []rune(s)
		var b strings.Builder
		for i, r := range rs {
			b.WriteRune(r)
			if i < len(rs)-1 && (every || rng.IntN(len(rs)) < 3) {
				b.WriteRune(marks[rng.IntN(len(marks))])
			}
		}
		return b.String()
	}, reveal: func(out string) []string {
		return []string{strings.Map(func(r rune) rune {
			if unicode.Is(unicode.Cf, r) {
				return -1
			}
			return r
		}, out)}
	}},
}

func perByte(s, format string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

var escape = regexp.MustCompile(`\\(?:u[0-9A-Fa-f]{4}|["\\/nrt])`)

// revealEscapes undoes a string literal's escapes.
func revealEscapes(out string) []string {
	return []string{escape.ReplaceAllStringFunc(out, func(m string) string {
		switch m[1] {
		case 'u':
			n, _ := strconv.ParseUint(m[2:], 16, 16)
			return string(rune(n))
		case 'n':
			return "\n"
		case 'r':
			return "\r"
		case 't':
			return "\t"
		}
		return m[1:]
	})}
}

var base64Run = regexp.MustCompile(`[A-Za-z0-9+/_-]{8,}={0,2}`)

func revealBase64(out string) []string {
	var got []string
	for _, run := range base64Run.FindAllString(out, -1) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(run); err == nil {
				got = append(got, string(b))
			}
		}
	}
	return got
}

var hexRun = regexp.MustCompile(`[0-9A-Fa-f]{8,}`)

func revealHex(out string) []string {
	var got []string
	for _, run := range hexRun.FindAllString(out, -1) {
		for _, r := range []string{run, run[1:]} {
			if b, err := hex.DecodeString(r[:len(r)/2*2]); err == nil {
				got = append(got, string(b))
			}
		}
	}
	return got
}

// revealPattern replaces every match of pattern with the byte its group
// spells in base.
func revealPattern(pattern string, base, bits int) func(string) []string {
	re := regexp.MustCompile(pattern)
	return func(out string) []string {
		return []string{re.ReplaceAllStringFunc(out, func(m string) string {
			n, err := strconv.ParseUint(re.FindStringSubmatch(m)[1], base, bits)
			if err != nil {
				return m
			}
			return string([]byte{byte(n)})
		})}
	}
}

// encodedForms spells secret, in text, in enc every way enc allows: the
// value itself, its first one to three characters only, the whole text.
func encodedForms(enc secretEncoding, text, secret string, rng *rand.Rand) map[string]string {
	forms := map[string]string{"value": strings.ReplaceAll(text, secret, enc.encode(secret, rng))}
	if enc.perChar {
		k := 1 + rng.IntN(3)
		forms["first-chars"] = strings.ReplaceAll(text, secret, enc.encode(secret[:k], rng)+secret[k:])
	}
	if enc.snippet {
		forms["snippet"] = enc.encode(text, rng)
	}
	return forms
}

// leaked reports whether out still gives secret away: as it is, or once
// the encoding is undone.
func leaked(enc secretEncoding, out, secret string) bool {
	if strings.Contains(out, secret) {
		return true
	}
	if enc.reveal == nil {
		return false
	}
	for _, s := range enc.reveal(out) {
		if strings.Contains(s, secret) {
			return true
		}
	}
	return false
}

// encodedSample is the secrets the encoding tests use: from the held-out
// half of the corpus (gitleaks' rule tests and the provider formats), at
// most four per rule so every format weighs alike, and Toolbelt's own:
// generated API keys and configured secret values in the places they
// turn up. configured holds the values the redactor is configured with.
func encodedSample(t *testing.T) (examples []secretExample, configured []string) {
	perRule := map[string]int{}
	for _, e := range loadSecretExamples(t, true) {
		if !e.TP || len(e.Secrets) != 1 || len(e.Secrets[0]) < 8 || !strings.Contains(e.Text, e.Secrets[0]) {
			continue
		}
		if perRule[e.Source+e.Rule] == 4 {
			continue
		}
		perRule[e.Source+e.Rule]++
		examples = append(examples, e)
	}
	rng := rand.New(rand.NewPCG(30, 6))
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	random := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	words := []string{"orbit", "maple", "quartz", "tundra", "falcon", "ember", "lagoon", "cipher", "velvet", "harbor"}
	places := []string{"%s", "value: %s\n", "export DEPLOY_TOKEN='%s'\n", "Authorization: Bearer %s", `{"key": "%s"}`, "the key is %s, keep it safe"}
	for i := range 60 {
		key := "tb_" + random(64, "0123456789abcdef")
		examples = append(examples, secretExample{Source: "toolbelt-generated", Rule: "toolbelt-api-key", TP: true,
			Text: fmt.Sprintf(places[i%len(places)], key), Secrets: []string{key}})
		var value string
		switch i % 3 {
		case 0:
			value = random(12+rng.IntN(20), alnum+"!#%&*+-.:=?@^_~")
		case 1:
			value = words[rng.IntN(10)] + "-" + words[rng.IntN(10)] + "-" + words[rng.IntN(10)] + "-" + random(4, "0123456789")
		default:
			value = random(8, "0123456789abcdef") + "-" + random(4, "0123456789abcdef") + "-4" + random(3, "0123456789abcdef") + "-a" + random(3, "0123456789abcdef") + "-" + random(12, "0123456789abcdef")
		}
		configured = append(configured, value)
		examples = append(examples, secretExample{Source: "toolbelt-generated", Rule: "configured-secret", TP: true,
			Text: fmt.Sprintf(places[(i+1)%len(places)], value), Secrets: []string{value}})
	}
	return examples, configured
}

func loadOrdinary(t testing.TB) []string {
	f, err := os.Open("testdata/ordinary/ordinary.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e secretExample
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Text)
	}
	return out
}

// redactFileRead redacts content as file_read returns it (a JSON result)
// and returns the content that comes back.
func redactFileRead(t testing.TB, r *Redactor, content string) string {
	raw, _ := json.Marshal(map[string]any{"path": "notes/settings.txt", "content": content, "size": len(content)})
	var got struct{ Content string }
	if err := json.Unmarshal(r.RedactJSON(raw), &got); err != nil {
		t.Fatalf("RedactJSON output is not JSON: %v", err)
	}
	return got.Content
}

type rate struct{ n, hit int }

func (r *rate) add(hit bool) {
	r.n++
	if hit {
		r.hit++
	}
}

func (r rate) share() float64 {
	if r.n == 0 {
		return 0
	}
	return float64(r.hit) / float64(r.n)
}

// TestRedactEncodedSecrets measures, per encoding, the share of secrets
// redacted (each read back with file_read as its value, its first
// characters only, or the whole snippet encoded), and the share of
// ordinary text (code, JSON, prose, each also encoded whole) altered.
// Goals (issue 30): 95% in each decodable encoding, 99.9% plain and
// JSON-escaped, at most 1% of ordinary text altered.
func TestRedactEncodedSecrets(t *testing.T) {
	examples, configured := encodedSample(t)
	ordinary := loadOrdinary(t)
	if raceEnabled {
		// See TestRedactHeldOutSecrets: the race detector has nothing to
		// find in one goroutine and slows gitleaks' regexps down.
		examples, ordinary = everyNth(examples, 6), everyNth(ordinary, 6)
	}
	r, err := New(configured)
	if err != nil {
		t.Fatal(err)
	}
	redacted := map[string]*rate{}
	byForm := map[string]*rate{}
	altered := map[string]*rate{}
	var leaks, alterations []string
	for _, enc := range secretEncodings {
		redacted[enc.name], altered[enc.name] = &rate{}, &rate{}
		for _, e := range examples {
			secret := e.Secrets[0]
			h := fnv.New64a()
			h.Write([]byte(enc.name + secret))
			rng := rand.New(rand.NewPCG(h.Sum64(), 30))
			for form, in := range encodedForms(enc, e.Text, secret, rng) {
				out := redactFileRead(t, r, in)
				leak := leaked(enc, out, secret)
				redacted[enc.name].add(!leak)
				key := enc.name + "/" + form
				if byForm[key] == nil {
					byForm[key] = &rate{}
				}
				byForm[key].add(!leak)
				if leak {
					leaks = append(leaks, fmt.Sprintf("%s/%s/%s: %q -> %q", key, e.Source, e.Rule, in, out))
				}
			}
		}
		for i, text := range ordinary {
			in := enc.encode(text, rand.New(rand.NewPCG(uint64(i), 30)))
			out := redactFileRead(t, r, in)
			altered[enc.name].add(out != in)
			if out != in {
				alterations = append(alterations, fmt.Sprintf("%s: %q -> %q", enc.name, in, out))
			}
		}
	}
	t.Logf("%d secrets (%d configured values), %d ordinary texts", len(examples), len(configured), len(ordinary))
	for _, enc := range secretEncodings {
		forms := ""
		for _, f := range []string{"value", "first-chars", "snippet"} {
			if rt := byForm[enc.name+"/"+f]; rt != nil {
				forms += fmt.Sprintf(" %s %.1f%%", f, 100*rt.share())
			}
		}
		t.Logf("%-14s redacted %5d/%5d = %6.2f%% (%s); ordinary altered %3d/%3d = %.2f%%", enc.name,
			redacted[enc.name].hit, redacted[enc.name].n, 100*redacted[enc.name].share(), strings.TrimSpace(forms),
			altered[enc.name].hit, altered[enc.name].n, 100*altered[enc.name].share())
	}
	if os.Getenv("REDACT_CORPUS_DUMP") != "" {
		_ = os.WriteFile(os.Getenv("REDACT_CORPUS_DUMP"), []byte(strings.Join(append(leaks, alterations...), "\n")), 0o644)
	}
	for i, l := range leaks {
		if i == 10 {
			t.Logf("... %d more leaks", len(leaks)-i)
			break
		}
		t.Logf("leak: %s", l)
	}
	for i, a := range alterations {
		if i == 10 {
			t.Logf("... %d more alterations", len(alterations)-i)
			break
		}
		t.Logf("altered: %s", a)
	}
	for _, enc := range secretEncodings {
		if got := redacted[enc.name].share(); got < enc.goal {
			t.Errorf("%s: %.2f%% of secrets redacted, want >= %.1f%%", enc.name, 100*got, 100*enc.goal)
		}
		if got := altered[enc.name].share(); got > 0.01 {
			t.Errorf("%s: %.2f%% of ordinary text altered, want <= 1%%", enc.name, 100*got)
		}
	}
}
