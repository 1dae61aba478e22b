package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// StderrTail is how much of a started process's stderr is kept: its last
// bytes.
const StderrTail = 64 << 10

// Process is a command started by Start: it runs, isolated as Run's
// commands are, until it ends, Stop or Kill ends it, or its context does.
// Stdin and Stdout are live pipes (a JSON-RPC transport reads and writes
// them); stderr is read all along, its last StderrTail bytes kept.
type Process struct {
	// Stdin is the command's standard input; closing it gives the
	// command EOF.
	Stdin io.WriteCloser
	// Stdout is the command's standard output (an *os.File: read
	// deadlines work). Nothing reads it but the caller: a command that
	// writes more than the caller reads blocks, as with any pipe (Stop
	// and Kill still end it). After the command ended on its own, what it
	// wrote is read to EOF; Stop, Kill and the context's end close it.
	Stdout io.ReadCloser

	l        *launched
	stderr   *tail
	stopping atomic.Bool   // Stop or Kill was called, or ctx ended
	kill     chan struct{} // closed to kill every process
	killOnce sync.Once
	ended    chan struct{} // closed once the command is gone and released
	exit     *Exit
	release  sync.Once
}

// Exit is how a started process ended.
type Exit struct {
	// ExitCode is the command's exit status, 128+n when signal n ended
	// it (as a shell reports it; bubblewrap passes its command's end on
	// that way), or -1.
	ExitCode int
	// Signal is n when ExitCode is 128+n (a command may also exit with
	// such a code itself).
	Signal syscall.Signal
	// Limit is set when a limit stopped the command (memory, processes
	// for a fork refused at any time, file size or disk quota).
	Limit Limit
	// Stopped is set when Stop or Kill was called, or the context ended,
	// before the command ended.
	Stopped bool
	// Err is the context's error when its end killed the command.
	Err      error
	Duration time.Duration
}

// Start starts spec isolated exactly as Run does (the backend, seccomp,
// the unprivileged uid, the cgroup or resource limits, the work
// directory, no network unless Spec.Network (or only the proxy of
// Spec.Proxy), only Spec.Env or DefaultEnv, the disk quota's watch), with live pipes instead of
// buffers, and returns at once. The process lives until it ends, Stop or
// Kill ends it, or ctx ends: every process of its tree is killed then.
// ctx bounds its whole life: a server's context, not one request's.
//
// Unlike Run, the context sets no CPU time limit (a server has no
// deadline): Limits.CPU, when set, caps each process's CPU time over its
// whole life. Under Limits.Disk, each file is capped at what the quota
// left when the process started. Limits.Output does not apply (see
// Process.Stdout and StderrTail); Spec.Stdin must be nil (write to
// Process.Stdin).
//
// The caller must end every Process with Stop or Kill, also one that
// ended on its own: they release its pipes.
func (s *Sandbox) Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := s.usable(spec); err != nil {
		return nil, err
	}
	if spec.Stdin != nil {
		return nil, errors.New("sandbox: Start takes no Spec.Stdin: write to Process.Stdin")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	p := &Process{Stdin: inW, Stdout: outR, stderr: newTail(StderrTail), kill: make(chan struct{}), ended: make(chan struct{})}
	// The command's ends are its own once started: its stdin and stdout
	// are these pipes directly (no copying goroutine); stderr goes through
	// exec's goroutine into the tail, read whatever the caller does.
	l, err := s.launch(spec, true, func(cmd *exec.Cmd) {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, p.stderr
	})
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p.l = l
	go p.supervise(ctx)
	return p, nil
}

// supervise waits for the command's end, or kills it when asked, when
// ctx ends or when the disk watch found it over its quota; then it
// classifies the end and releases the cgroup and the watch.
func (p *Process) supervise(ctx context.Context) {
	var diskOver <-chan struct{}
	if p.l.watch != nil {
		diskOver = p.l.watch.over
	}
	var waitErr, ctxErr error
	var limit Limit
	ended := false
	select {
	case waitErr = <-p.l.done:
		ended = true
	case <-p.kill:
	case <-ctx.Done():
		p.stopping.Store(true)
		ctxErr = ctx.Err()
	case <-diskOver:
		limit = LimitDisk
	}
	if !ended {
		// Every process found is waited for, not only the first: without a
		// cgroup the others die as the kernel gets to them.
		fds := p.l.pidfds()
		p.l.killAll()
		_ = p.l.cmd.Process.Kill()
		waitErr = <-p.l.done
		waitPidfds(fds, time.Now().Add(5*time.Second))
	}
	res := &Result{ExitCode: exitCode(p.l.cmd, waitErr), Stderr: p.stderr.bytes(), Limit: limit}
	p.l.finish(res)
	p.exit = &Exit{ExitCode: res.ExitCode, Limit: res.Limit, Stopped: p.stopping.Load(), Err: ctxErr, Duration: time.Since(p.l.start)}
	if n := res.ExitCode - 128; n > 0 && n < 65 {
		p.exit.Signal = syscall.Signal(n)
	}
	if ctxErr != nil {
		p.releasePipes()
	}
	close(p.ended)
}

// Done is closed once the process has ended and its cgroup and disk watch
// are released (Wait then returns at once).
func (p *Process) Done() <-chan struct{} { return p.ended }

// Wait waits for the process to end and says how it did.
func (p *Process) Wait() *Exit {
	<-p.ended
	return p.exit
}

// StderrTail is the last StderrTail bytes the command wrote to stderr.
func (p *Process) StderrTail() []byte { return p.stderr.bytes() }

// Memory is the memory the process uses now, in bytes: what its cgroup
// is charged (its pages, its /tmp and /dev/shm, kernel memory), or
// without a cgroup the resident memory of its processes (the backend's
// included, shared pages counted in each). 0 once it has ended.
func (p *Process) Memory() int64 {
	p.l.reaping.Lock()
	defer p.l.reaping.Unlock()
	if p.l.exited {
		return 0
	}
	if p.l.group != nil {
		return p.l.group.memoryUsed()
	}
	return residentSize(tree(p.l.cmd.Process.Pid))
}

// Stop ends the process as the MCP specification asks of a client: it
// closes Stdin, waits up to grace for the command to exit, then sends
// SIGTERM to the command's processes (not to the backend's) and waits up
// to grace again; then it kills every process. It returns once all are
// gone and the pipes are closed.
func (p *Process) Stop(grace time.Duration) *Exit {
	p.stopping.Store(true)
	_ = p.Stdin.Close()
	if !p.waitFor(grace) {
		p.l.signal(syscall.SIGTERM, p.l.wrappers)
		if !p.waitFor(grace) {
			p.requestKill()
		}
	}
	<-p.ended
	p.releasePipes()
	return p.exit
}

// Kill kills every process of the command at once (the cgroup's, and its
// tree's), waits for them, and closes the pipes.
func (p *Process) Kill() *Exit {
	p.stopping.Store(true)
	p.requestKill()
	<-p.ended
	p.releasePipes()
	return p.exit
}

func (p *Process) requestKill() { p.killOnce.Do(func() { close(p.kill) }) }

// waitFor reports whether the process ends within d.
func (p *Process) waitFor(d time.Duration) bool {
	select {
	case <-p.ended:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.ended:
		return true
	case <-t.C:
		return false
	}
}

// releasePipes closes the caller's ends of stdin and stdout: a read or
// write blocked on them returns.
func (p *Process) releasePipes() {
	p.release.Do(func() {
		_ = p.Stdin.Close()
		_ = p.Stdout.Close()
	})
}

// tail keeps the last bytes written to it, in a ring.
type tail struct {
	mu    sync.Mutex
	buf   []byte
	next  int   // where the next byte goes
	total int64 // bytes written in all
}

func newTail(n int) *tail { return &tail{buf: make([]byte, n)} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	t.total += int64(n)
	if len(p) > len(t.buf) {
		p = p[len(p)-len(t.buf):]
	}
	k := copy(t.buf[t.next:], p)
	copy(t.buf, p[k:])
	t.next = (t.next + len(p)) % len(t.buf)
	return n, nil
}

func (t *tail) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total < int64(len(t.buf)) {
		return append([]byte(nil), t.buf[:t.next]...)
	}
	return append(append(make([]byte, 0, len(t.buf)), t.buf[t.next:]...), t.buf[:t.next]...)
}

var _ io.Writer = (*tail)(nil)
