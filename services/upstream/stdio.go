package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
	"toolbelt/services/sandbox"
)

// Sandboxed starts stdio servers in the sandbox, with the limits of tool
// commands: no network of their own, the hosts of the server's egress
// list reached through a proxy under the outbound policy (egress.go), an
// environment of the sandbox's defaults and the server's own variables
// only, and one writable directory: the session's work directory for a
// server with session isolation, else the server's own directory under
// DataDir/upstreams (a personal server's: one per person under it, as
// one person's process must not read another's files).
type Sandboxed struct {
	Box     *sandbox.Sandbox
	DataDir string
	Limits  sandbox.Limits
	// Net is the outbound policy of the servers' egress proxies, the one
	// of http_request.
	Net netpolicy.Policy
	Log *slog.Logger

	mu            sync.Mutex
	stderr        map[string]*sandbox.Process // the last process of each server
	live          map[*sandbox.Process]string // the running processes, by server
	egressRefused map[string]uint64           // by server
}

func (s *Sandboxed) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// StopGrace is how long a stdio server has to exit once its input
// closes, before it is terminated.
const StopGrace = 2 * time.Second

// Start starts u's command.
func (s *Sandboxed) Start(ctx context.Context, u *models.Upstream, call *runners.Call, person uint, env []string) (mcp.Transport, error) {
	if !s.Box.Available() {
		return nil, sandbox.ErrUnavailable
	}
	var mounts []sandbox.Mount
	data, err := filepath.Abs(s.DataDir)
	if err != nil {
		return nil, err
	}
	for name, host := range u.Mounts {
		if err := s.mountable(host, data); err != nil {
			return nil, fmt.Errorf("mount %s: %w", name, err)
		}
		mounts = append(mounts, sandbox.Mount{Host: host, At: "/opt/" + name})
	}
	var dir *os.File
	switch {
	case call != nil:
		dir, err = call.OpenDir()
	case person != 0:
		dir, err = s.Box.PrepareDir(filepath.Join(s.DataDir, "upstreams"), u.Name, fmt.Sprintf("person-%d", person))
	default:
		dir, err = s.Box.PrepareDir(filepath.Join(s.DataDir, "upstreams"), u.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	defer dir.Close()
	spec := sandbox.Spec{Argv: u.Command, Dir: dir.Name(), DirFD: dir, Limits: s.Limits, Mounts: mounts}
	spec.Env = append(sandbox.DefaultEnv(s.Box.WorkPath(spec)), env...)
	stopProxy := func() {}
	if len(u.Egress) > 0 {
		if spec.Proxy, stopProxy, err = s.startProxy(u); err != nil {
			return nil, fmt.Errorf("egress proxy: %w", err)
		}
	}
	p, err := s.Box.Start(ctx, spec)
	if err != nil {
		stopProxy()
		return nil, fmt.Errorf("start %s: %w", u.Command[0], err)
	}
	if spec.Proxy != "" {
		go func() {
			<-p.Done()
			stopProxy()
		}()
	}
	s.mu.Lock()
	if s.stderr == nil {
		s.stderr, s.live = map[string]*sandbox.Process{}, map[*sandbox.Process]string{}
	}
	s.stderr[u.Name], s.live[p] = p, u.Name
	s.mu.Unlock()
	return &mcp.IOTransport{Reader: p.Stdout, Writer: &stdin{p: p, stopped: func() {
		s.mu.Lock()
		delete(s.live, p)
		s.mu.Unlock()
	}}}, nil
}

// StderrTail is the end of what a server's last process wrote to its
// standard error ("" when none ran here).
func (s *Sandboxed) StderrTail(server string) string {
	s.mu.Lock()
	p := s.stderr[server]
	s.mu.Unlock()
	if p == nil {
		return ""
	}
	return string(p.StderrTail())
}

// Forget removes what a server's processes left here: its work
// directory under DataDir/upstreams and the end of its standard error.
// Its processes must have stopped (Manager.Drop).
func (s *Sandboxed) Forget(server string) error {
	s.mu.Lock()
	delete(s.stderr, server)
	s.mu.Unlock()
	return os.RemoveAll(filepath.Join(s.DataDir, "upstreams", server))
}

// stdin is a process's input; closing it ends the process (its input
// closes, then it is terminated after StopGrace) and releases it.
type stdin struct {
	p       *sandbox.Process
	stopped func()
	once    sync.Once
}

func (w *stdin) Write(b []byte) (int, error) {
	n, err := w.p.Stdin.Write(b)
	if errors.Is(err, os.ErrClosed) {
		err = mcp.ErrConnectionClosed
	}
	return n, err
}

func (w *stdin) Close() error {
	w.once.Do(func() {
		w.p.Stop(StopGrace)
		w.stopped()
	})
	return nil
}

// within reports whether path is dir or below it.
// Mountable says whether host, a mounts entry, can be shown to the
// server's processes: not the data directory nor in it (which no sandbox
// sees), and a directory the user they run as can reach and read (a
// clone under a home directory of mode 700 is not).
func (s *Sandboxed) Mountable(host string) error {
	data, err := filepath.Abs(s.DataDir)
	if err != nil {
		return err
	}
	return s.mountable(host, data)
}

func (s *Sandboxed) mountable(host, data string) error {
	if within(host, data) || within(data, host) {
		return fmt.Errorf("%s holds or is inside the server's data directory, which no sandbox sees", host)
	}
	return s.Box.Readable(host)
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Memory is what each server's running processes use, in bytes (their
// cgroup's charge, or their resident memory without one).
func (s *Sandboxed) Memory() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for p, server := range s.live {
		out[server] += p.Memory()
	}
	return out
}
