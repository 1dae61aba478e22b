package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport sends key with every request.
func bearerTransport(key string) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+key)
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestGracefulShutdown sends SIGTERM while two calls run: the short one
// finishes within the deadline and succeeds; the long one is cancelled at
// the deadline, answered and recorded as interrupted. A restart shows both
// as they were answered.
func TestGracefulShutdown(t *testing.T) {
	arrived := make(chan string, 2)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		wait := 60 * time.Second
		if r.URL.Path == "/short" {
			wait = 700 * time.Millisecond
		}
		select {
		case <-time.After(wait):
			_, _ = w.Write([]byte("done"))
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	env := []string{"TOOLBELT_HTTP_ALLOW_PRIVATE=127.0.0.1/32", "TOOLBELT_SHUTDOWN_TIMEOUT=1500ms"}
	s := start(t, bin, data, env...)
	key := s.key

	results := map[string]map[string]any{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, path := range []string{"/short", "/long"} {
		wg.Go(func() {
			_, res := s.post(t, "/api/v1/calls", key, map[string]any{"tool": "http_request", "session_id": "shutdown",
				"arguments": map[string]any{"url": slow.URL + path, "method": "GET"}})
			mu.Lock()
			results[path] = res
			mu.Unlock()
		})
	}
	// An MCP client holds its event stream open; shutdown must end it
	// instead of waiting for it.
	mcpClient := mcp.NewClient(&mcp.Implementation{Name: "shutdown-test", Version: "1"}, nil)
	session, err := mcpClient.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: s.base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport(key)},
	}, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	defer session.Close()
	for range 2 { // both calls are running: their tool reached the slow server
		select {
		case <-arrived:
		case <-time.After(20 * time.Second):
			t.Fatalf("the calls did not start\n%s", s.output())
		}
	}
	stopped := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	select {
	case err := <-s.exited:
		s.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, s.output())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not stop")
	}
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("shutdown took %v with a 1.5 s deadline", took)
	}
	if results["/short"]["status"] != "succeeded" {
		t.Errorf("the short call did not finish: %v", results["/short"])
	}
	if results["/long"]["status"] != "interrupted" {
		t.Errorf("the long call was not interrupted: %v", results["/long"])
	}

	s = start(t, bin, data, env...)
	for path, res := range results {
		id, _ := res["call_id"].(string)
		if code, rec := s.get(t, "/api/v1/calls/"+id, key); code != 200 || rec["status"] != res["status"] {
			t.Errorf("%s after restart: %d %v, answered %v", path, code, rec["status"], res["status"])
		}
	}
	s.stop(t)
}
