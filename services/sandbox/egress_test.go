package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testProxySocket serves, on a unix socket in a directory of its own, an
// HTTP proxy that answers every request with what it was asked.
func testProxySocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tb-egress-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox's uid, when it is not this one, must be able to
	// connect; the directory keeps everyone else out.
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proxied %s %s", r.Method, r.URL)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

// TestStartEgressProxy: a command with Spec.Proxy has the proxy, and
// only the proxy: its variables name a loopback port that reaches the
// host's socket (ALL_PROXY and NO_PROXY of its environment gone), while
// a direct connection, to a public address or to a host's loopback
// server, reaches nothing.
func TestStartEgressProxy(t *testing.T) {
	port, accepted := loopbackListener(t)
	prog := fmt.Sprintf(`import json, os, socket, urllib.request
print(json.dumps({k: os.environ.get(k) for k in ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY']}), flush=True)
print(urllib.request.urlopen('http://example.test/x?y=1', timeout=10).read().decode(), flush=True)
for addr in [('1.1.1.1', 53), ('127.0.0.1', %d)]:
    try:
        socket.create_connection(addr, timeout=3); print('connected', flush=True)
    except OSError as e:
        print('refused', e.errno, flush=True)
`, port)
	sock := testProxySocket(t)
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			spec := Spec{Argv: []string{"python3", "-c", prog}, Dir: workDir(t, s), Proxy: sock,
				Env: append(DefaultEnv("/work"), "ALL_PROXY=socks5://evil.example:1080", "NO_PROXY=*")}
			if !strings.HasPrefix(name, Bubblewrap) {
				if _, err := s.Start(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "needs bubblewrap") {
					t.Fatalf("the %s backend started a command with an egress proxy: %v", name, err)
				}
				return
			}
			if raceEnabled && s.cgroups == nil {
				// The forwarder is this test binary.
				t.Skip("a test binary built with -race cannot run under the memory rlimit")
			}
			p := start(t, t.Context(), s, spec)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("stderr: %s", p.StderrTail())
				}
			})
			r := bufio.NewReader(p.Stdout)
			var env map[string]*string
			if line := readLine(t, r); json.Unmarshal([]byte(line), &env) != nil {
				t.Fatalf("environment: %q; stderr %q", line, p.StderrTail())
			}
			proxy := *env["HTTP_PROXY"]
			if !strings.HasPrefix(proxy, "http://127.0.0.1:") {
				t.Fatalf("HTTP_PROXY %q", proxy)
			}
			for _, k := range []string{"HTTPS_PROXY", "http_proxy", "https_proxy"} {
				if env[k] == nil || *env[k] != proxy {
					t.Errorf("%s is %v, want %s", k, env[k], proxy)
				}
			}
			if *env["NO_PROXY"] != "" || *env["no_proxy"] != "" || env["ALL_PROXY"] != nil {
				t.Errorf("NO_PROXY %q, no_proxy %q, ALL_PROXY %v: want empty, empty, unset", *env["NO_PROXY"], *env["no_proxy"], env["ALL_PROXY"])
			}
			if got := readLine(t, r); got != "proxied GET http://example.test/x?y=1" {
				t.Errorf("through the proxy: %q; stderr %q", got, p.StderrTail())
			}
			if got := readLine(t, r); got != "refused 101" { // ENETUNREACH: no route out
				t.Errorf("a public address: %q", got)
			}
			if got := readLine(t, r); got != "refused 111" { // ECONNREFUSED: its own loopback
				t.Errorf("the host's loopback server: %q", got)
			}
			if exit := waitExit(t, p, time.Minute); exit.ExitCode != 0 {
				t.Errorf("exit %+v; stderr %q", exit, p.StderrTail())
			}
			p.Stop(0)
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's loopback server saw %d connections", n)
	}
	// No proxy where the command would have the host's network.
	s := Probe(t.Context(), Bubblewrap, workRoot(t), quiet)
	if s.Available() {
		if _, err := s.Start(t.Context(), Spec{Argv: []string{"true"}, Dir: workDir(t, s), Proxy: sock, Network: true}); err == nil {
			t.Error("a command with an egress proxy and the host's network started")
		}
	}
}
