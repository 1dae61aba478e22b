package dbtest

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisDo sends one command in Redis' protocol on sock and returns the
// first line of the answer.
func redisDo(sock string, args ...string) (string, error) {
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line, nil
}

// A RedisServer stops (its socket refuses), starts again on the same URL,
// and loses its keys on a restart, as a real outage and restart do.
func TestRedisServerStopsAndStarts(t *testing.T) {
	r := RedisServer(t)
	sock := strings.TrimPrefix(r.URL(), "unix://")
	if got, err := redisDo(sock, "SET", "k", "v"); err != nil || got != "+OK" {
		t.Fatalf("SET: %q %v", got, err)
	}
	r.Stop()
	if err := ping(sock); err == nil {
		t.Fatal("a stopped server answers")
	}
	r.Stop() // twice is fine
	r.Start()
	if got, err := redisDo(sock, "GET", "k"); err != nil || got != "$-1" {
		t.Fatalf("GET after a start: %q %v; want no key", got, err)
	}
	if got, err := redisDo(sock, "SET", "k", "v"); err != nil || got != "+OK" {
		t.Fatalf("SET: %q %v", got, err)
	}
	r.Restart()
	if got, err := redisDo(sock, "GET", "k"); err != nil || got != "$-1" {
		t.Fatalf("GET after a restart: %q %v; want no key", got, err)
	}
	if got := Redis(t); got == r.URL() || !strings.HasPrefix(got, "unix://") {
		t.Errorf("Redis(t) = %q: want a server of its own", got)
	}
}
