package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/internal/poll"
)

// mcpServerEnv makes the test binary an MCP server on stdio (see init): a
// real go-sdk server, run inside the sandbox from a copy in its work
// directory.
const mcpServerEnv = "TOOLBELT_SANDBOX_TEST_MCP_SERVER"

func init() {
	if os.Getenv(mcpServerEnv) != "1" {
		return
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, nil, nil
	})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcp server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// start starts spec in s; the test kills it at its end.
func start(t *testing.T, ctx context.Context, s *Sandbox, spec Spec) *Process {
	t.Helper()
	p, err := s.Start(ctx, spec)
	if err != nil {
		t.Fatalf("start %q: %v", spec.Argv, err)
	}
	t.Cleanup(func() { p.Kill() })
	// A test that goes wrong fails, rather than waiting forever on a read.
	_ = p.Stdout.(*os.File).SetReadDeadline(time.Now().Add(60 * time.Second))
	return p
}

// readLine reads one line of the process's stdout.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read stdout: %q, %v", line, err)
	}
	return strings.TrimSuffix(line, "\n")
}

// waitExit waits boundedly for p to end.
func waitExit(t *testing.T, p *Process, within time.Duration) *Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(within):
		t.Fatalf("the process did not end within %v; stderr %q", within, p.StderrTail())
		return nil
	}
}

// One process answers many lines, one after the other, over its pipes,
// and ends with Stop by the EOF on its stdin.
func TestStartEchoLoop(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			p := start(t, t.Context(), s, Spec{Argv: []string{"sh", "-c", `while read l; do echo "re: $l"; done; echo bye >&2`}, Dir: workDir(t, s)})
			r := bufio.NewReader(p.Stdout)
			for i := range 500 {
				if _, err := fmt.Fprintf(p.Stdin, "line %d\n", i); err != nil {
					t.Fatal(err)
				}
				if got, want := readLine(t, r), fmt.Sprintf("re: line %d", i); got != want {
					t.Fatalf("answer %d: %q, want %q", i, got, want)
				}
			}
			if m := p.Memory(); m < 64<<10 || m > DefaultMemory {
				t.Errorf("memory %d bytes", m)
			}
			exit := p.Stop(10 * time.Second)
			if m := p.Memory(); m != 0 {
				t.Errorf("memory %d bytes after Stop", m)
			}
			if exit.ExitCode != 0 || exit.Limit != "" || !exit.Stopped || exit.Signal != 0 || exit.Err != nil {
				t.Fatalf("exit %+v; stderr %q", exit, p.StderrTail())
			}
			if got := string(p.StderrTail()); got != "bye\n" {
				t.Errorf("stderr tail %q", got)
			}
			if _, err := p.Stdin.Write([]byte("x\n")); err == nil {
				t.Error("stdin still writable after Stop")
			}
		})
	}
}

// The go-sdk's client talks to a go-sdk server in the sandbox through
// Process's pipes (mcp.IOTransport), many calls over one process.
func TestStartMCPServer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range bubblewrapOnly(t) {
		t.Run(name, func(t *testing.T) {
			if raceEnabled && s.cgroups == nil {
				// The race detector's shadow memory is far past RLIMIT_DATA.
				t.Skip("a test binary built with -race cannot run under the memory rlimit")
			}
			dir := workDir(t, s)
			copyFile(t, self, filepath.Join(dir, "server"))
			env := append(DefaultEnv("/work"), mcpServerEnv+"=1")
			begin := time.Now()
			p := start(t, t.Context(), s, Spec{Argv: []string{"/work/server"}, Dir: dir, Env: env})
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: p.Stdout, Writer: p.Stdin}, nil)
			if err != nil {
				t.Fatalf("connect: %v; stderr %q", err, p.StderrTail())
			}
			started := time.Since(begin)
			begin = time.Now()
			for i := range 100 {
				text := fmt.Sprintf("call %d", i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if got := res.Content[0].(*mcp.TextContent).Text; got != text {
					t.Fatalf("call %d: %q", i, got)
				}
			}
			t.Logf("start to initialized %v, %v a call, %d KiB of memory", started, time.Since(begin)/100, p.Memory()>>10)
			_ = cs.Close() // closes stdin: the server ends
			if exit := waitExit(t, p, 20*time.Second); exit.ExitCode != 0 || exit.Stopped {
				t.Fatalf("exit %+v; stderr %q", exit, p.StderrTail())
			}
			p.Stop(0)
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// procStart is a process's start time (field 22 of /proc/<pid>/stat), ""
// when it is gone: with the pid it names one process, not a reuse.
func procStart(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 || fields[0] == "Z" {
		return ""
	}
	return fields[19]
}

// Stop ends a command that ignores both EOF and SIGTERM, with a
// grandchild in its own session that double-forked and ignores SIGTERM
// too: nothing of its tree is left on the host.
func TestStopKillsTree(t *testing.T) {
	const script = `trap "" TERM
(setsid sh -c 'trap "" TERM; exec sleep 4101' &)
sleep 4102 &
echo ready
while :; do sleep 4103; done`
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			p := start(t, t.Context(), s, Spec{Argv: []string{"sh", "-c", script}, Dir: workDir(t, s)})
			if got := readLine(t, bufio.NewReader(p.Stdout)); got != "ready" {
				t.Fatalf("stdout %q", got)
			}
			poll.Until(t, 10*time.Second, "the three sleeps started", func() (bool, string) {
				n := []int{countProcs("sleep", "4101"), countProcs("sleep", "4102"), countProcs("sleep", "4103")}
				return n[0] == 1 && n[1] == 1 && n[2] == 1, fmt.Sprintf("sleeps running %v", n)
			})
			procs := map[int]string{}
			for _, pid := range tree(p.l.cmd.Process.Pid) {
				procs[pid] = procStart(pid)
			}
			begin := time.Now()
			const grace = 200 * time.Millisecond
			exit := p.Stop(grace)
			if took := time.Since(begin); took < 2*grace {
				t.Errorf("Stop took %v: the command should have outlived EOF and SIGTERM", took)
			}
			if !exit.Stopped || exit.ExitCode != 128+9 || exit.Signal != 9 {
				t.Errorf("exit %+v, want killed by SIGKILL", exit)
			}
			for _, arg := range []string{"4101", "4102", "4103"} {
				waitGone(t, begin, func() int { return countProcs("sleep", arg) })
			}
			for pid, started := range procs {
				if procStart(pid) == started {
					t.Errorf("process %d of the tree outlived Stop", pid)
				}
			}
		})
	}
}

// Stop's SIGTERM reaches the command, which may end on it.
func TestStopSendsSIGTERM(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			p := start(t, t.Context(), s, Spec{Argv: []string{"sh", "-c", `trap "exit 7" TERM; echo ready; while :; do sleep 0.05; done`}, Dir: workDir(t, s)})
			if got := readLine(t, bufio.NewReader(p.Stdout)); got != "ready" {
				t.Fatalf("stdout %q", got)
			}
			if exit := p.Stop(2 * time.Second); exit.ExitCode != 7 || !exit.Stopped {
				t.Fatalf("exit %+v, want 7 from the SIGTERM trap", exit)
			}
		})
	}
}

// The context's end kills the process and releases its pipes.
func TestStartContextCancel(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			p := start(t, ctx, s, Spec{Argv: []string{"sh", "-c", "sleep 4201 & echo ready; cat"}, Dir: workDir(t, s)})
			r := bufio.NewReader(p.Stdout)
			if got := readLine(t, r); got != "ready" {
				t.Fatalf("stdout %q", got)
			}
			begin := time.Now()
			cancel()
			exit := waitExit(t, p, 20*time.Second)
			if !exit.Stopped || !errors.Is(exit.Err, context.Canceled) || exit.ExitCode != 128+9 {
				t.Fatalf("exit %+v", exit)
			}
			waitGone(t, begin, func() int { return countProcs("sleep", "4201") })
			if _, err := r.ReadString('\n'); err == nil {
				t.Error("stdout still readable after the context ended")
			}
		})
	}
	// A context already ended starts nothing.
	for _, s := range backends(t) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := s.Start(ctx, Spec{Argv: []string{"true"}, Dir: workDir(t, s)}); !errors.Is(err, context.Canceled) {
			t.Errorf("start with an ended context: %v", err)
		}
		break
	}
}

// A process past its memory limit or its disk quota (each file under
// what is left, together over it: the watch kills it) ends, and Wait
// says which.
func TestStartLimits(t *testing.T) {
	cases := []struct {
		name   string
		argv   []string
		limits Limits
		want   Limit
	}{
		{"memory", []string{"python3", "-c", "import sys\nfor l in sys.stdin:\n    b = b'x' * (1 << 30)\n    print(len(b), flush=True)"}, Limits{Memory: 128 << 20}, LimitMemory},
		{"disk", []string{"sh", "-c", "read l; for i in 1 2 3 4 5 6 7 8; do head -c 300000 /dev/zero > f$i; done; echo written; cat"}, Limits{Disk: 1 << 20}, LimitDisk},
	}
	for name, s := range backends(t) {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				p := start(t, t.Context(), s, Spec{Argv: c.argv, Dir: workDir(t, s), Limits: c.limits})
				fmt.Fprintln(p.Stdin, "go")
				if exit := waitExit(t, p, 60*time.Second); exit.ExitCode == 0 || exit.Limit != c.want || exit.Stopped {
					t.Fatalf("exit %+v, want limit %q; stderr %q", exit, c.want, p.StderrTail())
				}
			})
		}
	}
}

// Without Spec.Network the process reaches nothing, not even the host's
// loopback; with it, it does.
func TestStartNoNetwork(t *testing.T) {
	port, accepted := loopbackListener(t)
	prog := fmt.Sprintf(`import socket, sys
for l in sys.stdin:
    try:
        socket.create_connection(('127.0.0.1', %d), timeout=3); print('connected', flush=True)
    except OSError as e:
        print('refused', e, flush=True)`, port)
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, network := range []bool{false, true} {
				before := accepted.Load()
				p := start(t, t.Context(), s, Spec{Argv: []string{"python3", "-c", prog}, Dir: workDir(t, s), Network: network})
				r := bufio.NewReader(p.Stdout)
				fmt.Fprintln(p.Stdin, "connect")
				got := readLine(t, r)
				if network {
					poll.True(t, 10*time.Second, "the host's listener counted the connection", func() bool { return accepted.Load() != before })
				}
				if reached := accepted.Load() != before; reached != network || strings.HasPrefix(got, "connected") != network {
					t.Errorf("network %v: %q, connections seen %d", network, got, accepted.Load()-before)
				}
				p.Stop(time.Second)
			}
		})
	}
}

// The process's environment is Spec.Env or DefaultEnv, nothing of the
// server's.
func TestStartEnvironment(t *testing.T) {
	t.Setenv("TOOLBELT_TEST_SECRET", "hunter2")
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			for _, env := range [][]string{nil, {"PATH=/usr/bin:/bin", "ONLY=this"}} {
				p := start(t, t.Context(), s, Spec{Argv: []string{"cat", "/proc/self/environ"}, Dir: dir, Env: env})
				out, err := io.ReadAll(p.Stdout)
				if err != nil {
					t.Fatal(err)
				}
				if exit := waitExit(t, p, 20*time.Second); exit.ExitCode != 0 {
					t.Fatalf("exit %+v, stderr %q", exit, p.StderrTail())
				}
				p.Stop(0)
				want := env
				if want == nil {
					want = DefaultEnv(s.backend.workPath(Spec{Dir: dir}))
				}
				if strings.HasPrefix(name, Bubblewrap) {
					want = append(want, "PWD=/work") // bubblewrap's --chdir sets it
				}
				if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("environment %q, want %q", got, want)
				}
			}
		})
	}
}

// Files beside the work directory, readable to anyone on the host, are
// out of the process's reach.
func TestStartCannotReadOutside(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			root := workRoot(t)
			f, err := s.PrepareDir(root, "p1", "session")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			secret := filepath.Join(root, "secret.txt")
			if err := os.WriteFile(secret, []byte("planted-"+name), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "p1", "session")
			p := start(t, t.Context(), s, Spec{Argv: []string{"sh", "-c", `while read f; do cat "$f" 2>&1; echo; echo end; done`}, Dir: dir, DirFD: f})
			r := bufio.NewReader(p.Stdout)
			for _, path := range []string{secret, "../../secret.txt", "/proc/1/root" + secret, "/proc/self/cwd/../../secret.txt"} {
				fmt.Fprintln(p.Stdin, path)
				var out []string
				for line := readLine(t, r); line != "end"; line = readLine(t, r) {
					out = append(out, line)
				}
				if strings.Contains(strings.Join(out, "\n"), "planted") {
					t.Errorf("read %s from outside the work directory: %q", path, out)
				}
			}
			p.Stop(time.Second)
		})
	}
}

// Stderr is read whatever the caller does, and only its tail kept.
func TestStartStderrTail(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			p := start(t, t.Context(), s, Spec{Argv: []string{"sh", "-c", "head -c 8388608 /dev/zero | tr '\\000' x >&2; echo end >&2; echo done; cat"}, Dir: workDir(t, s)})
			if got := readLine(t, bufio.NewReader(p.Stdout)); got != "done" {
				t.Fatalf("stdout %q", got)
			}
			// exec's goroutine copies stderr: "end" may come a moment later.
			var tail []byte
			poll.Until(t, 10*time.Second, "stderr's tail ends \"end\"", func() (bool, string) {
				tail = p.StderrTail()
				return strings.HasSuffix(string(tail), "end\n"), fmt.Sprintf("%d bytes ending %q", len(tail), tail[max(0, len(tail)-20):])
			})
			if len(tail) != StderrTail || strings.Trim(string(tail), "x") != "end\n" {
				t.Fatalf("stderr tail of %d bytes ending %q", len(tail), tail[max(0, len(tail)-20):])
			}
			p.Stop(time.Second)
		})
	}
}

// A process flooding stdout, which nobody reads, and stderr still stops.
func TestStopFloodingProcess(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			p := start(t, t.Context(), s, Spec{Argv: []string{"sh", "-c", "trap '' TERM; yes stderr >&2 & yes stdout"}, Dir: workDir(t, s)})
			poll.True(t, 10*time.Second, "the flood under way (its stderr read)", func() bool { return len(p.StderrTail()) > 0 })
			done := make(chan *Exit)
			go func() { done <- p.Stop(100 * time.Millisecond) }()
			select {
			case exit := <-done:
				if !exit.Stopped || exit.ExitCode != 128+9 {
					t.Errorf("exit %+v", exit)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Stop did not return")
			}
			if n := len(p.StderrTail()); n != StderrTail {
				t.Errorf("stderr tail of %d bytes", n)
			}
		})
	}
}

// Stop leaves no goroutine, descriptor or cgroup of the process behind,
// disk watch included.
func TestStopReleasesEverything(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			dir := workDir(t, s)
			goroutines, fds := runtime.NumGoroutine(), openFDs(t)
			var groups []string
			for range 3 {
				p, err := s.Start(t.Context(), Spec{Argv: []string{"sh", "-c", "while read l; do echo $l; done"}, Dir: dir, Limits: Limits{Disk: 64 << 20}})
				if err != nil {
					t.Fatal(err)
				}
				if p.l.group != nil {
					groups = append(groups, p.l.group.dirs()...)
				}
				fmt.Fprintln(p.Stdin, "hello")
				if got := readLine(t, bufio.NewReader(p.Stdout)); got != "hello" {
					t.Fatalf("stdout %q", got)
				}
				p.Stop(time.Second)
			}
			poll.Until(t, 10*time.Second, "goroutines and descriptors back to before", func() (bool, string) {
				if runtime.NumGoroutine() <= goroutines && openFDs(t) <= fds {
					return true, ""
				}
				buf := make([]byte, 1<<20)
				return false, fmt.Sprintf("%d goroutines (%d before), %d descriptors (%d before):\n%s", runtime.NumGoroutine(), goroutines, openFDs(t), fds, buf[:runtime.Stack(buf, true)])
			})
			for _, g := range groups {
				if _, err := os.Stat(g); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("cgroup %s left behind: %v", g, err)
				}
			}
		})
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// Start sets no CPU time limit from the context (a server has none);
// Limits.CPU sets one, with or without a cgroup.
func TestStartCPULimit(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			for _, c := range []struct {
				cpu  time.Duration
				want string
			}{{0, "unlimited"}, {90 * time.Second, "90"}} {
				p := start(t, ctx, s, Spec{Argv: []string{"grep", "Max cpu time", "/proc/self/limits"}, Dir: workDir(t, s), Limits: Limits{CPU: c.cpu}})
				out, _ := io.ReadAll(p.Stdout)
				p.Stop(time.Second)
				if f := strings.Fields(string(out)); len(f) < 4 || f[3] != c.want {
					t.Errorf("Limits.CPU %v: %q, want %s", c.cpu, out, c.want)
				}
			}
		})
	}
}

func TestStartRefuses(t *testing.T) {
	s := Probe(context.Background(), None, workRoot(t), quiet)
	if _, err := s.Start(t.Context(), Spec{Argv: []string{"true"}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("start without a sandbox: %v", err)
	}
	for _, s := range backends(t) {
		if _, err := s.Start(t.Context(), Spec{Argv: []string{"true"}, Dir: workDir(t, s), Stdin: []byte("x")}); err == nil {
			t.Error("Start took Spec.Stdin")
		}
		break
	}
}

func TestTail(t *testing.T) {
	tl := newTail(8)
	var all []byte
	for i := range 50 {
		chunk := []byte(strconv.Itoa(i * 7919))
		tl.Write(chunk)
		all = append(all, chunk...)
		want := all[max(0, len(all)-8):]
		if got := tl.bytes(); string(got) != string(want) {
			t.Fatalf("after %q: %q, want %q", all, got, want)
		}
	}
	tl.Write([]byte("0123456789abcdef"))
	if got := tl.bytes(); string(got) != "89abcdef" {
		t.Fatalf("after a write longer than the tail: %q", got)
	}
}
