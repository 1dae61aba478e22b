package upstream

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
)

// MaxEgress bounds a server's egress list.
const MaxEgress = 64

// checkEgress refuses an egress entry that is not plainly a host (see
// netpolicy.ParseTarget) and one listed twice, and writes each as the
// proxy compares it (lower case).
func checkEgress(egress []string, ps *models.Problems) {
	if len(egress) > MaxEgress {
		ps.Add("/egress", "lists %d hosts; at most %d", len(egress), MaxEgress)
		return
	}
	seen := map[string]bool{}
	for i, e := range egress {
		t, err := netpolicy.ParseTarget(e)
		switch {
		case err != nil:
			ps.Add(fmt.Sprintf("/egress/%d", i), "%v", err)
		case seen[t.String()]:
			ps.Add(fmt.Sprintf("/egress/%d", i), "%s is listed twice", t)
		default:
			seen[t.String()], egress[i] = true, t.String()
		}
	}
}

// startProxy starts the proxy of one process of u: a netpolicy.Proxy for
// u's egress list under the outbound policy, listening on a unix socket
// in a private directory of its own, which the sandbox passes to the
// process (see sandbox.Spec.Proxy). stop ends the proxy, its connections
// and tunnels, and removes the directory.
func (s *Sandboxed) startProxy(u *models.Upstream) (socket string, stop func(), err error) {
	var targets []netpolicy.Target
	for _, e := range u.Egress {
		t, err := netpolicy.ParseTarget(e)
		if err != nil {
			return "", nil, fmt.Errorf("egress %s", err)
		}
		targets = append(targets, t)
	}
	dir, err := os.MkdirTemp("", "toolbelt-egress-")
	if err != nil {
		return "", nil, err
	}
	socket = filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", socket)
	if err == nil {
		// The sandbox's uid may not be this one; the directory (0700)
		// keeps everyone else on this host out, and the sandbox gets the
		// socket as a descriptor.
		err = os.Chmod(socket, 0o666)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	p := &netpolicy.Proxy{Policy: s.Net, Targets: targets,
		Refused: func(target string, reason error) { s.refused(u.Name, target, reason) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.Serve(ctx, ln); err != nil {
			s.log().Warn("upstream egress proxy ended", "server", u.Name, "err", err)
		}
	}()
	return socket, func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}, nil
}

// refused logs and counts a connection a server's proxy refused. The
// host is what the server asked for; the reason may name what it
// resolves to, which stays in the log.
func (s *Sandboxed) refused(server, target string, reason error) {
	s.log().Warn("upstream egress refused", "server", server, "host", target, "reason", reason)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.egressRefused == nil {
		s.egressRefused = map[string]uint64{}
	}
	s.egressRefused[server]++
}

// EgressRefused is how many connections each server's processes asked
// for and their proxies refused, since this instance started.
func (s *Sandboxed) EgressRefused() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.egressRefused))
	for server, n := range s.egressRefused {
		out[server] = n
	}
	return out
}
