package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"sync"
	"syscall"
	"time"

	"toolbelt/services/netpolicy"
)

// Timeouts of the proxy.
const (
	proxyDialTimeout   = 10 * time.Second
	proxyHeaderTimeout = 30 * time.Second
)

// proxy is the HTTP proxy that Chromium must send every connection through:
// documents and subresources, but also WebSockets and whatever else bypasses
// the Fetch domain that the guard listens to. Each Navigate call has its own,
// set as the proxy of its browser context, so that every connection belongs
// to exactly one call; the instance has one more, on Chromium's command line,
// that refuses everything (the default context and the browser's own
// requests).
//
// A connection passes when allow accepts its URL (for a tunnel, https://host:port,
// since the proxy does not see what runs inside) and then the dialer's control
// func accepts the address actually connected to, so that a host name that
// resolves differently now than for allow (DNS rebinding) cannot pass. A
// refused connection gets 403 Forbidden.
//
// It is written on net/http rather than on a proxy library: httputil's
// ReverseProxy already forwards absolute-URI requests, hop-by-hop headers and
// protocol upgrades, and a CONNECT tunnel is a dial and two copies. The
// libraries found add interception (MITM) features this does not want, and
// each dial path of theirs would have to be guarded again.
type proxy struct {
	ln           net.Listener
	srv          *http.Server
	rp           *httputil.ReverseProxy
	tr           *http.Transport
	dialer       *net.Dialer
	allow        func(*url.URL) error
	report       func(u *url.URL, err error, refused bool) // called for each connection refused or failed
	log          *slog.Logger
	refusedLevel slog.Level // of the log line of a refusal

	base     context.Context // of every request; canceled by close
	stopBase context.CancelFunc
	served   chan struct{} // closed when Serve returns
	once     sync.Once

	mu       sync.Mutex
	closed   bool           // guarded by mu
	handlers sync.WaitGroup // added to under mu, while not closed
}

// refusal is an error of allow or of the control func: the connection is
// refused, not failed.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// proxyConfig says what a proxy lets through and whom it tells.
type proxyConfig struct {
	allow        func(*url.URL) error                                   // nil allows every URL
	control      func(network, address string, c syscall.RawConn) error // nil allows every address
	report       func(u *url.URL, err error, refused bool)              // may be nil
	refusedLevel slog.Level
}

// startProxy listens on an ephemeral port of 127.0.0.1.
func startProxy(log *slog.Logger, cfg proxyConfig) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	control := cfg.control
	p := &proxy{ln: ln, allow: cfg.allow, report: cfg.report, log: log, refusedLevel: cfg.refusedLevel,
		served: make(chan struct{})}
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	p.base, p.stopBase = context.WithCancel(context.Background())
	p.dialer = &net.Dialer{Timeout: proxyDialTimeout, Control: func(network, address string, c syscall.RawConn) error {
		if control == nil {
			return nil
		}
		if err := control(network, address, c); err != nil {
			return &refusal{err}
		}
		return nil
	}}
	p.tr = &http.Transport{
		Proxy:                 nil, // never the server's own proxy settings
		DialContext:           p.dialer.DialContext,
		DisableCompression:    true, // pass Chromium's Accept-Encoding and the body as they are
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: proxyHeaderTimeout,
	}
	p.rp = &httputil.ReverseProxy{
		// The request is in absolute form already; Rewrite only keeps it,
		// and adds no X-Forwarded-* header.
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.Host = r.In.Host },
		Transport:     p.tr,
		FlushInterval: -1,
		ErrorLog:      errLog,
		ErrorHandler:  p.failed,
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: proxyHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return p.base },
		ErrorLog:          errLog,
	}
	go func() {
		defer close(p.served)
		p.srv.Serve(ln)
	}()
	return p, nil
}

// url is the value of Chromium's --proxy-server.
func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

// close stops listening, ends every connection and tunnel and waits for
// their handlers. It is safe to call twice.
func (p *proxy) close() {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.stopBase()
		p.srv.Close()
		<-p.served
		p.handlers.Wait()
		p.tr.CloseIdleConnections()
	})
}

// ServeHTTP handles CONNECT and absolute-URI http requests, including
// WebSocket upgrades over plain http.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		http.Error(w, "closing", http.StatusServiceUnavailable)
		return
	}
	defer p.handlers.Done()
	// The listener is on 127.0.0.1, so this only holds unless someone
	// changes that.
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err != nil || !ap.Addr().Unmap().IsLoopback() {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	p.log.Debug("browser: proxy request", "method", r.Method, "host", r.Host, "upgrade", r.Header.Get("Upgrade"))
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	u := *r.URL
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "http":
	default:
		// Chromium sends https only through CONNECT; anything else is not a
		// proxy request.
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	if u.Host == "" {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	if err := p.check(&u); err != nil {
		p.refuse(w, &u, err)
		return
	}
	r.URL = &u
	p.rp.ServeHTTP(w, r)
}

// enter counts a handler in, unless close has begun.
func (p *proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.handlers.Add(1)
	return true
}

// tunnel answers CONNECT host:port: https, wss and ws through a proxy.
func (p *proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || host == "" || port == "" {
		http.Error(w, "bad CONNECT target", http.StatusBadRequest)
		return
	}
	u := &url.URL{Scheme: "https", Host: r.Host}
	if err := p.check(u); err != nil {
		p.refuse(w, u, err)
		return
	}
	up, err := p.dialer.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		p.failed(w, r, err)
		return
	}
	netpolicy.Tunnel(w, r, up)
}

// check runs allow, refusing everything once the proxy is closing.
func (p *proxy) check(u *url.URL) error {
	if p.base.Err() != nil {
		return &refusal{errClosing}
	}
	if err := check(p.allow, u); err != nil {
		return &refusal{err}
	}
	return nil
}

// failed answers a failed dial or round trip: 403 when it was refused,
// 502 otherwise.
func (p *proxy) failed(w http.ResponseWriter, r *http.Request, err error) {
	u := r.URL
	if r.Method == http.MethodConnect {
		u = &url.URL{Scheme: "https", Host: r.Host}
	}
	var ref *refusal
	if errors.As(err, &ref) {
		p.refuse(w, u, ref.err)
		return
	}
	// Nothing to report when Chromium gave up on the request or the call
	// is ending.
	if r.Context().Err() == nil {
		p.log.Debug("browser: proxy: upstream failed", "host", u.Host, "err", err)
		if p.report != nil {
			p.report(u, err, false)
		}
	}
	http.Error(w, "bad gateway", http.StatusBadGateway)
}

// refuse answers 403, logs the host (never the path, which may hold a
// secret) and reports the refusal.
func (p *proxy) refuse(w http.ResponseWriter, u *url.URL, err error) {
	var ref *refusal
	if errors.As(err, &ref) {
		err = ref.err
	}
	level := p.refusedLevel
	if errors.Is(err, errClosing) {
		level = slog.LevelDebug
	}
	p.log.Log(context.Background(), level, "browser: blocked connection", "host", u.Host, "scheme", u.Scheme, "reason", err)
	if p.report != nil {
		p.report(u, err, true)
	}
	// The reason stays in the log: the page must not learn from it what a
	// host resolves to.
	w.Header().Set("Connection", "close")
	http.Error(w, "refused by Toolbelt", http.StatusForbidden)
}
