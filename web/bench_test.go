package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/tooldef"
)

const benchTools = 10_000

// benchDef returns the i-th synthetic tool: a realistic schema with
// required and optional fields, spread over the categories.
func benchDef(i int) tooldef.Definition {
	params := fmt.Sprintf(`{"type":"object","properties":{
		"query":{"type":"string","description":"What to look for in record set %d"},
		"limit":{"type":"integer","minimum":1,"maximum":100,"description":"How many results"},
		"mode":{"type":"string","enum":["fast","thorough"]},
		"filters":{"type":"object","properties":{"since":{"type":"string","format":"date"},"tags":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}
	},"required":["query"],"additionalProperties":false}`, i)
	return tooldef.Definition{
		Name:        fmt.Sprintf("bench_tool_%05d", i),
		Version:     "1.0.0",
		Description: fmt.Sprintf("Search record set %d and return matching entries with their scores. Input: query, optional limit, mode and filters.", i),
		Category:    tooldef.Categories[i%len(tooldef.Categories)],
		Tags:        []string{"bench", fmt.Sprintf("group%d", i%50)},
		Examples:    []string{fmt.Sprintf("find entries in set %d about invoices", i)},
		Parameters:  json.RawMessage(params),
		Security:    tooldef.Security{Level: tooldef.Levels[i%3], Sandbox: true},
		Execution:   tooldef.Execution{Timeout: 10_000},
		Runner:      tooldef.Runner{Kind: tooldef.RunnerCommand, Argv: []string{"grep", "-rn", "{{query}}", "."}},
	}
}

func benchRegistry(b *testing.B) *catalog.Registry {
	b.Helper()
	store, err := models.Open(context.Background(), b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return catalog.NewRegistry(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// BenchmarkRegister measures one registration (validation, schema compile,
// five renderings, one transaction) into a catalog that grows to b.N.
// Run with -benchtime=10000x for the 10,000-tool figure.
func BenchmarkRegister(b *testing.B) {
	reg := benchRegistry(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := reg.Register(ctx, benchDef(i), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// registerBenchTools fills the app's catalog up to benchTools tools (the
// built-in ones included) and indexes them for selection, once. Its
// registry lacks the app's change hook, which would rebuild the index in
// the background all through the filling.
func registerBenchTools(b *testing.B, app *testApp) {
	b.Helper()
	ctx := context.Background()
	reg := catalog.NewRegistry(app.store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range benchTools - 8 {
		if _, err := reg.Register(ctx, benchDef(i), nil); err != nil {
			b.Fatal(err)
		}
	}
	app.selector.MarkDirty()
	if err := app.selector.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
}

// benchServer is a real HTTP server over a catalog of benchTools tools
// registered through the registry.
func benchServer(b *testing.B) (*httptest.Server, string) {
	b.Helper()
	app := newTestApp(b)
	registerBenchTools(b, app)
	srv := httptest.NewServer(app.handler)
	b.Cleanup(srv.Close)
	return srv, app.keys["admin"]
}

// BenchmarkListHTTP lists all 10,000 tools in one page over HTTP, as
// summaries and in each LLM format.
func BenchmarkListHTTP(b *testing.B) {
	srv, key := benchServer(b)
	for _, format := range []string{"", "openai", "openai_responses", "anthropic", "gemini", "mcp"} {
		name := format
		if name == "" {
			name = "summaries"
		}
		b.Run(name, func(b *testing.B) {
			url := fmt.Sprintf("%s/api/v1/tools?limit=%d&format=%s", srv.URL, benchTools, format)
			var size int64
			for b.Loop() {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				size, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.ReportMetric(float64(size)/1e6, "MB/resp")
		})
	}
}

// BenchmarkCachedCallHTTP sends the same cacheable call (file_read of a
// small file) from parallel clients over real HTTP: authentication,
// Casbin, the chain up to the cache hit, JSON out. BenchmarkBareGinJSON is
// the same machine's ceiling: a Gin handler answering a small JSON object.
// Compare their req/s.
func BenchmarkCachedCallHTTP(b *testing.B) {
	app := newTestApp(b)
	srv := httptest.NewServer(app.handler)
	b.Cleanup(srv.Close)
	key := app.keys["admin"]
	body := `{"tool":"file_read","session_id":"bench","arguments":{"path":"hello.txt"}}`
	post := func(client *http.Client, payload string) {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/calls", strings.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post(http.DefaultClient, `{"tool":"file_write","session_id":"bench","arguments":{"path":"hello.txt","content":"hello"}}`)
	post(http.DefaultClient, body)
	benchParallel(b, func(client *http.Client) { post(client, body) })
}

// BenchmarkBareGinJSON is a bare Gin JSON handler under the same load.
func BenchmarkBareGinJSON(b *testing.B) {
	srv := bareGinServer(b)
	benchParallel(b, func(client *http.Client) {
		resp, err := client.Post(srv.URL+"/x", "application/json", strings.NewReader(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
}

// benchClients is how many concurrent clients BenchmarkCachedVsBareGin
// runs: TOOLBELT_BENCH_CLIENTS, or 8 per CPU (16 here). With few clients
// the bare handler waits on the network and the ratio rises; with many
// (50, hey's default) both saturate the CPU and it falls.
func benchClients() int {
	if n, err := strconv.Atoi(os.Getenv("TOOLBELT_BENCH_CLIENTS")); err == nil && n > 0 {
		return n
	}
	return 8 * runtime.GOMAXPROCS(0)
}

// bareGinServer is a bare Gin handler answering a small JSON object at
// POST /x: the machine's ceiling for a JSON API.
func bareGinServer(b *testing.B) *httptest.Server {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/x", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"success": true, "data": gin.H{"content": "hello"}}) })
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkCachedVsBareGin measures the ratio in one run: the
// cached call of BenchmarkCachedCallHTTP and the bare Gin handler of
// BenchmarkBareGinJSON, loaded by the same clients (benchClients) in
// alternating slices of 250 ms (one pair per iteration), so the machine's
// slow and fast moments fall on both alike. It reports each side's req/s
// and CPU per request, and cached/bare.
func BenchmarkCachedVsBareGin(b *testing.B) {
	app := newTestApp(b)
	srv := httptest.NewServer(app.handler)
	b.Cleanup(srv.Close)
	key := app.keys["admin"]
	post := func(client *http.Client, url, payload string, auth bool) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(payload))
		if auth {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("%s: status %d", url, resp.StatusCode)
		}
	}
	body := `{"tool":"file_read","session_id":"bench","arguments":{"path":"hello.txt"}}`
	post(http.DefaultClient, srv.URL+"/api/v1/calls", `{"tool":"file_write","session_id":"bench","arguments":{"path":"hello.txt","content":"hello"}}`, true)

	bare := bareGinServer(b)

	var cached, plain loadSide
	for b.Loop() {
		plain.load(func(c *http.Client) { post(c, bare.URL+"/x", `{}`, false) })
		cached.load(func(c *http.Client) { post(c, srv.URL+"/api/v1/calls", body, true) })
	}
	b.ReportMetric(cached.rate(), "cached-req/s")
	b.ReportMetric(plain.rate(), "bare-req/s")
	b.ReportMetric(cached.cpuPerReq(), "cached-cpu-µs/req")
	b.ReportMetric(plain.cpuPerReq(), "bare-cpu-µs/req")
	b.ReportMetric(cached.rate()/plain.rate(), "ratio")
}

// benchParallel runs do from 8 clients per CPU with keep-alive
// connections and reports requests per second.
func benchParallel(b *testing.B, do func(*http.Client)) {
	b.SetParallelism(8)
	start, cpu := time.Now(), cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		for pb.Next() {
			do(client)
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/req")
}

// cpuTime is the CPU time this process used so far (user and system,
// server and clients together).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSandboxedEchoHTTP calls a command tool running `echo` in the
// sandbox, one call at a time over real HTTP, and reports the median.
func BenchmarkSandboxedEchoHTTP(b *testing.B) {
	app := newTestApp(b)
	if !app.runners.Sandbox().Available() {
		b.Skip("no sandbox: " + app.runners.Sandbox().Status().Reason)
	}
	def := sayTool()
	if r := app.do(b, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		b.Fatalf("register: %d %s", r.Status, r.Body)
	}
	srv := httptest.NewServer(app.handler)
	b.Cleanup(srv.Close)
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/calls", strings.NewReader(`{"tool":"say","arguments":{"text":"hello"}}`))
		req.Header.Set("Authorization", "Bearer "+app.keys["admin"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"stdout":"hello\n"`) {
			b.Fatalf("answer %s", body)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkCachedCallServer is the server's side of a cached call alone:
// the request served in process (no network, no client), middleware,
// authentication, Casbin, the chain up to the cache hit, the history
// record, the answer. Its allocations and CPU a call (the history rows'
// writes included, the recorder's requests too) are what a cache hit
// costs the server beyond what any Gin handler does.
func BenchmarkCachedCallServer(b *testing.B) {
	app := newTestApp(b)
	key := app.keys["admin"]
	serve := func(payload string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/api/v1/calls", strings.NewReader(payload))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		app.handler.ServeHTTP(w, req)
		return w
	}
	serve(`{"tool":"file_write","session_id":"bench","arguments":{"path":"hello.txt","content":"hello"}}`)
	body := `{"tool":"file_read","session_id":"bench","arguments":{"path":"hello.txt"}}`
	if w := serve(body); w.Code != 200 {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if w := serve(body); w.Code != 200 || !strings.Contains(w.Body.String(), `"cached":true`) {
				b.Errorf("status %d: %s", w.Code, w.Body)
				return
			}
		}
	})
	app.invoker.Flush() // the history rows' writes count too
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}
