package redact

import (
	"bufio"
	"encoding/json"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// secretExample is one line of testdata/secrets/*.jsonl: a snippet that
// holds secrets (tp) or holds none (!tp). See testdata/secrets/README.md.
type secretExample struct {
	Source  string   `json:"source"`
	Rule    string   `json:"rule"`
	TP      bool     `json:"tp"`
	Text    string   `json:"text"`
	Secrets []string `json:"secrets"`
}

// heldOut reports whether e belongs to the measured split. The split is by
// the secret's value (or a non-secret's text), so every context and syntax
// of one value falls on the same side, and no held-out value was seen while
// tuning redact.toml.
func (e secretExample) heldOut() bool {
	key := e.Text
	if len(e.Secrets) > 0 {
		key = e.Secrets[0]
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()%2 == 1
}

func loadSecretExamples(t *testing.T, heldOut bool) []secretExample {
	t.Helper()
	files, _ := filepath.Glob("testdata/secrets/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no testdata/secrets/*.jsonl")
	}
	var out []secretExample
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var e secretExample
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if e.heldOut() == heldOut {
				out = append(out, e)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// secretContext places a snippet where tool output meets it: a file as
// file_read returns it, a command's output, a log.
type secretContext struct {
	name   string
	wrap   func(text, secret string) string // secret is "" for non-secrets
	tpOnly bool                             // the context itself makes the value a credential
}

var secretContexts = []secretContext{
	{name: "plain", wrap: func(text, _ string) string { return text }},
	{name: "log", wrap: func(text, _ string) string {
		return "2026-11-30T10:02:11Z INFO worker started pid=4412\n" + text + "\n2026-11-30T10:02:12Z INFO ready"
	}},
	{name: "shell", wrap: func(text, _ string) string { return "$ cat deploy/settings\n" + text + "\n$ echo $?\n0\n" }},
	{name: "yaml", wrap: func(text, _ string) string {
		return "jobs:\n  deploy:\n    runs-on: ubuntu-latest\n    steps:\n      - run: |\n          " + strings.ReplaceAll(text, "\n", "\n          ") + "\n"
	}},
	{name: "json-file", wrap: func(text, _ string) string {
		s, _ := json.Marshal(text) // a JSON file holding the snippet: \" and \n inside the file itself
		return "{\n  \"name\": \"deploy\",\n  \"script\": " + string(s) + ",\n  \"retries\": 3\n}\n"
	}},
	{name: "markdown", wrap: func(text, _ string) string { return "## Setup\n\nRun:\n\n```\n" + text + "\n```\n" }},
	{name: "curl-double-quotes", tpOnly: true, wrap: func(_, secret string) string {
		return `curl -sS -H "Authorization: Bearer ` + secret + `" https://api.acme.dev/v1/orders`
	}},
	{name: "header-json", tpOnly: true, wrap: func(_, secret string) string {
		return `{"headers": {"Authorization": "Bearer ` + secret + `", "Accept": "application/json"}}`
	}},
}

type redactTally struct {
	tp, tpRedacted, fp, fpAltered int
	leaks, alters                 []string
	leaksBy, altersBy             map[string]int // by context
}

func (c *redactTally) add(e secretExample, ctx, path, in, out string) {
	if !e.TP {
		c.fp++
		if out != in {
			c.fpAltered++
			c.alters = append(c.alters, e.Rule+"/"+ctx+"/"+path+": "+strconv.Quote(in)+" -> "+strconv.Quote(out))
			c.altersBy[ctx]++
		}
		return
	}
	c.tp++
	for _, s := range e.Secrets {
		if strings.Contains(out, s) {
			c.leaks = append(c.leaks, e.Rule+"/"+ctx+"/"+path+": "+strconv.Quote(out))
			c.leaksBy[ctx]++
			return
		}
	}
	c.tpRedacted++
}

// measureRedaction sends every example, in every context, through Redact
// (as an error message would go) and through RedactJSON as a file_read
// result (the JSON encoding of the file's content), and counts secrets
// that survive and non-secrets that are altered.
func measureRedaction(t *testing.T, r *Redactor, examples []secretExample) redactTally {
	c := redactTally{leaksBy: map[string]int{}, altersBy: map[string]int{}}
	for _, e := range examples {
		secret := ""
		if e.TP {
			secret = e.Secrets[0]
		}
		for _, ctx := range secretContexts {
			if ctx.tpOnly && (!e.TP || strings.ContainsAny(secret, " \t\r\n\"'")) {
				continue
			}
			in := ctx.wrap(e.Text, secret)
			c.add(e, ctx.name, "Redact", in, r.Redact(in))
			raw, _ := json.Marshal(map[string]any{"path": "deploy/settings", "content": in, "size": len(in), "truncated": false})
			var got struct{ Content string }
			out := r.RedactJSON(raw)
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("RedactJSON output is not JSON: %v: %s", err, out)
			}
			c.add(e, ctx.name, "RedactJSON", in, got.Content)
		}
	}
	return c
}

func reportRedaction(t *testing.T, split string, n int, c redactTally) (tpRate, fpRate float64) {
	tpRate = float64(c.tpRedacted) / float64(c.tp)
	fpRate = float64(c.fpAltered) / float64(c.fp)
	t.Logf("%s split: %d examples; true positives redacted %d/%d = %.2f%%; false positives altered %d/%d = %.2f%%",
		split, n, c.tpRedacted, c.tp, 100*tpRate, c.fpAltered, c.fp, 100*fpRate)
	t.Logf("leaks by context %v; alterations by context %v", c.leaksBy, c.altersBy)
	if os.Getenv("REDACT_CORPUS_DUMP") != "" {
		_ = os.WriteFile(os.Getenv("REDACT_CORPUS_DUMP"), []byte(strings.Join(append(c.leaks, c.alters...), "\n")), 0o644)
	}
	for i, l := range c.leaks {
		if i == 15 {
			t.Logf("... %d more leaks", len(c.leaks)-i)
			break
		}
		t.Logf("leak: %s", l)
	}
	for i, a := range c.alters {
		if i == 15 {
			t.Logf("... %d more alterations", len(c.alters)-i)
			break
		}
		t.Logf("altered: %s", a)
	}
	return tpRate, fpRate
}

// TestRedactHeldOutSecrets measures the redactor on the held-out half of
// the corpus, which was never looked at while tuning redact.toml: at least
// 99% of the secrets must be removed and at most 5% of the look-alikes
// altered, in every context.
func TestRedactHeldOutSecrets(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	examples := loadSecretExamples(t, true)
	split := "held-out"
	if raceEnabled {
		// The loop has one goroutine, so the race detector has nothing to
		// find in it, and makes gitleaks' regexps some 17 times slower: a
		// race build measures every eighth example.
		examples = everyNth(examples, 8)
		split = "held-out (every 8th example, -race)"
	}
	tpRate, fpRate := reportRedaction(t, split, len(examples), measureRedaction(t, r, examples))
	if tpRate < 0.99 {
		t.Errorf("true positives redacted %.2f%%, want >= 99%%", 100*tpRate)
	}
	if fpRate > 0.05 {
		t.Errorf("false positives altered %.2f%%, want <= 5%%", 100*fpRate)
	}
}

func everyNth[T any](xs []T, n int) []T {
	var out []T
	for i := 0; i < len(xs); i += n {
		out = append(out, xs[i])
	}
	return out
}

// TestRedactTuningSecrets reports the same figures on the tuning half,
// the one to look at when changing redact.toml (REDACT_TUNING=1; with
// REDACT_CORPUS_DUMP=file it writes every leak and alteration there).
func TestRedactTuningSecrets(t *testing.T) {
	if os.Getenv("REDACT_TUNING") == "" {
		t.Skip("set REDACT_TUNING=1 to measure the tuning half")
	}
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	examples := loadSecretExamples(t, false)
	reportRedaction(t, "tuning", len(examples), measureRedaction(t, r, examples))
}
