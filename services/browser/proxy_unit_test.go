package browser

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// upgrader answers an Upgrade request with 101 and then echoes, as a
// WebSocket server would after its handshake.
func upgrader(t *testing.T) *trap {
	t.Helper()
	tr := newTrap(t)
	tr.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		io.Copy(conn, buf)
	})
	return tr
}

// rawRequest sends req on a new connection to the proxy and returns the
// connection and the status of the answer.
func rawRequest(t *testing.T, p *proxy, req string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	conn, err := net.Dial("tcp", p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
	}
	return conn, br, resp.StatusCode
}

func echoes(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		t.Fatal(err)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
}

// TestProxy drives the proxy without Chromium: what passes, what is refused
// and with which status, and that close ends tunnels and upgrades.
func TestProxy(t *testing.T) {
	up := upgrader(t)
	upHost := up.Listener.Addr().String()
	denied := newTrap(t)
	deniedHost := denied.Listener.Addr().String()

	type report struct {
		host    string
		refused bool
	}
	var mu sync.Mutex
	var reports []report
	p, err := startProxy(slog.New(slog.DiscardHandler), proxyConfig{
		allow: func(u *url.URL) error {
			if u.Hostname() == "blocked.test" {
				return errors.New("host blocked.test is refused")
			}
			return nil
		},
		control: func(_, address string, _ syscall.RawConn) error {
			if address == deniedHost {
				return errors.New("address is internal")
			}
			return nil
		},
		report: func(u *url.URL, _ error, refused bool) {
			mu.Lock()
			reports = append(reports, report{u.Host, refused})
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()

	t.Run("CONNECT tunnel", func(t *testing.T) {
		conn, br, status := rawRequest(t, p, "CONNECT "+upHost+" HTTP/1.1\r\nHost: "+upHost+"\r\n\r\n")
		if status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		// Inside the tunnel, a handshake as Chromium sends for ws:// and wss://.
		io.WriteString(conn, "GET /socket HTTP/1.1\r\nHost: "+upHost+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake in the tunnel: %v %v", resp, err)
		}
		echoes(t, conn, br)
	})
	t.Run("upgrade over plain http", func(t *testing.T) {
		conn, br, status := rawRequest(t, p, "GET http://"+upHost+"/socket HTTP/1.1\r\nHost: "+upHost+
			"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nProxy-Connection: keep-alive\r\n\r\n")
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("status %d", status)
		}
		echoes(t, conn, br)
	})
	for _, tc := range []struct {
		name, req string
		want      int
	}{
		{"CONNECT refused by control", "CONNECT " + deniedHost + " HTTP/1.1\r\nHost: " + deniedHost + "\r\n\r\n", http.StatusForbidden},
		{"http refused by control", "GET http://" + deniedHost + "/x HTTP/1.1\r\nHost: " + deniedHost + "\r\n\r\n", http.StatusForbidden},
		{"upgrade refused by control", "GET http://" + deniedHost + "/ HTTP/1.1\r\nHost: " + deniedHost +
			"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", http.StatusForbidden},
		{"CONNECT refused by allow", "CONNECT blocked.test:443 HTTP/1.1\r\nHost: blocked.test:443\r\n\r\n", http.StatusForbidden},
		{"origin form", "GET /x HTTP/1.1\r\nHost: " + upHost + "\r\n\r\n", http.StatusBadRequest},
		{"https in absolute form", "GET https://" + upHost + "/ HTTP/1.1\r\nHost: " + upHost + "\r\n\r\n", http.StatusBadRequest},
		{"CONNECT without port", "CONNECT " + strings.Split(upHost, ":")[0] + " HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, status := rawRequest(t, p, tc.req); status != tc.want {
				t.Errorf("status %d, want %d", status, tc.want)
			}
		})
	}
	if n := denied.conns.Load(); n != 0 {
		t.Errorf("the refused server accepted %d connections", n)
	}
	mu.Lock()
	got := append([]report(nil), reports...)
	mu.Unlock()
	refusals := 0
	for _, r := range got {
		if !r.refused {
			t.Errorf("a failure reported for %s, want refusals only", r.host)
		}
		refusals++
	}
	if refusals != 4 {
		t.Errorf("reports = %v, want the 4 refusals", got)
	}

	t.Run("close ends tunnels", func(t *testing.T) {
		tunnel, tbr, _ := rawRequest(t, p, "CONNECT "+upHost+" HTTP/1.1\r\nHost: "+upHost+"\r\n\r\n")
		upgraded, ubr, _ := rawRequest(t, p, "GET http://"+upHost+"/socket HTTP/1.1\r\nHost: "+upHost+
			"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		io.WriteString(tunnel, "GET /socket HTTP/1.1\r\nHost: "+upHost+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if resp, err := http.ReadResponse(tbr, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake in the tunnel: %v %v", resp, err)
		}
		echoes(t, upgraded, ubr)

		closed := make(chan struct{})
		go func() {
			p.close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("close did not return while a tunnel and an upgrade were open")
		}
		for name, br := range map[string]*bufio.Reader{"tunnel": tbr, "upgrade": ubr} {
			if _, err := br.ReadByte(); err == nil {
				t.Errorf("the %s still reads after close", name)
			}
		}
		if c, err := net.DialTimeout("tcp", p.ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Error("the proxy still accepts connections after close")
		}
	})
}

// TestPrepareProfile checks that Chromium gets the preferences that keep
// WebRTC off UDP, and does not start without them.
func TestPrepareProfile(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("chromium", "--headless=new", "--user-data-dir="+dir)
	prepareProfile(cmd)
	if cmd.Err != nil {
		t.Fatal(cmd.Err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "Default", "Preferences"))
	if err != nil || !strings.Contains(string(data), `"ip_handling_policy":"disable_non_proxied_udp"`) {
		t.Errorf("Preferences = %s, %v", data, err)
	}

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	for _, args := range [][]string{{"--user-data-dir=" + file}, {"--headless=new"}} {
		cmd := exec.Command("chromium", args...)
		prepareProfile(cmd)
		if cmd.Err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
