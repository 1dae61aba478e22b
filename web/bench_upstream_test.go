package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/internal/nodetest"
)

// BenchmarkUpstreamStdio calls server-everything's echo, warm over stdio,
// through Toolbelt (over real HTTP: the chain, the sandboxed process, the
// history) and directly with the go-sdk client (the same server, not
// sandboxed), interleaved in one run, and reports each median and their
// ratio, beside Toolbelt's own echo built-in over the same HTTP (the
// chain and the history without an upstream); then the cold start of the sandboxed server (a call that starts
// it) and the memory of one warm process.
func BenchmarkUpstreamStdio(b *testing.B) {
	app := newTestApp(b)
	if !app.runners.Sandbox().Available() {
		b.Skip("no sandbox: " + app.runners.Sandbox().Status().Reason)
	}
	dir := nodetest.Dir(b)
	if r := app.do(b, "admin", "POST", "/api/v1/upstreams", map[string]any{"name": "everything", "transport": "stdio", "category": "api",
		"command": []string{"node", serversAt + "server-everything/dist/index.js", "stdio"}, "mounts": map[string]string{"node": dir}}); r.Status != 201 {
		b.Fatalf("add: %d %s", r.Status, r.Body)
	}
	// Toolbelt's own echo, the same arguments: the chain and the history
	// without an upstream.
	local := toolDef("local_echo", func(m map[string]any) {
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}
		m["security"] = map[string]any{"level": "safe"}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "echo"}
	})
	if r := app.do(b, "admin", "POST", "/api/v1/tools", local); r.Status != 201 {
		b.Fatalf("register: %d %s", r.Status, r.Body)
	}
	srv := httptest.NewServer(app.handler)
	b.Cleanup(srv.Close)
	// post calls tool over HTTP with the i-th message and returns the answer.
	post := func(tool string, i int) string {
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"message":"m%d"},"session_id":"bench"}`, tool, i)
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/calls", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+app.keys["admin"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	viaToolbelt := func(i int) {
		if out := post("everything__echo", i); !strings.Contains(out, fmt.Sprintf("Echo: m%d", i)) {
			b.Fatalf("answer %s", out)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cmd := exec.Command("node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio")
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	direct := func(i int) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": fmt.Sprintf("m%d", i)}})
		if err != nil || res.IsError {
			b.Fatalf("direct: %v %v", res, err)
		}
	}
	builtin := func(i int) {
		if out := post("local_echo", i); !strings.Contains(out, fmt.Sprintf(`"message":"m%d"`, i)) {
			b.Fatalf("answer %s", out)
		}
	}
	viaToolbelt(-1) // warm
	direct(-1)
	var through, straight, own []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		viaToolbelt(i)
		through = append(through, time.Since(start))
		start = time.Now()
		direct(i)
		straight = append(straight, time.Since(start))
		start = time.Now()
		builtin(i)
		own = append(own, time.Since(start))
		i++
	}
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	t, s := p50(through), p50(straight)
	b.ReportMetric(float64(t.Microseconds())/1000, "toolbelt-p50-ms")
	b.ReportMetric(float64(s.Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64(t)/float64(s), "ratio")
	// What Toolbelt's own echo built-in costs over the same HTTP: the
	// chain and the history, without an upstream.
	b.ReportMetric(float64(p50(own).Microseconds())/1000, "builtin-p50-ms")

	var cold []time.Duration
	for j := range 5 {
		app.app.Upstreams.Sweep(time.Now().Add(time.Hour)) // every connection idle: closed
		start := time.Now()
		viaToolbelt(1_000_000 + j)
		cold = append(cold, time.Since(start))
	}
	b.ReportMetric(float64(p50(cold).Microseconds())/1000, "cold-start-p50-ms")
	metrics := string(app.do(b, "admin", "GET", "/metrics", nil).Body)
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "toolbelt_upstream_memory_bytes{") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				b.ReportMetric(v/(1<<20), "warm-MiB")
			}
		}
	}
}
