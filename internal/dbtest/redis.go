package dbtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	sock, err := startRedis(t)
	if err != nil {
		unavailable(t, "redis-server", err)
	}
	return "unix://" + sock
}

func startRedis(t testing.TB) (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("no redis-server on PATH (apt-get install redis-server)")
	}
	cred, err := account()
	if err != nil {
		return "", err
	}
	dir, err := workDir("redis", cred)
	if err != nil {
		return "", err
	}
	sock := filepath.Join(dir, "redis.sock")
	logPath := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no",
		"--loglevel", "warning", "--logfile", logPath)
	cmd.Dir = dir
	proc, err := start(cmd, cred, syscall.SIGKILL)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("start redis-server: %w", err)
	}
	t.Cleanup(func() {
		proc.stop(syscall.SIGTERM, 10*time.Second)
		_ = os.RemoveAll(dir)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ping(sock)
		if err == nil {
			return sock, nil
		}
		if proc.exited() || time.Now().After(deadline) {
			return "", fmt.Errorf("redis-server did not start: %v\n%s", err, logTail(logPath))
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
