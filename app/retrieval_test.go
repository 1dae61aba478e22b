package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetrievalBenchCountsFailures: a query the selector refuses is a
// miss and is reported; the run goes on and measures the others, long
// ones included (a system prompt followed by the request).
func TestRetrievalBenchCountsFailures(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...any) string {
		var b bytes.Buffer
		for _, l := range lines {
			raw, _ := json.Marshal(l)
			b.Write(append(raw, '\n'))
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tools := write("tools.jsonl",
		BenchTool{Name: "weather_now", Description: "Tell the current weather of a city: temperature, wind and rain."},
		BenchTool{Name: "stock_quote", Description: "Give the latest stock price of a company by its ticker symbol."},
		BenchTool{Name: "translate_text", Description: "Translate a text from one language into another."})
	prompt := strings.Repeat("You are a helpful assistant who answers in short sentences. ", 80)
	queries := write("queries.jsonl",
		BenchQuery{Query: "what is the weather in Paris", Gold: []string{"weather_now"}},
		BenchQuery{Query: "   ", Gold: []string{"stock_quote"}},
		BenchQuery{Query: prompt + "\n\nTranslate this sentence into German.", Gold: []string{"translate_text"}})
	var out bytes.Buffer
	if err := Bench(context.Background(), BenchConfig{Tools: tools, Queries: queries, JSON: true}, &out); err != nil {
		t.Fatal(err)
	}
	var rep BenchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Queries != 3 || rep.Failed != 1 || len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "query") {
		t.Fatalf("report %+v", rep)
	}
	// Two of three found (the refused one is a miss).
	if rep.Recall10 < 66 || rep.Recall10 > 67 {
		t.Errorf("Recall@10 %v, want 66.67", rep.Recall10)
	}
}
