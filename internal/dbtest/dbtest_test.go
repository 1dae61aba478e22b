package dbtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
		u, err := user.Lookup(engineUser())
		if err != nil {
			t.Fatal(err)
		}
		if uid := strconv.FormatUint(uint64(info.Sys().(*syscall.Stat_t).Uid), 10); uid != u.Uid {
			t.Fatalf("the data directory belongs to uid %s, want %s's %s", uid, engineUser(), u.Uid)
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

// A test's own server survives a fast restart and a kill: what was
// committed is there after each.
func TestPostgresServerRestarts(t *testing.T) {
	s := PostgresServer(t)
	url := s.Database(t, "faults")
	ctx := context.Background()
	exec := func(q string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, q)
		return err
	}
	if err := exec("CREATE TABLE t (n int)"); err != nil {
		t.Fatal(err)
	}
	for i, fault := range []func() error{s.Restart, func() error { s.Kill(); return s.Start() }} {
		if err := exec(fmt.Sprintf("INSERT INTO t VALUES (%d)", i)); err != nil {
			t.Fatal(err)
		}
		if err := fault(); err != nil {
			t.Fatalf("fault %d: %v\n%s", i, err, s.Log())
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after restart and kill: %d (%v), want 2", n, err)
	}
}

// Test processes that find the engines' account missing make it once:
// the others wait on the lock and then find it. Goroutines stand for the
// processes (each opens the lock file itself, as a process does); the
// fake useradd refuses a name that exists, as the real one does.
func TestEnsureUserMakesItOnce(t *testing.T) {
	var mu sync.Mutex
	users := map[string]*user.User{}
	lookup := func(name string) (*user.User, error) {
		mu.Lock()
		defer mu.Unlock()
		if u, ok := users[name]; ok {
			return u, nil
		}
		return nil, user.UnknownUserError(name)
	}
	var adds atomic.Int32
	var gotArgs []string
	add := func(args []string) error {
		adds.Add(1)
		time.Sleep(50 * time.Millisecond) // a slow useradd: the others are waiting meanwhile
		mu.Lock()
		defer mu.Unlock()
		name := args[len(args)-1]
		if _, ok := users[name]; ok {
			return fmt.Errorf("useradd: user '%s' already exists", name)
		}
		gotArgs = args
		users[name] = &user.User{Username: name, Uid: "990", Gid: "990"}
		return nil
	}
	lock := filepath.Join(t.TempDir(), "lock")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			u, err := ensureUser("tb-engines", lock, lookup, add)
			if err == nil && u.Uid != "990" {
				err = fmt.Errorf("got uid %s", u.Uid)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := adds.Load(); n != 1 {
		t.Errorf("useradd ran %d times, want once", n)
	}
	want := "useradd --system --user-group --no-create-home --shell /usr/sbin/nologin tb-engines"
	if got := strings.Join(gotArgs, " "); got != want {
		t.Errorf("useradd command %q, want %q (as .ci/run makes it)", got, want)
	}
	// A useradd that fails because another process made the user meanwhile
	// (one that locked another file) is no failure.
	u, err := ensureUser("tb-raced", lock, lookup, func([]string) error {
		mu.Lock()
		defer mu.Unlock()
		users["tb-raced"] = &user.User{Username: "tb-raced", Uid: "991"}
		return fmt.Errorf("useradd: user 'tb-raced' already exists")
	})
	if err != nil || u.Uid != "991" {
		t.Errorf("user made by another process: %v, %v", u, err)
	}
	// A useradd that fails is reported with the name.
	_, err = ensureUser("tb-other", lock, lookup, func([]string) error { return fmt.Errorf("no permission") })
	if err == nil || !strings.Contains(err.Error(), "tb-other") || !strings.Contains(err.Error(), "no permission") {
		t.Errorf("failed useradd: %v", err)
	}
}
