package selection

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The weight table in docs/selection.md is the tuning the code ranks by.
func TestDocumentedWeights(t *testing.T) {
	b, err := os.ReadFile("../../docs/selection.md")
	if err != nil {
		t.Fatal(err)
	}
	tu := defaultTuning()
	want := map[string]float64{
		"lexical":                             tu.lexical,
		"name n-grams, built-in embedder":     tu.nameGrams,
		"learned lexical":                     tu.learnedLexical,
		"learned dense":                       tu.learnedDense,
		"nearest learned query, Ollama model": tu.learnedNear,
		"dense, Ollama model":                 tu.modelDense,
		"dense, built-in embedder":            tu.builtinDense,
	}
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 6 {
			continue
		}
		w, ok := want[strings.TrimSpace(cells[1])]
		if !ok {
			continue
		}
		seen++
		got, err := strconv.ParseFloat(strings.TrimSpace(cells[3]), 64)
		if err != nil || got != w {
			t.Errorf("docs/selection.md weighs %q %s; the code %v", strings.TrimSpace(cells[1]), cells[3], w)
		}
	}
	if seen != len(want) {
		t.Errorf("docs/selection.md's weight table has %d of the %d signals", seen, len(want))
	}
}
