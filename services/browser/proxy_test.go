package browser

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// trap is a loopback server that a page must never reach: it counts every
// TCP connection it accepts, before any byte is read, so a WebSocket
// handshake or a TLS hello that fails still counts.
type trap struct {
	*httptest.Server
	conns atomic.Int64
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	tr := &trap{}
	tr.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>trapped</title>secret")
	}))
	tr.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tr.conns.Add(1)
		}
	}
	tr.Start()
	t.Cleanup(tr.Close)
	return tr
}

func (tr *trap) port() string {
	_, port, _ := net.SplitHostPort(tr.Listener.Addr().String())
	return port
}

// attackPage serves page at / of a server that stands for a public site: a
// test Allow lets only it through. The page loads until its script fetches
// /done (or 5 s pass), so that every attempt happens during the call.
func attackPage(t *testing.T, page string, extra map[string]string) (srv *counted, allow func(*url.URL) error, done <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	srv = newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/done":
			once.Do(func() { close(ch) })
		case "/wait":
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
			}
			http.NotFound(w, r)
		case "/":
			fmt.Fprint(w, `<title>loaded</title><img src="/wait">`+page)
		default:
			body, ok := extra[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			if strings.HasPrefix(body, "redirect:") {
				http.Redirect(w, r, strings.TrimPrefix(body, "redirect:"), http.StatusFound)
				return
			}
			fmt.Fprint(w, body)
		}
	}))
	site := srv.host()
	allow = func(u *url.URL) error {
		if u.Host != site {
			return fmt.Errorf("host %s is internal", u.Host)
		}
		return nil
	}
	return srv, allow, ch
}

// TestNavigateWebSocketsGoThroughPolicy opens WebSockets from a page to a
// loopback server. The Fetch domain never sees them; only the proxy does.
func TestNavigateWebSocketsGoThroughPolicy(t *testing.T) {
	b, _ := newBrowser(t)
	for _, scheme := range []string{"ws://127.0.0.1", "wss://127.0.0.1", "ws://localhost"} {
		t.Run(scheme, func(t *testing.T) {
			tr := newTrap(t)
			target := scheme + ":" + tr.port() + "/socket"
			srv, allow, done := attackPage(t, fmt.Sprintf(`<script>
const ws = new WebSocket(%q);
ws.onerror = ws.onclose = () => fetch("/done");
</script>`, target), nil)
			p, err := navigate(t, b, Options{URL: srv.URL + "/", Allow: allow})
			if err != nil {
				t.Fatal(err)
			}
			if p.Title != "loaded" {
				t.Errorf("title = %q", p.Title)
			}
			select {
			case <-done:
			default:
				t.Errorf("the page never saw its WebSocket fail")
			}
			if n := tr.conns.Load(); n != 0 {
				t.Errorf("the loopback server accepted %d connections from %s", n, target)
			}
		})
	}
}
