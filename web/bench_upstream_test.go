package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/internal/nodetest"
	"toolbelt/services/netpolicy"
	"toolbelt/web"
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
	dir := nodePackages(b)
	if r := app.do(b, "admin", "POST", "/api/v1/upstreams", map[string]any{"name": "everything", "transport": "stdio", "category": "api",
		"command": []string{"node", serversAt + "server-everything/dist/index.js", "stdio"}, "mounts": map[string]string{"node": dir}}); r.Status != 201 {
		b.Fatalf("add: %d %s", r.Status, r.Body)
	}
	registerLocalEcho(b, app)
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

// BenchmarkFederationHop measures what federation adds: a warm call of
// server-everything's echo through Toolbelt, against the same echo
// called directly with the go-sdk client and Toolbelt's own echo
// built-in through the same door, interleaved in one run. Each
// sub-benchmark is transport/door/servers: the upstream over stdio (in
// the sandbox; called directly unsandboxed) or Streamable HTTP (the npm
// server on a loopback port), called through REST (POST /api/v1/calls)
// or /mcp (a 2025-11-25 session of the go-sdk client), with 1 or 50
// servers registered: "1" is both benchmarked upstreams (stdio and http;
// the catalog is that of one server twice), "50" adds 48 more (the HTTP
// server again under 48 names, each with its tools in the catalog). hop-ratio is toolbelt /
// (builtin + direct): at most 1.0 means federation adds only its hop.
func BenchmarkFederationHop(b *testing.B) {
	srv := nodetest.StartServer(b, "upstream-server.mjs", "streamableHttp")
	app := newTestAppWith(b, hostCaps{Chromium: true, Python: true, Node: true, Sandbox: true},
		netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if !app.runners.Sandbox().Available() {
		b.Skip("no sandbox: " + app.runners.Sandbox().Status().Reason)
	}
	dir := nodePackages(b)
	add := func(spec map[string]any) {
		b.Helper()
		if r := app.do(b, "admin", "POST", "/api/v1/upstreams", spec); r.Status != 201 {
			b.Fatalf("add %v: %d %s", spec["name"], r.Status, r.Body)
		}
	}
	add(map[string]any{"name": "stdio", "transport": "stdio", "category": "api",
		"command": []string{"node", serversAt + "server-everything/dist/index.js", "stdio"}, "mounts": map[string]string{"node": dir}})
	add(map[string]any{"name": "http", "transport": "http", "category": "api", "url": srv.URL})
	registerLocalEcho(b, app)
	front := httptest.NewServer(app.handler)
	b.Cleanup(front.Close)

	// The doors: each calls a tool with a message and answers the text
	// of the result.
	rest := func(tool, message string) string {
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"message":%q},"session_id":"bench"}`, tool, message)
		req, _ := http.NewRequest("POST", front.URL+"/api/v1/calls", strings.NewReader(body))
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
	session := func(t mcp.Transport) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), t, &mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	over := func(cs *mcp.ClientSession) func(tool, message string) string {
		return func(tool, message string) string {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": message}})
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %v", tool, res, err)
			}
			out, _ := json.Marshal(res.Content)
			return string(out)
		}
	}
	mcpDoor := over(session(&mcp.StreamableClientTransport{Endpoint: front.URL + web.MCPPath, MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{key: app.keys["admin"], next: http.DefaultTransport}}}))
	doors := map[string]func(tool, message string) string{"rest": rest, "mcp": mcpDoor}
	cmd := exec.Command("node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio")
	directs := map[string]func(tool, message string) string{
		"stdio": over(session(&mcp.CommandTransport{Command: cmd})),
		"http":  over(session(&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: true})),
	}

	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	for _, servers := range []int{1, 50} {
		for i := range max(servers-2, 0) { // beside the first two
			if name := fmt.Sprintf("extra%d", i+1); app.do(b, "admin", "GET", "/api/v1/upstreams/"+name, nil).Status != 200 {
				add(map[string]any{"name": name, "transport": "http", "category": "api", "url": srv.URL})
			}
		}
		for _, transport := range []string{"stdio", "http"} {
			for _, door := range []string{"rest", "mcp"} {
				b.Run(fmt.Sprintf("%s/%s/%d", transport, door, servers), func(b *testing.B) {
					call, direct := doors[door], directs[transport]
					step := func(i int) (through, straight, own time.Duration) {
						m := fmt.Sprintf("m%d", i)
						start := time.Now()
						if out := call(transport+"__echo", m); !strings.Contains(out, "Echo: "+m) {
							b.Fatalf("through Toolbelt: %s", out)
						}
						through = time.Since(start)
						start = time.Now()
						if out := direct("echo", m); !strings.Contains(out, "Echo: "+m) {
							b.Fatalf("direct: %s", out)
						}
						straight = time.Since(start)
						start = time.Now()
						if out := call("local_echo", m); !strings.Contains(out, m) {
							b.Fatalf("built-in: %s", out)
						}
						own = time.Since(start)
						return
					}
					step(-1) // warm
					var through, straight, own []time.Duration
					i := 0
					for b.Loop() {
						t, s, o := step(i)
						through, straight, own = append(through, t), append(straight, s), append(own, o)
						i++
					}
					t, s, o := p50(through), p50(straight), p50(own)
					b.ReportMetric(float64(t.Microseconds())/1000, "toolbelt-p50-ms")
					b.ReportMetric(float64(s.Microseconds())/1000, "direct-p50-ms")
					b.ReportMetric(float64(o.Microseconds())/1000, "builtin-p50-ms")
					b.ReportMetric(float64(t)/float64(s+o), "hop-ratio")
				})
			}
		}
	}
}

// registerLocalEcho registers local_echo, Toolbelt's own echo built-in
// taking an upstream echo's arguments: what a call costs through the
// same door without an upstream (the chain and the history).
func registerLocalEcho(b *testing.B, app *testApp) {
	b.Helper()
	local := toolDef("local_echo", func(m map[string]any) {
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}
		m["security"] = map[string]any{"level": "safe"}
		m["runner"] = map[string]any{"kind": "builtin", "builtin": "echo"}
	})
	if r := app.do(b, "admin", "POST", "/api/v1/tools", local); r.Status != 201 {
		b.Fatalf("register: %d %s", r.Status, r.Body)
	}
}
