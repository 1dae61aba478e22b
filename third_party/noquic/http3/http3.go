// Package http3 stands in for quic-go's, which gin imports for one function,
// Engine.RunQUIC. Toolbelt serves HTTP/1.1 and HTTP/2 only and never calls
// RunQUIC, so go.mod replaces the quic-go module with this one: the server
// binary leaves out 1.8 MB of QUIC it would never run (docs/benchmarks.md).
package http3

import (
	"errors"
	"net/http"
)

// ErrNotBuilt is what ListenAndServeQUIC returns.
var ErrNotBuilt = errors.New("HTTP/3 is not built into Toolbelt")

// ListenAndServeQUIC has quic-go's signature and serves nothing.
func ListenAndServeQUIC(addr, certFile, keyFile string, handler http.Handler) error {
	return ErrNotBuilt
}
