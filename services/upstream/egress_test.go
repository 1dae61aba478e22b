package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/catalog"
	"toolbelt/services/netpolicy"
	"toolbelt/services/sandbox"
)

// TestSpecEgress: an egress list holds hosts only, each written as the
// proxy compares it; every other entry, a host listed twice, egress on a
// remote server and the old network switch are refused at their field.
func TestSpecEgress(t *testing.T) {
	stdio := func(egress ...string) Spec {
		return Spec{Name: "gh", Transport: models.TransportStdio, Command: []string{"node", "/opt/gh/index.js"}, Category: "api", Egress: egress}
	}
	ok := stdio("API.github.com", "example.org:8443", "[2001:db8::1]:443")
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ok.Egress, " "); got != "api.github.com example.org:8443 [2001:db8::1]:443" {
		t.Errorf("egress stored as %s", got)
	}
	remote := Spec{Name: "gh", Transport: models.TransportHTTP, URL: "https://mcp.example/mcp", Category: "api", Egress: []string{"api.github.com"}}
	network := stdio()
	network.Network = true
	for name, tc := range map[string]struct {
		spec      Spec
		ptr, want string
	}{
		"option":        {stdio("api.github.com", "--proxy=evil.example"), "/egress/1", "looks like an option"},
		"encoded":       {stdio("api%2egithub.com"), "/egress/0", "percent-encoded"},
		"non-ASCII":     {stdio("аpi.github.com"), "/egress/0", "non-ASCII"}, // a Cyrillic а
		"URL":           {stdio("https://api.github.com/repos"), "/egress/0", "is a URL"},
		"wildcard":      {stdio("*.github.com"), "/egress/0", "wildcard"},
		"numeric":       {stdio("0x7f.1"), "/egress/0", "another spelling"},
		"internal":      {stdio("metadata.google.internal"), "/egress/0", "internal"},
		"bad port":      {stdio("api.github.com:99999"), "/egress/0", "port"},
		"twice":         {stdio("api.github.com", "API.GITHUB.COM"), "/egress/1", "listed twice"},
		"remote":        {remote, "/egress", "is for stdio servers"},
		"network":       {network, "/network", "replaced by egress"},
		"too many":      {stdio(strings.Split(strings.Repeat("a.example,", MaxEgress+1), ",")...), "/egress", "at most"},
		"second option": {stdio("-x"), "/egress/0", "option"},
	} {
		err := tc.spec.check()
		var ve *models.ValidationError
		if !errors.As(err, &ve) || !hasProblem(ve, tc.ptr, tc.want) {
			t.Errorf("%s: %v, want %s saying %q", name, err, tc.ptr, tc.want)
		}
	}
}

func hasProblem(ve *models.ValidationError, ptr, want string) bool {
	for _, p := range ve.Problems {
		if p.Pointer == ptr && strings.Contains(p.Message, want) {
			return true
		}
	}
	return false
}

// bubblewrap is the bubblewrap sandbox (which egress needs) and a data
// directory the sandbox's uid can reach.
func bubblewrap(t *testing.T) (*sandbox.Sandbox, string) {
	t.Helper()
	root := t.TempDir()
	for _, p := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(p, 0o711); err != nil { // t.TempDir's are private
			t.Fatal(err)
		}
	}
	box := sandbox.Probe(context.Background(), sandbox.Bubblewrap, filepath.Join(root, "upstreams"), quiet)
	if !box.Available() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap unavailable in CI: %s", box.Status().Reason)
		}
		t.Skipf("bubblewrap unavailable: %s", box.Status().Reason)
	}
	if raceEnabled && box.Status().Limits == "rlimits" {
		// The proxy's forwarder is this test binary.
		t.Skip("a test binary built with -race cannot run under the memory rlimit")
	}
	return box, root
}

// hello answers "hello <path>".
var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })

// helloServer is a test server answering hello, over TLS or not.
func helloServer(t *testing.T, tls bool) *httptest.Server {
	s := httptest.NewServer
	if tls {
		s = httptest.NewTLSServer
	}
	srv := s(hello)
	t.Cleanup(srv.Close)
	return srv
}

// egressServer is what a stdio server tried and saw, one JSON line per
// attempt.
const egressServer = `import json, os, socket, ssl, sys, urllib.request, urllib.error
def attempt(name, fn):
    try:
        out = fn()
    except urllib.error.HTTPError as e:
        out = 'HTTP %d' % e.code
    except urllib.error.URLError as e:
        out = 'URLError %s' % e.reason
    except OSError as e:
        out = 'errno %s' % e.errno
    print(json.dumps({'name': name, 'got': out}), flush=True)
def get(url):
    return lambda: urllib.request.urlopen(url, timeout=10, context=ssl._create_unverified_context()).read().decode()
def direct(host, port):
    return lambda: socket.create_connection((host, port), timeout=3) and 'connected'
for name, url in json.loads(sys.argv[1]):
    attempt(name, get(url))
attempt('direct public', direct('1.1.1.1', 53))
attempt('direct host', direct('127.0.0.1', int(sys.argv[2])))
sys.stdin.read()
`

// TestStdioEgress runs a stdio server in bubblewrap with an egress list:
// the listed hosts are reached through the proxy (plain http and a
// CONNECT tunnel), an unlisted host or port and a listed address the
// outbound policy refuses are refused, logged with the server's name and
// the host and counted on /metrics, and a direct connection reaches
// nothing, since the server has no network of its own.
func TestStdioEgress(t *testing.T) {
	box, root := bubblewrap(t)
	plain, secure := helloServer(t, false), helloServer(t, true)
	var unlistedConns atomic.Int32
	unlisted := httptest.NewUnstartedServer(hello)
	unlisted.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			unlistedConns.Add(1)
		}
	}
	unlisted.Start()
	defer unlisted.Close()
	addr := func(s *httptest.Server) string { return s.Listener.Addr().String() }
	_, plainPort, _ := net.SplitHostPort(addr(plain))

	// The log is a file: written by the proxy's goroutines, read here
	// through the file system.
	logs, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	s := &Sandboxed{Box: box, DataDir: root,
		// As the callbacks and netpolicy tests do: the test's servers are
		// on 127.0.0.1, which the policy allows here, and 127.0.0.2 stays
		// refused.
		Net: netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		Log: slog.New(slog.NewTextHandler(logs, nil))}
	u := &models.Upstream{Name: "fetcher", Transport: models.TransportStdio, Isolation: models.IsolationShared,
		Egress: []string{addr(plain), addr(secure), "127.0.0.2:" + plainPort}}
	urls, _ := json.Marshal([][2]string{
		{"listed http", plain.URL + "/a"},
		{"listed https", secure.URL + "/b"},
		{"unlisted http", unlisted.URL + "/"},
		{"unlisted https", "https://" + addr(unlisted) + "/"},
		{"refused address", "http://127.0.0.2:" + plainPort + "/"},
	})
	u.Command = []string{"python3", "-c", egressServer, string(urls), plainPort}
	proxyDirs := func() map[string]bool {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "toolbelt-egress-*"))
		out := map[string]bool{}
		for _, d := range dirs {
			out[d] = true
		}
		return out
	}
	before := proxyDirs()
	tr, err := s.Start(context.Background(), u, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	pipe := tr.(*mcp.IOTransport)
	defer pipe.Writer.Close()
	got := map[string]string{}
	lines := bufio.NewScanner(pipe.Reader)
	for len(got) < 7 && lines.Scan() {
		var line struct{ Name, Got string }
		if err := json.Unmarshal(lines.Bytes(), &line); err != nil {
			t.Fatalf("%q: %v", lines.Text(), err)
		}
		got[line.Name] = line.Got
	}
	if len(got) < 7 {
		t.Fatalf("the server stopped after %v: %v; stderr %s", got, lines.Err(), s.StderrTail(u.Name))
	}
	for name, want := range map[string]string{
		"listed http":     "hello /a",
		"listed https":    "hello /b",
		"unlisted http":   "HTTP 403",
		"unlisted https":  "URLError Tunnel connection failed: 403 Forbidden",
		"refused address": "HTTP 403",
		"direct public":   "errno 101", // ENETUNREACH: only loopback is up
		"direct host":     "errno 111", // ECONNREFUSED: its own loopback, not the host's
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if n := unlistedConns.Load(); n != 0 {
		t.Errorf("the unlisted server saw %d connections", n)
	}
	if n := s.EgressRefused()["fetcher"]; n != 3 {
		t.Errorf("%d refusals counted, want 3", n)
	}
	logged, _ := os.ReadFile(logs.Name())
	for _, want := range []string{"server=fetcher host=" + addr(unlisted) + " reason=\"not on the egress list\"",
		"server=fetcher host=127.0.0.2:" + plainPort + " reason=\"address 127.0.0.2 is private"} {
		if !strings.Contains(string(logged), want) {
			t.Errorf("the log lacks %q:\n%s", want, logged)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(Deps{Stdio: s, Log: quiet}).Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := false
	for _, f := range families {
		if f.GetName() == "toolbelt_upstream_egress_refused_total" {
			m := f.GetMetric()[0]
			counted = f.GetType() == dto.MetricType_COUNTER && m.GetCounter().GetValue() == 3 && m.GetLabel()[0].GetValue() == "fetcher"
		}
	}
	if !counted {
		t.Errorf("/metrics lacks toolbelt_upstream_egress_refused_total{server=\"fetcher\"} 3: %v", families)
	}
	// The proxy ends with the process, its socket's directory removed.
	var ours []string
	for d := range proxyDirs() {
		if !before[d] {
			ours = append(ours, d)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("the proxy's directories: %v", ours)
	}
	pipe.Writer.Close()
	poll.True(t, 10*time.Second, "the proxy's socket directory removed with the process "+ours[0], func() bool {
		_, err := os.Stat(ours[0])
		return os.IsNotExist(err)
	})
}

// fetchServer is an MCP server on stdio, spoken by hand: its one tool,
// fetch, answers what urllib got for a URL (through the proxy of its
// environment).
const fetchServer = `import json, sys, urllib.request, urllib.error
def send(msg):
    sys.stdout.write(json.dumps(dict(msg, jsonrpc='2.0')) + '\n'); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get('method'), msg.get('id')
    if method == 'initialize':
        send({'id': id, 'result': {'protocolVersion': msg['params']['protocolVersion'], 'capabilities': {'tools': {}}, 'serverInfo': {'name': 'fetcher', 'version': '1'}}})
    elif method == 'tools/list':
        send({'id': id, 'result': {'tools': [{'name': 'fetch', 'description': 'Fetch a URL and answer its body.', 'annotations': {'readOnlyHint': True},
            'inputSchema': {'type': 'object', 'properties': {'url': {'type': 'string'}}, 'required': ['url']}}]}})
    elif method == 'tools/call':
        try:
            text = urllib.request.urlopen(msg['params']['arguments']['url'], timeout=10).read().decode()
        except urllib.error.HTTPError as e:
            text = 'HTTP %d' % e.code
        except Exception as e:
            text = 'error %s' % e
        send({'id': id, 'result': {'content': [{'type': 'text', 'text': text}]}})
    elif id is not None:
        send({'id': id, 'error': {'code': -32601, 'message': 'no such method'}})
`

// TestStdioEgressThroughTheManager registers a stdio MCP server with an
// egress list as an admin does and calls its tool through the mcp
// runner: a listed host answers, an unlisted one is refused by the
// proxy, and the refusal is the server's to report.
func TestStdioEgressThroughTheManager(t *testing.T) {
	box, root := bubblewrap(t)
	listed, unlisted := helloServer(t, false), helloServer(t, false)
	store, _ := modelstest.Store(t)
	reg := catalog.NewRegistry(store, quiet)
	policy := netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	s := &Sandboxed{Box: box, DataDir: root, Net: policy, Log: quiet}
	m := New(Deps{Store: store, Registry: reg, Net: policy, Stdio: s, Log: quiet})
	defer m.Close()
	f := &fixture{store, reg, m}
	ctx := context.Background()
	_, rep, err := m.Add(ctx, Spec{Name: "fetcher", Transport: models.TransportStdio, Category: "api",
		Command: []string{"python3", "-c", fetchServer}, Egress: []string{listed.Listener.Addr().String()}}, nil)
	if err != nil {
		t.Fatalf("add: %v; stderr %s", err, s.StderrTail("fetcher"))
	}
	if len(rep.Accepted) != 1 || rep.Accepted[0] != "fetcher__fetch" {
		t.Fatalf("accepted %v", rep.Accepted)
	}
	for url, want := range map[string]string{listed.URL + "/a": "hello /a", unlisted.URL + "/b": "HTTP 403"} {
		data, err, _ := f.call(t, ctx, "fetcher__fetch", map[string]any{"url": url})
		if got := mustJSON(t, data); err != nil || !strings.Contains(got, want) {
			t.Errorf("fetch %s: %s, %v; want %q", url, got, err, want)
		}
	}
	if n := s.EgressRefused()["fetcher"]; n != 1 {
		t.Errorf("%d refusals counted, want 1", n)
	}
}
