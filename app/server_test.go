package app

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Slow clients cannot hold connections: headers sent too slowly, a body
// that never comes and an idle kept-alive connection are each closed by
// the server at their limit (here shortened).
func TestSlowClientsAreCutOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("ok"))
	})
	srv := newHTTPServer("", h, timeouts{Header: 300 * time.Millisecond, Read: 600 * time.Millisecond, Idle: 300 * time.Millisecond})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// closedWithin sends what, then reads until the server closes.
	closedWithin := func(what string, limit time.Duration) {
		t.Helper()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := conn.Write([]byte(what)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%q: still open after 5 s", what)
		}
		if took := time.Since(start); took > limit {
			t.Errorf("%q: closed after %v, want within %v", what, took, limit)
		}
	}
	closedWithin("GET / HTTP/1.1\r\nHost: x\r\n", 4*time.Second)                                    // headers never end
	closedWithin("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial", 4*time.Second) // body never ends
	closedWithin("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 4*time.Second)                                // answered, then idle

	// A prompt client is served.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("prompt client: %v %v", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "ok") {
		t.Fatalf("body %q", body)
	}
}
