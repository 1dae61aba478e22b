package app

import (
	"net"
	"net/http"
	"time"
)

// timeouts bound what a slow or idle client can hold: headers must arrive
// within Header, the whole request within Read, and a kept-alive
// connection is closed after Idle. There is no write timeout: a call may
// run up to its tool's timeout, and event streams stay open.
type timeouts struct{ Header, Read, Idle time.Duration }

var serverTimeouts = timeouts{Header: 10 * time.Second, Read: 60 * time.Second, Idle: 120 * time.Second}

// newHTTPServer is the server with its limits for slow clients and large
// headers (bodies are capped by the web layer).
func newHTTPServer(addr string, h http.Handler, t timeouts) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: t.Header,
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
	}
}

// baseURL turns a listen address into the URL a person on this machine
// would open.
func baseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
