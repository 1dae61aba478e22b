package dbtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is the test process's one Postgres server, started by the first
// test that asks for a database and stopped by Main (or, without Main,
// killed by the kernel when the process ends). Each test gets a database
// of its own on it: a server per test would cost an initdb each.
type pgServer struct {
	dir   string // work directory: data/, the socket, the log
	proc  *process
	admin *pgx.Conn // to the postgres database, for CREATE and DROP DATABASE
}

var pg struct {
	once      sync.Once
	server    *pgServer
	err       error
	mu        sync.Mutex // guards admin and n
	n         int        // databases made
	templates onces[struct{}]
}

// Postgres returns the URL of a new, empty database for t on the test
// process's Postgres server, dropped when t ends. It skips t (fails it on
// CI) when Postgres is not installed.
func Postgres(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "")
}

// PostgresFrom is Postgres with a copy of the database template (CREATE
// DATABASE … TEMPLATE, a file copy) instead of an empty one. The first
// call of the process makes template and has fill fill it, given its URL;
// fill must close every connection it opened (Postgres copies only a
// database nobody is connected to). A failed fill fails every test asking
// for that template.
func PostgresFrom(t testing.TB, template string, fill func(url string) error) string {
	t.Helper()
	server(t)
	_, err := pg.templates.do(template, func() (struct{}, error) {
		pg.mu.Lock()
		_, err := pg.server.admin.Exec(context.Background(), "CREATE DATABASE "+template)
		pg.mu.Unlock()
		if err != nil {
			return struct{}{}, fmt.Errorf("create template database %s: %w", template, err)
		}
		return struct{}{}, fill(pg.server.url(template))
	})
	if err != nil {
		t.Fatalf("template database %s: %v", template, err)
	}
	return createDatabase(t, template)
}

// server is the process's Postgres server, started by the first caller.
func server(t testing.TB) *pgServer {
	t.Helper()
	pg.once.Do(func() { pg.server, pg.err = startPostgres() })
	if pg.err != nil {
		unavailable(t, "postgres", pg.err)
	}
	return pg.server
}

// createDatabase makes t's database, a copy of template when it is not
// "", and drops it when t ends.
func createDatabase(t testing.TB, template string) string {
	t.Helper()
	s := server(t)
	ddl := ""
	if template != "" {
		ddl = " TEMPLATE " + template
	}
	pg.mu.Lock()
	pg.n++
	name := databaseName(pg.n, t.Name())
	_, err := s.admin.Exec(context.Background(), "CREATE DATABASE "+name+ddl)
	pg.mu.Unlock()
	if err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		pg.mu.Lock()
		defer pg.mu.Unlock()
		if s.proc.exited() {
			return
		}
		if _, err := s.admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return s.url(name)
}

// url is the connection URL of database name, over the unix socket.
func (s *pgServer) url(name string) string {
	return "postgres://postgres@/" + name + "?host=" + url.QueryEscape(s.dir) + "&sslmode=disable"
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// databaseName is the n-th test database's name, which tells the test it
// belongs to (within Postgres' 63 bytes).
func databaseName(n int, test string) string {
	name := fmt.Sprintf("t%d_%s", n, unsafeName.ReplaceAllString(strings.ToLower(test), "_"))
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// Main runs the tests of a package that uses Postgres and then stops the
// server (so it is not left to the kernel's kill when the process ends)
// and removes its directory:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain with more to clean up: it runs the tests,
// stops the server, removes the process's directories (ProcessDir) and
// returns the exit code for os.Exit.
func Run(m *testing.M) int {
	code := m.Run()
	removeProcessDirs()
	if s := pg.server; s != nil {
		pg.mu.Lock()
		_ = s.admin.Close(context.Background())
		pg.mu.Unlock()
		s.proc.stop(syscall.SIGINT, 10*time.Second) // fast shutdown
		_ = os.RemoveAll(s.dir)
	}
	return code
}

// postgresBin finds the directory of Debian's Postgres programs, the
// newest version installed (/usr/lib/postgresql/<version>/bin), or else
// the one of initdb on PATH.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("no /usr/lib/postgresql/*/bin/postgres and no initdb on PATH (apt-get install postgresql)")
	}
	initdb, err = filepath.EvalSymlinks(initdb)
	if err != nil {
		return "", err
	}
	return filepath.Dir(initdb), nil
}

// startPostgres makes a cluster in a new directory and starts its server:
// listening on a unix socket in that directory only (no TCP port, so
// nothing else on the machine reaches it), trusting whoever can reach the
// socket (the directory is private to the server's user, and root), and
// tuned for tests: no fsync, since a lost test database costs nothing.
func startPostgres() (*pgServer, error) {
	c, err := initCluster()
	if err != nil {
		return nil, err
	}
	proc, admin, err := c.run()
	if err != nil {
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	return &pgServer{dir: c.dir, proc: proc, admin: admin}, nil
}

// pgCluster is a Postgres data directory made by initdb, and how to run
// its server.
type pgCluster struct {
	bin, dir, data, logPath string
	cred                    *syscall.Credential
	// durable commits survive a kill of the server (the WAL is written
	// at each commit; fsync stays off: the machine does not crash).
	durable bool
}

// initCluster makes a cluster in a new work directory.
func initCluster() (*pgCluster, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := account()
	if err != nil {
		return nil, err
	}
	dir, err := workDir("pg", cred)
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log"), cred: cred}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	return c, nil
}

// run starts the cluster's server and returns it once it accepts a
// connection, with that connection (to the postgres database).
func (c *pgCluster) run() (*process, *pgx.Conn, error) {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data, "-k", c.dir,
		"-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit="+map[bool]string{true: "on", false: "off"}[c.durable], "-c", "full_page_writes=off",
		// Each test app keeps a pool; the web suite runs many at once.
		"-c", "max_connections=400", "-c", "shared_buffers=64MB",
		// Parallel queries' shared memory in files of the data directory,
		// not /dev/shm (small in containers).
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic")
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// SIGQUIT is Postgres' immediate shutdown: the server and its children
	// end at once when the tests' process dies.
	proc, err := start(cmd, c.cred, syscall.SIGQUIT)
	if err != nil {
		return nil, nil, fmt.Errorf("start postgres: %w", err)
	}
	url := (&pgServer{dir: c.dir}).url("postgres")
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, url)
		cancel()
		if err == nil {
			return proc, conn, nil
		}
		if proc.exited() || time.Now().After(deadline) {
			proc.stop(syscall.SIGQUIT, 5*time.Second)
			return nil, nil, fmt.Errorf("postgres did not start: %v\n%s", err, logTail(c.logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PGServer is a Postgres server of one test's own, for a test that stops
// and starts it (fault tests): unlike Postgres' shared server, it costs
// an initdb. It is stopped and its directory removed when the test ends.
type PGServer struct {
	c    *pgCluster
	mu   sync.Mutex
	proc *process
}

// PostgresServer starts a Postgres server for t alone. It skips t (fails
// it on CI) when Postgres is not installed.
func PostgresServer(t testing.TB) *PGServer {
	t.Helper()
	c, err := initCluster()
	if err != nil {
		unavailable(t, "postgres", err)
	}
	c.durable = true // a kill must lose nothing committed
	s := &PGServer{c: c}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.proc != nil {
			s.proc.stop(syscall.SIGQUIT, 10*time.Second)
		}
		_ = os.RemoveAll(c.dir)
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Database makes a database on the server and returns its URL.
func (s *PGServer) Database(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return s.URL(name)
}

// URL is the connection URL of database name, over the unix socket.
func (s *PGServer) URL(name string) string { return (&pgServer{dir: s.c.dir}).url(name) }

// Start starts the server (again) and returns once it accepts
// connections: after Kill, once it recovered from the crash.
func (s *PGServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	proc, conn, err := s.c.run()
	if err != nil {
		return err
	}
	_ = conn.Close(context.Background())
	s.proc = proc
	return nil
}

// Stop is Postgres' fast shutdown (pg_ctl -m fast): sessions are ended,
// the server stops cleanly.
func (s *PGServer) Stop() { s.signal(syscall.SIGINT) }

// Kill kills the server and every backend at once (SIGKILL to its
// process group), as a crash would: the next Start recovers from the WAL.
func (s *PGServer) Kill() { s.signal(syscall.SIGKILL) }

func (s *PGServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	pid := s.proc.cmd.Process.Pid
	// Each backend calls setsid, so the postmaster's process group does
	// not hold them: a crash kills them by pid, all at once.
	var children []int
	if sig == syscall.SIGKILL {
		children = childrenOf(pid)
		for _, c := range children {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	}
	s.proc.stop(sig, 30*time.Second)
	s.proc = nil
	// Until every backend has exited, the shared memory is attached and a
	// new server refuses to start ("pre-existing shared memory block").
	for _, c := range children {
		for deadline := time.Now().Add(30 * time.Second); alive(c) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := procStat(c); ppid == pid {
			out = append(out, c)
		}
	}
	return out
}

// alive reports whether pid runs: a zombie has exited (and detached its
// memory) even when nobody reaped it yet.
func alive(pid int) bool {
	_, state := procStat(pid)
	return state != "" && state != "Z" && state != "X"
}

// procStat reads a process's parent and state from /proc/<pid>/stat
// ("pid (comm) state ppid ..."; comm may hold spaces and parentheses).
func procStat(pid int) (ppid int, state string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0, ""
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0]
}

// Restart is a fast shutdown and a start (pg_ctl -m fast restart).
func (s *PGServer) Restart() error {
	s.Stop()
	return s.Start()
}

// Log is the end of the server's log.
func (s *PGServer) Log() string { return logTail(s.c.logPath) }
