package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Proxy is the HTTP proxy through which a process that has no network of
// its own (a sandboxed stdio MCP server) reaches the hosts of its egress
// list: CONNECT for https (and anything else over TLS), absolute-URI
// requests for plain http. A connection passes when its host and port
// are listed, the URL passes the Policy (its allow-list and the internal
// names and spellings CheckURL refuses) and every address the host
// resolves to is one the Policy allows; the proxy then dials those
// checked addresses, never the name again, so an answer that changes
// between the check and the dial (DNS rebinding) reaches nothing, and
// the dialer's control func checks each address once more.
//
// It is written on net/http, as the browser's proxy is: httputil's
// ReverseProxy forwards absolute-URI requests with their hop-by-hop
// headers handled, and a tunnel is a dial and two copies; proxy libraries
// add interception features this does not want, and each dial path of
// theirs would have to be guarded again.
type Proxy struct {
	Policy  Policy
	Targets []Target
	// Resolver looks host names up (nil: the system's).
	Resolver *net.Resolver
	// Refused is told of each connection refused: the host:port asked
	// for and why. It may be nil.
	Refused func(target string, reason error)
}

// Timeouts of the proxy.
const (
	proxyDialTimeout   = 10 * time.Second
	proxyHeaderTimeout = 30 * time.Second
)

// refusal is an error of the checks: the connection is refused (403),
// not failed (502).
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// ErrNotListed is why a host that is not on the egress list is refused.
var ErrNotListed = errors.New("not on the egress list")

// Serve answers proxy requests on ln until ctx ends, then closes ln,
// every connection and tunnel, and waits for their handlers.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	base, stop := context.WithCancel(ctx)
	defer stop()
	// handlers counts the running handlers in while the proxy is open, so
	// that none starts once the wait for them has begun.
	var (
		mu       sync.Mutex
		closed   bool
		handlers sync.WaitGroup
	)
	enter := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			handlers.Add(1)
		}
		return !closed
	}
	tr := &http.Transport{
		Proxy:                 nil, // never the server's own proxy settings
		DialContext:           p.dialAddress,
		DisableCompression:    true, // the body as the server sent it
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: proxyHeaderTimeout,
	}
	defer tr.CloseIdleConnections()
	errLog := log.New(io.Discard, "", 0)
	rp := &httputil.ReverseProxy{
		// The request is in absolute form: it goes to its URL's host,
		// whatever its Host header says, and gets no X-Forwarded-* header.
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.Host = r.Out.URL.Host },
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      errLog,
		ErrorHandler:  p.failed,
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !enter() {
				http.Error(w, "closing", http.StatusServiceUnavailable)
				return
			}
			defer handlers.Done()
			p.serve(w, r, rp)
		}),
		ReadHeaderTimeout: proxyHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          errLog,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		served <- err
	}
	// Tunnels are hijacked connections, which Close leaves alone: the end
	// of base, their requests' context, closes them.
	mu.Lock()
	closed = true
	mu.Unlock()
	stop()
	srv.Close()
	err := <-served
	handlers.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// serve handles one proxy request.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		// https is tunnelled; a request in origin form is not for a proxy.
		http.Error(w, "not a proxy request: send http://host/path, or CONNECT host:443 for https", http.StatusBadRequest)
		return
	}
	if err := p.check("http", r.URL.Host); err != nil {
		p.refuse(w, r.URL.Host, err)
		return
	}
	rp.ServeHTTP(w, r)
}

// tunnel answers CONNECT host:port.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	if err := p.check("https", r.Host); err != nil {
		p.refuse(w, r.Host, err)
		return
	}
	up, err := p.dialAddress(r.Context(), "tcp", r.Host)
	if err != nil {
		p.failed(w, r, err)
		return
	}
	Tunnel(w, r, up)
}

// Tunnel answers a CONNECT request whose upstream connection up is
// open: 200, then what each end sends is copied to the other (the
// client's buffered bytes first) until both have ended or the request's
// context does. It closes up.
func Tunnel(w http.ResponseWriter, r *http.Request, up net.Conn) {
	defer up.Close()
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	// Both ends close when the request's context ends (the proxy stops,
	// the call ends), which ends both copies.
	stop := context.AfterFunc(r.Context(), func() {
		conn.Close()
		up.Close()
	})
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, buf) // what the client sent, buffered bytes first
		if c, ok := up.(*net.TCPConn); ok {
			c.CloseWrite()
		}
	}()
	io.Copy(conn, up)
	conn.Close()
	up.Close()
	<-done
}

// check says why hostport may not be reached by scheme, before any
// lookup: it must be listed and pass the Policy's URL check.
func (p *Proxy) check(scheme, hostport string) error {
	host, port, err := splitTarget(scheme, hostport)
	if err != nil {
		return &refusal{err}
	}
	listed := false
	for _, t := range p.Targets {
		listed = listed || t.allows(host, port)
	}
	if !listed {
		return &refusal{ErrNotListed}
	}
	if msg := p.Policy.CheckURL(scheme + "://" + hostport + "/"); msg != "" {
		return &refusal{errors.New(msg)}
	}
	return nil
}

// splitTarget reads host:port as a listed Target would name it: the host
// lower-case and unbracketed, the port the scheme's when none is given.
func splitTarget(scheme, hostport string) (string, int, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "80"
		if scheme == "https" {
			port = "443"
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || host == "" {
		return "", 0, fmt.Errorf("%q is not host:port", hostport)
	}
	t, err := ParseTarget(net.JoinHostPort(host, port))
	if err != nil {
		return "", 0, err
	}
	return t.Host, n, nil
}

// dialAddress resolves the host of address once, refuses it when any of
// its addresses is one the Policy does not allow, and dials the checked
// addresses in turn (each checked again at connect time).
func (p *Proxy) dialAddress(ctx context.Context, _, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &refusal{err}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, &refusal{fmt.Errorf("port %q", port)}
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if !p.Policy.AddrAllowed(a) {
			return nil, &refusal{fmt.Errorf("%w: %s resolves to the internal address %s", ErrAddressRefused, host, a)}
		}
	}
	d := &net.Dialer{Timeout: proxyDialTimeout, Control: p.Policy.DialControl}
	for _, a := range addrs {
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(n)).String()); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// resolve is host's addresses: itself when it is one.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, proxyDialTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("no address")
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", host, err)
	}
	return addrs, nil
}

// failed answers a failed dial or round trip: 403 when it was refused,
// 502 otherwise.
func (p *Proxy) failed(w http.ResponseWriter, r *http.Request, err error) {
	target := r.URL.Host
	if r.Method == http.MethodConnect {
		target = r.Host
	}
	if ref := (*refusal)(nil); errors.As(err, &ref) {
		p.refuse(w, target, ref)
		return
	}
	http.Error(w, "bad gateway: "+target+" could not be reached", http.StatusBadGateway)
}

// refuse answers 403 and tells Refused. The reason stays with Refused
// (the log): the server must not learn from it what a host resolves to.
func (p *Proxy) refuse(w http.ResponseWriter, target string, err error) {
	if ref := (*refusal)(nil); errors.As(err, &ref) {
		err = ref.err
	}
	if p.Refused != nil {
		p.Refused(target, err)
	}
	w.Header().Set("Connection", "close")
	http.Error(w, "refused by Toolbelt's egress policy: "+target, http.StatusForbidden)
}
