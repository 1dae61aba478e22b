package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/nodetest"
	"toolbelt/internal/poll"
	"toolbelt/internal/testlog"
	"toolbelt/models"
)

// modelAdminKey is the admin key the real-model tests configure, so the
// same key works across restarts of the server on one data directory.
const modelAdminKey = "ca76707f44c4b4075252121c0e17432d474758b5bac470e9616f11993f4f73bf"

// startModelApp builds and runs the service as main does over dir,
// embedding with the Ollama-compatible server at ollamaURL and its model;
// stop ends it (so does the test's end).
func startModelApp(t *testing.T, dir, ollamaURL, model string) (a *app.App, ta *testApp, stop func()) {
	t.Helper()
	cfg, err := app.ParseConfig([]string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--tools-dir", "",
		"--ollama-url", ollamaURL, "--embed-model", model}, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.AdminKey = modelAdminKey
	logs := &testlog.Buffer{}
	host := hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}
	a, err = app.New(context.Background(), cfg, app.Options{Stdout: io.Discard, LogOutput: logs, Host: &host})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }() // the re-embed is Run's
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return a, &testApp{t: t, handler: a.Handler, store: a.Store, selector: a.Selector, logs: logs,
		keys: map[string]string{"admin": modelAdminKey, "none": ""}, ids: map[string]uint{"admin": 1}}, stop
}

// modelTools is how many tools the real-model tests register: more than
// the 64 a refresh embeds before answering, so a model change re-embeds
// in the background.
const modelTools = 70

// modelToolDef is the i-th tool of the real-model tests: an http tool
// about one subject, so rankings have something to tell apart.
func modelToolDef(i int) map[string]any {
	subjects := []string{"weather forecasts for a city", "currency exchange rates", "flight schedules between airports",
		"recipes by ingredient", "stock market quotes", "song lyrics by title", "translations between languages"}
	subj := subjects[i%len(subjects)]
	return map[string]any{
		"name": fmt.Sprintf("lookup_%02d", i), "version": "1.0.0", "category": "api",
		"description": fmt.Sprintf("Looks up %s (source %d) and answers in JSON.", subj, i),
		"parameters":  map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "description": "what to look up"}}},
		"security":    map[string]any{"level": "safe"},
		"runner":      map[string]any{"kind": "http", "method": "GET", "url": "https://tools.invalid/lookup"},
	}
}

// selectDense selects for query as admin, requires 200, and returns the
// embedder named and the best tool's dense similarity (0: ranked
// lexically).
func selectDense(t *testing.T, ta *testApp, query string) (embedder string, dense float64) {
	t.Helper()
	r := ta.do(t, "admin", http.MethodPost, "/api/v1/tools/select", map[string]any{"query": query, "limit": 5})
	if r.Status != http.StatusOK {
		t.Fatalf("select %q: %d %s", query, r.Status, r.Body)
	}
	body := r.JSON(t)
	tools, _ := body["tools"].([]any)
	if len(tools) == 0 {
		t.Fatalf("select %q: no tools: %s", query, r.Body)
	}
	reasons, _ := tools[0].(map[string]any)["reasons"].(map[string]any)
	dense, _ = reasons["dense_similarity"].(float64)
	embedder, _ = body["embedder"].(string)
	return embedder, dense
}

// topTool returns the best tool's name for query, selected as admin.
func topTool(t *testing.T, ta *testApp, query string) string {
	t.Helper()
	r := ta.do(t, "admin", http.MethodPost, "/api/v1/tools/select", map[string]any{"query": query, "limit": 1})
	tools, _ := r.JSON(t)["tools"].([]any)
	if len(tools) == 0 {
		t.Fatalf("select %q: no tools: %s", query, r.Body)
	}
	name, _ := tools[0].(map[string]any)["name"].(string)
	return name
}

// toolIndex is i of modelToolDef(i)'s name lookup_NN, or -1.
func toolIndex(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "lookup_%d", &i); err != nil {
		return -1
	}
	return i
}

// readyEmbedder returns /readyz's embedder component.
func readyEmbedder(t *testing.T, ta *testApp) (status, detail string) {
	t.Helper()
	r := ta.do(t, "none", http.MethodGet, "/readyz", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/readyz: %d %s", r.Status, r.Body)
	}
	comp, _ := r.JSON(t)["components"].(map[string]any)["embedder"].(map[string]any)
	status, _ = comp["status"].(string)
	detail, _ = comp["detail"].(string)
	return status, detail
}

// storedDims returns the dimension of every stored vector under model.
func storedDims(t *testing.T, store *models.Store, model string) map[int]int {
	t.Helper()
	tools, err := store.ActiveTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint, len(tools))
	for i, tl := range tools {
		ids[i] = tl.VersionID
	}
	rows, err := store.Embeddings(context.Background(), model, ids)
	if err != nil {
		t.Fatal(err)
	}
	dims := map[int]int{}
	for _, e := range rows {
		dims[len(e.Vector)/4]++
	}
	return dims
}

// TestRealModelPath drives the real-model path through the running server,
// against a real embedding model (USE-lite from npm) behind the
// Ollama-compatible test server: registration embeds and stores vectors; a
// restart re-embeds nothing; a model change re-embeds in the background
// with progress in /readyz and the console; the embedder going away falls
// back to lexical ranking, said in /readyz, and coming back restores it;
// a model answering another dimension is refused at run time and its
// stored vectors are embedded again at the next start; selections never
// fail meanwhile.
func TestRealModelPath(t *testing.T) {
	// use-lite and use-lite-b are the same weights under two names: a
	// model change as far as Toolbelt can tell.
	models := []string{"--model", "use-lite", "--model", "use-lite-b"}
	srv := nodetest.StartServer(t, "embed-server.mjs", models...)
	port := srv.Port()
	dir := t.TempDir()
	tools := 0

	// The steps share the data directory and the model server, so they
	// run in order in this one test; each says what it checks.

	// Registration embeds and stores vectors.
	a, ta, stop := startModelApp(t, dir, srv.URL, "use-lite")
	{
		for i := range modelTools {
			if r := ta.do(t, "admin", http.MethodPost, "/api/v1/tools", modelToolDef(i)); r.Status != http.StatusCreated {
				t.Fatalf("register %d: %d %s", i, r.Status, r.Body)
			}
		}
		poll.True(t, time.Minute, "every tool to have a vector", func() bool {
			with, all, _ := a.Selector.Embedded()
			tools = all
			return with == all && all >= modelTools
		})
		if dims := storedDims(t, a.Store, "ollama/use-lite"); dims[512] != tools || len(dims) != 1 {
			t.Errorf("stored vectors by dimension: %v, want %d of 512", dims, tools)
		}
		emb, dense := selectDense(t, ta, "what will the weather be like in Lisbon tomorrow")
		if emb != "ollama/use-lite" || dense <= 0 {
			t.Errorf("embedder %q, dense similarity %v: want ollama/use-lite and a dense ranking", emb, dense)
		}
		// Scores mean the same under the model: a task about one of the
		// subjects finds its tools and a good match, gibberish (to which
		// the model still finds a cosine of about 0.3) none.
		for _, c := range []struct {
			query string
			good  bool
		}{
			{"what will the weather be like in Lisbon tomorrow", true},
			{"how many yen is a euro worth", true},
			{"xyzzy qwerty", false},
			{"blorp fizzle wug", false},
		} {
			r := ta.do(t, "admin", http.MethodPost, "/api/v1/tools/select", map[string]any{"query": c.query, "limit": 5})
			body := r.JSON(t)
			if noGood, _ := body["no_good_match"].(bool); noGood == c.good {
				t.Errorf("select %q: no_good_match %v, want %v: %s", c.query, noGood, !c.good, r.Body)
			}
		}
		if top := topTool(t, ta, "what will the weather be like in Lisbon tomorrow"); toolIndex(top)%7 != 0 {
			t.Errorf("the weather task's best tool is %s, want one about weather (lookup_NN, NN a multiple of 7)", top)
		}
		stop()
	}

	// A restart re-embeds nothing.
	a, ta, stop = startModelApp(t, dir, srv.URL, "use-lite")
	{
		if with, all, running := a.Selector.Embedded(); with != all || all != tools || running {
			t.Errorf("after the restart %d of %d tools have vectors (re-embedding: %v), want all %d", with, all, running, tools)
		}
		// Only the start's probe asked the model; it is not an embedding
		// of the catalog and is not counted.
		r := ta.do(t, "admin", http.MethodGet, "/metrics", nil)
		if !regexp.MustCompile(`(?m)^toolbelt_embed_duration_seconds_count(\{instance="[^"]*"\})? 0$`).Match(r.Body) {
			t.Errorf("the restart embedded something:\n%s", grepLines(string(r.Body), "toolbelt_embed_"))
		}
		if _, dense := selectDense(t, ta, "convert euros to dollars at today's rate"); dense <= 0 {
			t.Error("no dense ranking after the restart")
		}
		stop()
	}

	// A model change re-embeds in the background, with progress in
	// /readyz and the console. Each request waits, so the re-embed is slow
	// enough to watch.
	srv.Stop()
	srv = nodetest.StartServer(t, "embed-server.mjs", append(models, "--port", port, "--delay-ms", "400")...)
	a, ta, stop = startModelApp(t, dir, srv.URL, "use-lite-b")
	{
		_, detail := readyEmbedder(t, ta)
		if !strings.Contains(detail, "re-embedding") {
			t.Errorf("/readyz does not show the re-embed: %q", detail)
		}
		console := signedIn(t, ta, "admin").get("/admin")
		if got := console.TestID("embedder").Text(); !strings.Contains(got, "re-embedding") || !strings.Contains(got, "use-lite-b") {
			t.Errorf("the console does not show the re-embed: %q", got)
		}
		// Meanwhile selections answer, lexically for tools without a vector.
		selectDense(t, ta, "find a flight from Paris to Rome")
		poll.True(t, 2*time.Minute, "the re-embed to finish", func() bool {
			with, all, running := a.Selector.Embedded()
			return with == all && !running
		})
		if _, detail := readyEmbedder(t, ta); strings.Contains(detail, "re-embedding") {
			t.Errorf("/readyz still shows a re-embed: %q", detail)
		}
		if !strings.Contains(ta.logs.String(), "re-embedding finished") {
			t.Error("the log does not say the re-embed finished")
		}
		if dims := storedDims(t, a.Store, "ollama/use-lite-b"); dims[512] != tools {
			t.Errorf("vectors under the new model by dimension: %v, want %d of 512", dims, tools)
		}
		srv.Stop()
		srv = nodetest.StartServer(t, "embed-server.mjs", append(models, "--port", port)...)

		// The embedder goes away: selections still answer, lexically,
		// and /readyz says so.
		srv.Stop()
		emb, dense := selectDense(t, ta, "give me a recipe with mushrooms")
		if emb != "ollama/use-lite-b" || dense != 0 {
			t.Errorf("with the embedder gone: embedder %q, dense %v; want a lexical ranking", emb, dense)
		}
		status, detail := readyEmbedder(t, ta)
		if status != "degraded" || !strings.Contains(detail, "ranking lexically") || !strings.Contains(detail, "unreachable") {
			t.Errorf("/readyz with the embedder gone: %s %q", status, detail)
		}
		// It comes back on the same port: the next selections rank
		// densely again (after the short pause that follows a failure).
		srv = nodetest.StartServer(t, "embed-server.mjs", append(models, "--port", port)...)
		n := 0
		poll.True(t, time.Minute, "dense ranking to come back", func() bool {
			n++
			_, dense := selectDense(t, ta, fmt.Sprintf("quote the share price of company number %d", n))
			return dense > 0
		})
		if status, detail := readyEmbedder(t, ta); status != "ok" || strings.Contains(detail, "lexically") {
			t.Errorf("/readyz after the embedder came back: %s %q", status, detail)
		}

		// The model behind the name starts answering 256 dimensions:
		// refused at run time (vectors of mixed dimensions cannot be
		// compared), lexical meanwhile.
		srv.Stop()
		srv = nodetest.StartServer(t, "embed-server.mjs", "--model", "use-lite-b=256", "--port", port)
		poll.True(t, time.Minute, "the dimension change to be noticed", func() bool {
			n++
			selectDense(t, ta, fmt.Sprintf("translate sentence number %d into German", n))
			_, detail := readyEmbedder(t, ta)
			return strings.Contains(detail, "dimension 256, expected 512")
		})
		stop()

		// The next start learns the new dimension and embeds the stored
		// vectors of the old one again.
		a, ta, stop = startModelApp(t, dir, srv.URL, "use-lite-b")
		poll.True(t, 2*time.Minute, "the vectors of the new dimension", func() bool {
			with, all, running := a.Selector.Embedded()
			return with == all && !running
		})
		if dims := storedDims(t, a.Store, "ollama/use-lite-b"); dims[256] != tools {
			t.Errorf("vectors by dimension after the restart: %v, want %d of 256", dims, tools)
		}
		if _, dense := selectDense(t, ta, "lyrics of a song about the sea"); dense <= 0 {
			t.Error("no dense ranking under the new dimension")
		}
	}
}

// grepLines returns the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
