package dbtest

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// Each test database is its own: a table made in one is not in the other,
// and the server runs as the unprivileged user when the tests are root.
func TestPostgresDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	connect := func(url string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	a, b := connect(Postgres(t)), connect(Postgres(t))
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the other database sees the table: %d, %v", n, err)
	}
	if os.Geteuid() == 0 {
		var data string
		if err := a.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&data); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(data)
		if err != nil {
			t.Fatal(err)
		}
		u, err := user.Lookup(User)
		if err != nil {
			t.Fatal(err)
		}
		if uid := strconv.FormatUint(uint64(info.Sys().(*syscall.Stat_t).Uid), 10); uid != u.Uid {
			t.Fatalf("the data directory belongs to uid %s, want %s's %s", uid, User, u.Uid)
		}
	}
	// No TCP port: only the socket in the server's directory reaches it.
	var listen string
	if err := a.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen); err != nil || listen != "" {
		t.Fatalf("listen_addresses = %q, %v; want none", listen, err)
	}
}

// A Redis server answers over its socket and is gone after its test.
func TestRedisServes(t *testing.T) {
	var sock string
	t.Run("serve", func(t *testing.T) {
		url := Redis(t)
		sock = strings.TrimPrefix(url, "unix://")
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(conn)
		for _, c := range []struct{ send, want string }{
			{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", "+OK\r\n"},
			{"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "$1\r\n"},
		} {
			if _, err := conn.Write([]byte(c.send)); err != nil {
				t.Fatal(err)
			}
			if line, err := r.ReadString('\n'); err != nil || line != c.want {
				t.Fatalf("%q answered %q, %v; want %q", c.send, line, err, c.want)
			}
		}
	})
	if sock == "" {
		return // skipped
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is left after the test: %v", err)
	}
}
