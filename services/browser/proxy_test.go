package browser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// waitingSite serves page at / of a test server; the page loads until its
// script fetches /done (or 5 s pass), so that every attempt it makes
// happens during the call. Other paths serve extra's bodies (".js" as
// JavaScript, "redirect:URL" as a redirect); page and bodies pass through
// fill, which may name the server itself, first.
func waitingSite(t *testing.T, page string, extra map[string]string, fill func(srv *counted, body string) string) (srv *counted, done <-chan struct{}) {
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
			fmt.Fprint(w, `<title>loaded</title><img src="/wait">`+fill(srv, page))
		default:
			body, ok := extra[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			if target, ok := strings.CutPrefix(body, "redirect:"); ok {
				http.Redirect(w, r, target, http.StatusFound)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			if strings.HasSuffix(r.URL.Path, ".js") {
				w.Header().Set("Content-Type", "text/javascript")
			}
			fmt.Fprint(w, fill(srv, body))
		}
	}))
	return srv, ch
}

// attackPage is a waitingSite that stands for a public site: a test Allow
// lets only it through.
func attackPage(t *testing.T, page string, extra map[string]string) (srv *counted, allow func(*url.URL) error, done <-chan struct{}) {
	t.Helper()
	srv, done = waitingSite(t, page, extra, func(_ *counted, body string) string { return body })
	site := srv.host()
	allow = func(u *url.URL) error {
		if u.Host != site {
			return fmt.Errorf("host %s is internal", u.Host)
		}
		return nil
	}
	return srv, allow, done
}

// onlyAddress is a Control that lets connections to addr through and refuses
// every other address, recording them: the test's stand-in for a policy that
// treats the page's server as public and the rest of loopback as internal.
func onlyAddress(addr string) (func(network, address string, c syscall.RawConn) error, func() []string) {
	var mu sync.Mutex
	var refused []string
	control := func(_, address string, _ syscall.RawConn) error {
		if address == addr {
			return nil
		}
		mu.Lock()
		refused = append(refused, address)
		mu.Unlock()
		return fmt.Errorf("address %s is internal", address)
	}
	return control, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), refused...)
	}
}

// udpTrap counts the datagrams that reach a loopback UDP port: STUN, QUIC.
type udpTrap struct {
	conn  net.PacketConn
	grams atomic.Int64
}

func newUDPTrap(t *testing.T) *udpTrap {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &udpTrap{conn: conn}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			if _, _, err := conn.ReadFrom(buf); err != nil {
				return
			}
			u.grams.Add(1)
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return u
}

func (u *udpTrap) port() string {
	_, port, _ := net.SplitHostPort(u.conn.LocalAddr().String())
	return port
}

// TestNavigateAttacks loads pages that reach for loopback servers in every
// way a page can, and checks on the host that those servers accepted no
// connection and got no datagram. Each page runs twice: once against a
// strict Allow with no Control, once with no Allow and a strict Control, so
// that either layer alone keeps the page out, and the second proves that a
// host name Allow let through (as after DNS rebinding) is refused by the
// address it dials.
func TestNavigateAttacks(t *testing.T) {
	b, _ := newBrowser(t)
	cases := []struct {
		name string
		// %[1]s is the port of the TCP trap, %[2]s of the UDP trap.
		page  string
		extra map[string]string
		// addresses Control must have refused, besides the TCP trap
		refused []string
		// the case makes no connection that the proxy dials: it aims at
		// the UDP trap, or (preconnect) only connects to the proxy
		noDial bool
	}{
		{
			name: "websocket",
			page: `<script>const ws = new WebSocket("ws://127.0.0.1:%[1]s/"); ws.onerror = ws.onclose = () => fetch("/done")</script>`,
		},
		{
			name: "websocket from a worker",
			page: `<script>new Worker("/worker.js")</script>`,
			extra: map[string]string{
				"/worker.js": `const ws = new WebSocket("ws://127.0.0.1:%[1]s/"); ws.onerror = ws.onclose = () => fetch("/done")`,
			},
		},
		{
			name: "fetch to loopback, link-local and private",
			page: `<script>Promise.allSettled([
				fetch("http://127.0.0.1:%[1]s/api"),
				fetch("http://169.254.169.254/latest/meta-data/"),
				fetch("http://10.0.0.1/", {mode: "no-cors"}),
			]).finally(() => fetch("/done"))</script>`,
			refused: []string{"169.254.169.254:80", "10.0.0.1:80"},
		},
		{
			name: "img",
			page: `<img src="http://127.0.0.1:%[1]s/a.png" onerror="fetch('/done')">`,
		},
		{
			name: "iframe",
			page: `<iframe src="http://127.0.0.1:%[1]s/frame" onload="fetch('/done')"></iframe>`,
		},
		{
			name:  "redirect to loopback",
			page:  `<img src="/hop" onerror="fetch('/done')">`,
			extra: map[string]string{"/hop": "redirect:http://127.0.0.1:%[1]s/after-redirect.png"},
		},
		{
			name: "preconnect",
			page: `<link rel="preconnect" href="http://127.0.0.1:%[1]s"><link rel="dns-prefetch" href="http://127.0.0.1:%[1]s">
				<script>setTimeout(() => fetch("/done"), 1000)</script>`,
			noDial: true,
		},
		{
			name: "webrtc",
			page: `<script>
				const pc = new RTCPeerConnection({iceServers: [
					{urls: "stun:127.0.0.1:%[2]s"},
					{urls: "turn:127.0.0.1:%[1]s?transport=tcp", username: "u", credential: "p"},
				]});
				pc.createDataChannel("x");
				pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === "complete") fetch("/done") };
				pc.createOffer().then(o => pc.setLocalDescription(o));
				setTimeout(() => fetch("/done"), 3000);
			</script>`,
			noDial: true,
		},
		{
			name: "webtransport",
			page: `<script>
				try {
					const wt = new WebTransport("https://127.0.0.1:%[2]s/");
					wt.ready.catch(() => {}).finally(() => fetch("/done"));
				} catch (e) { fetch("/done") }
				setTimeout(() => fetch("/done"), 3000);
			</script>`,
			noDial: true,
		},
	}
	for _, tc := range cases {
		for _, layer := range []string{"allow", "control"} {
			t.Run(tc.name+"/"+layer, func(t *testing.T) {
				tr, ut := newTrap(t), newUDPTrap(t)
				extra := map[string]string{}
				for k, v := range tc.extra {
					extra[k] = fmt.Sprintf(v, tr.port(), ut.port())
				}
				srv, allow, done := attackPage(t, fmt.Sprintf(tc.page, tr.port(), ut.port()), extra)
				opt := Options{URL: srv.URL + "/", Allow: allow}
				control, refused := onlyAddress(srv.host())
				if layer == "control" {
					opt = Options{URL: srv.URL + "/", Control: control}
				}

				p, err := navigate(t, b, opt)
				if err != nil {
					t.Fatal(err)
				}
				if p.Title != "loaded" {
					t.Errorf("title = %q", p.Title)
				}
				select {
				case <-done:
				default:
					t.Errorf("the page never reported its attempt")
				}
				if n := tr.conns.Load(); n != 0 {
					t.Errorf("the loopback TCP server accepted %d connections", n)
				}
				if n := ut.grams.Load(); n != 0 {
					t.Errorf("the loopback UDP port got %d datagrams", n)
				}
				if layer == "control" {
					want := tc.refused
					if !tc.noDial {
						want = append(want, "127.0.0.1:"+tr.port())
					}
					for _, a := range want {
						if !contains(refused(), a) {
							t.Errorf("Control never refused %s: %v", a, refused())
						}
					}
				}
			})
		}
	}
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

// TestNavigateMainDocumentRefusedByControl checks that a main document the
// dial-time Control refuses ends the call with KindBlocked, not with the
// proxy's 403 page or a tunnel error, over http, https (a CONNECT) and after
// a redirect, and when Allow let its host name through, as it would a name
// that rebinds to loopback between Allow's lookup and the dial.
func TestNavigateMainDocumentRefusedByControl(t *testing.T) {
	b, rec := newBrowser(t)
	tr := newTrap(t)
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+tr.port()+"/secret?token=s3cr3t", http.StatusFound)
	}))
	control, refused := onlyAddress(srv.host())
	names := func(*url.URL) error { return nil } // Allow passes every name

	for _, tc := range []struct {
		name, url, wantInMsg string
	}{
		{"http", "http://127.0.0.1:" + tr.port() + "/", "http://127.0.0.1:" + tr.port() + "/ refused"},
		{"https", "https://127.0.0.1:" + tr.port() + "/", "https://127.0.0.1:" + tr.port() + "/ refused"},
		{"host name", "http://localhost:" + tr.port() + "/", "http://localhost:" + tr.port() + "/ refused"},
		{"redirect", srv.URL + "/away", "http://127.0.0.1:" + tr.port() + "/secret?token=s3cr3t refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := navigate(t, b, Options{URL: tc.url, Allow: names, Control: control})
			if p != nil {
				t.Errorf("page = %+v, want none", p)
			}
			wantKind(t, err, KindBlocked)
			var e *Error
			errors.As(err, &e)
			if !strings.Contains(e.Msg, tc.wantInMsg) || !strings.Contains(e.Msg, "is internal") {
				t.Errorf("message %q does not name the URL and the reason", e.Msg)
			}
		})
	}
	if n := tr.conns.Load(); n != 0 {
		t.Errorf("the loopback server accepted %d connections", n)
	}
	if !contains(refused(), "127.0.0.1:"+tr.port()) && !contains(refused(), "[::1]:"+tr.port()) {
		t.Errorf("Control never saw the resolved address: %v", refused())
	}
	logs := rec.String()
	if !strings.Contains(logs, "blocked connection") || strings.Contains(logs, "s3cr3t") || strings.Contains(logs, "/secret") {
		t.Errorf("the refusals are not logged by host only:\n%s", logs)
	}
}

// TestNavigateHTTPSUnreachable checks that a main document whose tunnel the
// proxy cannot open is a navigation error naming the host.
func TestNavigateHTTPSUnreachable(t *testing.T) {
	b, _ := newBrowser(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	host := closed.Listener.Addr().String()
	closed.Close()
	_, err := navigate(t, b, Options{URL: "https://" + host + "/"})
	wantKind(t, err, KindNavigation)
	var e *Error
	errors.As(err, &e)
	if !strings.Contains(e.Msg, "cannot reach "+host) {
		t.Errorf("message %q does not say the host cannot be reached", e.Msg)
	}
}

// TestNavigateSubresourceFailsAlone checks that once the main document has
// arrived, a refused or failed connection to its own host fails only that
// subresource: an address that rebinds after the first dial, and a
// connection the server drops.
func TestNavigateSubresourceFailsAlone(t *testing.T) {
	b, _ := newBrowser(t)
	srv := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			// A new connection, so a new dial, for every later request.
			w.Header().Set("Connection", "close")
			fmt.Fprint(w, `<title>loaded</title><img src="/second.png"><img src="/dropped.png">`)
		case "/dropped.png":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}
	}))
	var dials atomic.Int64
	control := func(_, address string, _ syscall.RawConn) error {
		if address != srv.host() || dials.Add(1) > 2 {
			return fmt.Errorf("address %s is internal now", address)
		}
		return nil
	}
	p, err := navigate(t, b, Options{URL: srv.URL + "/", Control: control})
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "loaded" || p.Status != http.StatusOK {
		t.Errorf("page = %q %d, want the loaded page", p.Title, p.Status)
	}
	if n := dials.Load(); n < 3 {
		t.Errorf("%d dials, want a refused one after the page", n)
	}
}

// TestDefaultContextRefused opens a WebSocket from a tab of Chromium's
// default browser context, which no call owns: the proxy on the command line
// refuses it.
func TestDefaultContextRefused(t *testing.T) {
	b, _ := newBrowser(t)
	up := newCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	if _, err := navigate(t, b, Options{URL: up.URL}); err != nil {
		t.Fatal(err)
	}
	b.lock <- struct{}{}
	inst := b.inst
	<-b.lock

	tr := newTrap(t)
	ctx, cancel := chromedp.NewContext(inst.ctx) // a tab in the default context
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 20*time.Second)
	defer cancelTimeout()
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`new Promise(done => {
		const ws = new WebSocket("ws://127.0.0.1:%s/");
		ws.onopen = () => done("open");
		ws.onerror = () => done("error");
	})`, tr.port()), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if state != "error" {
		t.Errorf("the WebSocket ended with %q", state)
	}
	if n := tr.conns.Load(); n != 0 {
		t.Errorf("the loopback server accepted %d connections from the default context", n)
	}
}
