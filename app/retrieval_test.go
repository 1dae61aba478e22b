package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"toolbelt/models/modelstest"
	"toolbelt/services/catalog"
	"toolbelt/services/selection"
)

// benchCode is the two-letter code of tool i: "aa", "ab", …
func benchCode(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// codeModel is an Ollama /api/embed that only a vector can search: a tool
// text holding "zz<code>" and a query "… called <code>" share one axis,
// while their words share nothing BM25 could match. Each batch of more
// than one text waits delay, as a real model on a CPU does.
func codeModel(t *testing.T, delay time.Duration) *httptest.Server {
	return failingCodeModel(t, delay, "")
}

// failingCodeModel is codeModel refusing (400) every single text that
// holds failing, when it is not empty: a model failing some queries.
func failingCodeModel(t *testing.T, delay time.Duration, failing string) *httptest.Server {
	t.Helper()
	tool := regexp.MustCompile(`zz([a-z]{2})`)
	query := regexp.MustCompile(`called ([a-z]{2})`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.EmbedRequest
		if r.URL.Path != "/api/embed" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		var input []string
		switch in := req.Input.(type) {
		case string:
			input = []string{in}
		case []any:
			for _, s := range in {
				input = append(input, s.(string))
			}
		}
		if len(input) > 1 {
			time.Sleep(delay)
		}
		if len(input) == 1 && failing != "" && strings.Contains(input[0], failing) {
			http.Error(w, `{"error":"refused"}`, http.StatusBadRequest)
			return
		}
		resp := api.EmbedResponse{Model: req.Model}
		for _, text := range input {
			v := make([]float32, 128)
			v[127] = 0.01 // never a zero vector
			m := tool.FindStringSubmatch(text)
			if m == nil {
				m = query.FindStringSubmatch(text)
			}
			if m != nil {
				v[int(m[1][0]-'a')*26+int(m[1][1]-'a')] = 1
			}
			resp.Embeddings = append(resp.Embeddings, v)
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// benchJSON runs `bench retrieval` with cfg and --json, and returns the
// report and what it printed.
func benchJSON(t *testing.T, cfg BenchConfig) (BenchReport, string) {
	t.Helper()
	cfg.JSON = true
	var out bytes.Buffer
	if err := Bench(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rep BenchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return rep, out.String()
}

// codeBenchFiles writes n tools and n queries for codeModel, query i's
// gold tool i, and returns the files' paths.
func codeBenchFiles(t *testing.T, n int) (toolsFile, queriesFile string) {
	t.Helper()
	dir := t.TempDir()
	var tools, queries bytes.Buffer
	for i := range n {
		fmt.Fprintf(&tools, `{"name":"tool_%03d","description":"Handles zz%s records."}`+"\n", i, benchCode(i))
		fmt.Fprintf(&queries, `{"query":"fetch the thing called %s","gold":["tool_%03d"]}`+"\n", benchCode(i), i)
	}
	toolsFile, queriesFile = filepath.Join(dir, "tools.jsonl"), filepath.Join(dir, "queries.jsonl")
	if err := os.WriteFile(toolsFile, tools.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(queriesFile, queries.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return toolsFile, queriesFile
}

// TestBenchWaitsForTheIndex runs `bench retrieval` against a model that
// embeds the catalog (more tools than a refresh embeds inline) in the
// background: the run waits for every vector before measuring, so queries
// only the vectors can answer are all found, and it reports the embedding
// time apart.
func TestBenchWaitsForTheIndex(t *testing.T) {
	const n = 100
	toolsFile, queriesFile := codeBenchFiles(t, n)
	model := codeModel(t, 300*time.Millisecond)
	rep, out := benchJSON(t, BenchConfig{Tools: toolsFile, Queries: queriesFile, OllamaURL: model.URL, EmbedModel: "code"})
	if rep.Embedder != "ollama/code" || rep.Tools != n || rep.Queries != n || rep.Failed != 0 || rep.Lexical != 0 {
		t.Fatalf("report: %s", out)
	}
	if rep.Recall5 != 100 {
		t.Errorf("Recall@5 %v, want 100: queries ranked before the tools had vectors? %s", rep.Recall5, out)
	}
	// Two batches (64 and 36 texts), 300 ms each.
	if rep.EmbedSeconds < 0.6 {
		t.Errorf("embedding time %v s, want at least the two batches' 0.6 s", rep.EmbedSeconds)
	}
	if !strings.Contains(out, `"embed_seconds"`) {
		t.Errorf("the JSON report lacks embed_seconds: %s", out)
	}
}

// TestBenchCountsLexicalFallbacks: queries the model fails to embed, and
// those after them while the selector backs off, rank lexically as a
// server's would; the report counts them, so a figure measured on a
// loaded machine does not pass for the model's.
func TestBenchCountsLexicalFallbacks(t *testing.T) {
	toolsFile, queriesFile := codeBenchFiles(t, 20)
	// The 11th query fails; the selector then leaves the model alone for
	// a second, longer than the nine queries left take.
	model := failingCodeModel(t, 0, "called "+benchCode(10))
	rep, out := benchJSON(t, BenchConfig{Tools: toolsFile, Queries: queriesFile, OllamaURL: model.URL, EmbedModel: "code"})
	if rep.Lexical != 10 || rep.Failed != 0 || rep.Queries != 20 {
		t.Errorf("lexical fallbacks %d, failed %d of %d queries: want 10, 0 of 20: %s", rep.Lexical, rep.Failed, rep.Queries, out)
	}
	if rep.Recall5 > 50+1e-9 {
		t.Errorf("Recall@5 %v: the fallbacks found what only the vectors can find?", rep.Recall5)
	}
}

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
		BenchQuery{Query: "what is the weather in Paris", Gold: []string{"weather_now"}, Subset: "found"},
		BenchQuery{Query: "   ", Gold: []string{"stock_quote"}, Subset: "refused"},
		BenchQuery{Query: prompt + "\n\nTranslate this sentence into German.", Gold: []string{"translate_text"}, Subset: "found"},
		// A conversation: the request is the task, the system prompt (all
		// about stock prices) only its context.
		BenchQuery{Messages: []selection.Message{
			{Role: "system", Content: json.RawMessage(`"You quote the latest stock price of a company by its ticker symbol. Stock prices, tickers, shares."`)},
			{Role: "user", Content: json.RawMessage(`"Will it rain in Oslo? Tell me the weather and the wind."`)},
		}, Gold: []string{"weather_now"}, Subset: "found"})
	rep, out := benchJSON(t, BenchConfig{Tools: tools, Queries: queries})
	if rep.Queries != 4 || rep.Failed != 1 || !strings.Contains(rep.FailedExample, "query") {
		t.Fatalf("report %+v", rep)
	}
	// Three of four found (the refused one is a miss).
	if rep.Recall10 != 75 {
		t.Errorf("Recall@10 %v, want 75", rep.Recall10)
	}
	// Each subset is scored on its own queries, the refused one among them.
	found, refused := rep.Subsets["found"], rep.Subsets["refused"]
	if len(rep.Subsets) != 2 || found == nil || refused == nil ||
		found.Queries != 3 || found.Recall10 != 100 || refused.Queries != 1 || refused.Recall15 != 0 {
		t.Errorf("subsets %s", out)
	}
	// Completeness counts a query whose gold tools are all in the top 10:
	// the three found, not the refused one.
	if rep.Complete10 != 75 || found == nil || found.Complete10 != 100 || refused == nil || refused.Complete10 != 0 {
		t.Errorf("all gold in the top 10: %s", out)
	}
	// Each found first (NDCG 100): the conversation's request outranks its
	// system prompt.
	if found != nil && found.NDCG10 < 99.99 {
		t.Errorf("found NDCG@10 %v, want 100: %s", found.NDCG10, out)
	}
}

// TestBenchSetsConsistent: every committed retrieval set registers whole
// through the registry, and its queries name only its own tools, so a
// re-converted set or a stricter registry that would make `bench
// retrieval` refuse a tool or count an impossible gold fails here first.
func TestBenchSetsConsistent(t *testing.T) {
	sets := []struct {
		dir     string
		queries []string
		subsets []string
	}{
		{"bfcl", []string{"queries.jsonl"}, []string{"simple_python", "multiple", "live_simple", "live_multiple"}},
		{"metatool", []string{"dev.jsonl", "history.jsonl"}, []string{"single", "multi"}},
		{"sealtools", []string{"dev.jsonl"}, []string{"dev/single", "dev/multi"}},
	}
	for _, set := range sets {
		t.Run(set.dir, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join("..", "testdata", "bench", set.dir)
			tools, err := readJSONLines[BenchTool](filepath.Join(dir, "tools.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			store, _ := modelstest.Store(t)
			reg := catalog.NewRegistry(store, slog.New(slog.DiscardHandler))
			names := map[string]bool{}
			for _, tool := range tools {
				if names[tool.Name] {
					t.Errorf("tool %s is listed twice", tool.Name)
				}
				names[tool.Name] = true
				if _, err := reg.Register(ctx, benchDefinition(tool), nil); err != nil {
					t.Errorf("register %s: %v", tool.Name, err)
				}
			}
			type record struct {
				BenchQuery
				ID string `json:"id"`
			}
			ids := map[string]bool{}
			perSubset := map[string]int{}
			for _, file := range set.queries {
				queries, err := readJSONLines[record](filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range queries {
					if q.ID == "" || ids[q.ID] {
						t.Errorf("%s: query id %q is empty or not unique", file, q.ID)
					}
					ids[q.ID] = true
					if strings.TrimSpace(q.text()) == "" || len(q.Gold) == 0 {
						t.Errorf("%s: %s has no text or no gold", file, q.ID)
					}
					for _, g := range q.Gold {
						if !names[g] {
							t.Errorf("%s: %s names %q, which is not a tool of the set", file, q.ID, g)
						}
					}
					if !slices.Contains(set.subsets, q.Subset) {
						t.Errorf("%s: %s is of subset %q, not one of %v", file, q.ID, q.Subset, set.subsets)
					}
					perSubset[q.Subset]++
				}
			}
			for _, s := range set.subsets {
				if perSubset[s] == 0 {
					t.Errorf("subset %s has no query", s)
				}
			}
			t.Logf("%d tools, queries by subset %v", len(tools), perSubset)
		})
	}
}

// TestCompletenessNeedsEveryGold: a query is complete only with all its
// gold tools in the top 10; two of three is two thirds of recall and no
// completeness, and a gold tool at 11th counts for neither.
func TestCompletenessNeedsEveryGold(t *testing.T) {
	top := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}
	var s BenchScores
	s.add(top, []string{"a", "j"})      // both in the top 10
	s.add(top, []string{"a", "b", "k"}) // the 11th is missing
	s.add(nil, []string{"a"})           // a failed selection
	s.finish()
	if s.Complete10 != 33.33 {
		t.Errorf("all@10 %v, want 33.33 (one query in three)", s.Complete10)
	}
	if want := round(100*(1+2.0/3)/3, 2); s.Recall10 != want {
		t.Errorf("Recall@10 %v, want %v", s.Recall10, want)
	}
}
