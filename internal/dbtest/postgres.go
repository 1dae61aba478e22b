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
	once   sync.Once
	server *pgServer
	err    error
	mu     sync.Mutex // guards admin and n
	n      int        // databases made
}

// Postgres returns the URL of a new, empty database for t on the test
// process's Postgres server, dropped when t ends. It skips t (fails it on
// CI) when Postgres is not installed.
func Postgres(t testing.TB) string {
	t.Helper()
	pg.once.Do(func() { pg.server, pg.err = startPostgres() })
	if pg.err != nil {
		unavailable(t, "postgres", pg.err)
	}
	s := pg.server
	pg.mu.Lock()
	pg.n++
	name := databaseName(pg.n, t.Name())
	_, err := s.admin.Exec(context.Background(), "CREATE DATABASE "+name)
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
	code := m.Run()
	if s := pg.server; s != nil {
		pg.mu.Lock()
		_ = s.admin.Close(context.Background())
		pg.mu.Unlock()
		s.proc.stop(syscall.SIGINT, 10*time.Second) // fast shutdown
		_ = os.RemoveAll(s.dir)
	}
	os.Exit(code)
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
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		// Each test app keeps a pool; the web suite runs many at once.
		"-c", "max_connections=400", "-c", "shared_buffers=64MB",
		// Parallel queries' shared memory in files of the data directory,
		// not /dev/shm (small in containers).
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// SIGQUIT is Postgres' immediate shutdown: the server and its children
	// end at once when the tests' process dies.
	proc, err := start(cmd, cred, syscall.SIGQUIT)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &pgServer{dir: dir, proc: proc}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.admin, err = pgx.Connect(ctx, s.url("postgres"))
		cancel()
		if err == nil {
			break
		}
		if proc.exited() || time.Now().After(deadline) {
			proc.stop(syscall.SIGQUIT, 5*time.Second)
			return nil, fmt.Errorf("postgres did not start: %v\n%s", err, logTail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	ok = true
	return s, nil
}
