package upstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/nodetest"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/catalog"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

// loopback lets the manager reach the test's servers.
var loopback = netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

type fixture struct {
	store *models.Store
	reg   *catalog.Registry
	m     *Manager
}

func newFixture(t *testing.T, secrets map[string]string) *fixture {
	t.Helper()
	store, _ := modelstest.Store(t)
	reg := catalog.NewRegistry(store, quiet)
	m := New(Deps{Store: store, Registry: reg, Net: loopback, Secrets: secrets, Log: quiet})
	t.Cleanup(m.Close)
	return &fixture{store, reg, m}
}

// call runs a tool of the catalog through the mcp runner, as the
// execute stage does, collecting its events.
func (f *fixture) call(t *testing.T, ctx context.Context, tool string, args map[string]any) (any, error, []map[string]any) {
	t.Helper()
	got, err := f.reg.Get(ctx, tool)
	if err != nil {
		t.Fatalf("tool %s: %v", tool, err)
	}
	var mu sync.Mutex
	var events []map[string]any
	emit := func(name string, data any) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, map[string]any{"event": name, "data": data})
	}
	data, err := f.m.Runner().Run(ctx, &runners.Call{ID: models.NewID(), Def: got.Definition, Args: args, Session: "s", Emit: emit})
	mu.Lock()
	defer mu.Unlock()
	return data, err, slices.Clone(events)
}

// TestEverythingOverHTTP registers the reference server,
// @modelcontextprotocol/server-everything, over Streamable HTTP and over
// the legacy SSE transport: its tools become Toolbelt tools with names,
// levels and schemas from what it serves, and calls reach it with their
// results, structured content, progress and errors mapped.
func TestEverythingOverHTTP(t *testing.T) {
	for _, transport := range []string{"streamableHttp", "sse"} {
		t.Run(transport, func(t *testing.T) {
			srv := nodetest.StartServer(t, "upstream-server.mjs", transport)
			f := newFixture(t, nil)
			ctx := context.Background()
			kind := map[string]string{"streamableHttp": models.TransportHTTP, "sse": models.TransportSSE}[transport]
			u, rep, err := f.m.Add(ctx, Spec{Name: "everything", Transport: kind, URL: srv.URL, Category: "api"}, nil)
			if err != nil {
				t.Fatalf("add: %v", err)
			}
			if u.ID == 0 || len(rep.Accepted) < 5 || len(rep.Pending) != 0 || len(rep.Refused) != 0 {
				t.Fatalf("report: %+v", rep)
			}
			for _, want := range []string{"everything__echo", "everything__get_sum", "everything__get_structured_content", "everything__trigger_long_running_operation"} {
				if !slices.Contains(rep.Accepted, want) {
					t.Errorf("%s is not among the accepted tools %v", want, rep.Accepted)
				}
			}
			echo, err := f.reg.Get(ctx, "everything__echo")
			if err != nil {
				t.Fatal(err)
			}
			d := echo.Definition
			if d.Runner.Kind != tooldef.RunnerMCP || d.Runner.Server != "everything" || d.Runner.Tool != "echo" || d.Category != "api" ||
				!strings.Contains(string(d.Parameters), `"message"`) || d.Description == "" {
				t.Errorf("echo's definition: %+v %s", d, d.Parameters)
			}

			data, err, _ := f.call(t, ctx, "everything__echo", map[string]any{"message": "hello upstream"})
			if err != nil || !strings.Contains(mustJSON(t, data), "hello upstream") {
				t.Fatalf("echo: %s %v", mustJSON(t, data), err)
			}
			data, err, _ = f.call(t, ctx, "everything__get_sum", map[string]any{"a": 2, "b": 40})
			if err != nil || !strings.Contains(mustJSON(t, data), "42") {
				t.Errorf("get-sum: %s %v", mustJSON(t, data), err)
			}
			data, err, _ = f.call(t, ctx, "everything__get_structured_content", map[string]any{"location": "New York"})
			if res, ok := data.(Result); err != nil || !ok || res.StructuredContent == nil {
				t.Errorf("structured content: %s %v", mustJSON(t, data), err)
			}

			// Progress passes through to the call's events.
			data, err, events := f.call(t, ctx, "everything__trigger_long_running_operation", map[string]any{"duration": 1, "steps": 4})
			progress := 0
			for _, e := range events {
				if e["event"] == "progress" {
					progress++
				}
			}
			if err != nil || progress < 3 {
				t.Errorf("long-running operation: %s %v; %d progress events: %v", mustJSON(t, data), err, progress, events)
			}

			// A call cancelled by its caller ends at once.
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			_, err, _ = f.call(t, cctx, "everything__trigger_long_running_operation", map[string]any{"duration": 30, "steps": 30})
			cancel()
			if err == nil || time.Since(start) > 10*time.Second {
				t.Errorf("a cancelled call: %v after %v", err, time.Since(start))
			}
		})
	}
}

// TestAnnotationsSetLevels: readOnlyHint is safe, a tool that says it is
// not destructive moderate, anything else dangerous (approval).
func TestAnnotationsSetLevels(t *testing.T) {
	f := false
	for _, tc := range []struct {
		a    *mcpAnnotations
		want string
	}{
		{nil, tooldef.LevelDangerous},
		{&mcpAnnotations{ReadOnlyHint: true}, tooldef.LevelSafe},
		{&mcpAnnotations{DestructiveHint: &f}, tooldef.LevelModerate},
		{&mcpAnnotations{}, tooldef.LevelDangerous},
	} {
		if got := Level(tc.a); got != tc.want {
			t.Errorf("Level(%+v) = %s, want %s", tc.a, got, tc.want)
		}
	}
}

// TestToolNames: camelCase, kebab-case and dots become snake_case under
// the server's prefix.
func TestToolNames(t *testing.T) {
	for in, want := range map[string]string{
		"echo":                      "srv__echo",
		"get-sum":                   "srv__get_sum",
		"getTinyImage":              "srv__get_tiny_image",
		"read_file":                 "srv__read_file",
		"search.repos":              "srv__search_repos",
		"HTTPGet":                   "srv__http_get",
		"trigger-long-running-op2x": "srv__trigger_long_running_op2x",
	} {
		if got := ToolName("srv", in); got != want {
			t.Errorf("ToolName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ToolName("my-server", "x"); got != "my_server__x" {
		t.Errorf("a server name's '-': %q", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

type mcpAnnotations = mcp.ToolAnnotations
