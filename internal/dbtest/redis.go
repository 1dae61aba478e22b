package dbtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Redis starts a Redis server of its own for t (they start in
// milliseconds) and returns its URL, unix:///…/redis.sock, as go-redis'
// ParseURL takes it; the server is stopped and its directory removed when
// t ends. It keeps nothing on disk. It skips t (fails it on CI) when
// redis-server is not installed.
func Redis(t testing.TB) string {
	t.Helper()
	return RedisServer(t).URL()
}

// RedisProc is a Redis server of a test's own that the test can stop and
// start again, as an outage or a restart would: a restart loses every key,
// since the server keeps nothing on disk. Its methods fail the test on an
// error, so they belong to the test's goroutine.
type RedisProc struct {
	t                  testing.TB
	bin                string
	cred               *syscall.Credential
	dir, sock, logPath string
	mu                 sync.Mutex
	proc               *process // nil while stopped
}

// RedisServer starts a Redis server of its own for t, like Redis, and
// returns it running.
func RedisServer(t testing.TB) *RedisProc {
	t.Helper()
	r, err := newRedis(t)
	if err != nil {
		unavailable(t, "redis-server", err)
	}
	t.Cleanup(func() {
		r.Stop()
		_ = os.RemoveAll(r.dir)
	})
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	return r
}

func newRedis(t testing.TB) (*RedisProc, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("no redis-server on PATH (apt-get install redis-server)")
	}
	cred, err := account()
	if err != nil {
		return nil, err
	}
	dir, err := workDir("redis", cred)
	if err != nil {
		return nil, err
	}
	return &RedisProc{t: t, bin: bin, cred: cred, dir: dir,
		sock: filepath.Join(dir, "redis.sock"), logPath: filepath.Join(dir, "redis.log")}, nil
}

// URL is the server's URL, unix:///…/redis.sock: the same across stops
// and starts.
func (r *RedisProc) URL() string { return "unix://" + r.sock }

// Stop ends the server (SIGTERM) and waits for it to exit; its clients'
// connections are closed and new ones refused until Start. It does
// nothing when the server is stopped.
func (r *RedisProc) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return
	}
	r.proc.stop(syscall.SIGTERM, 10*time.Second)
	r.proc = nil
	_ = os.Remove(r.sock) // redis-server removes it; a killed one does not
}

// Start starts the stopped server again, empty, on the same socket in the
// same directory, and returns once it answers.
func (r *RedisProc) Start() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

// Restart stops the server and starts it again: every key is lost.
func (r *RedisProc) Restart() {
	r.t.Helper()
	r.Stop()
	r.Start()
}

func (r *RedisProc) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return fmt.Errorf("redis-server runs already")
	}
	cmd := exec.Command(r.bin, "--port", "0", "--unixsocket", r.sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--daemonize", "no",
		"--loglevel", "warning", "--logfile", r.logPath)
	cmd.Dir = r.dir
	proc, err := start(cmd, r.cred, syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ping(r.sock)
		if err == nil {
			r.proc = proc
			return nil
		}
		if proc.exited() || time.Now().After(deadline) {
			proc.stop(syscall.SIGKILL, 10*time.Second)
			return fmt.Errorf("redis-server did not start: %v\n%s", err, logTail(r.logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends PING in Redis' protocol and expects PONG.
func ping(sock string) error {
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
