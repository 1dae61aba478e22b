package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/invoke"
	"toolbelt/services/netpolicy"
	"toolbelt/services/tooldef"
)

// origin is the service an http tool calls, which counts on the host
// how many of its calls are inside at once and the order they came in;
// each stays until released, oldest first.
type origin struct {
	mu           sync.Mutex
	inside, peak int
	order        []int
	release      map[int]chan struct{}
	arrived      chan int
}

func newUpstream() *origin {
	return &origin{release: map[int]chan struct{}{}, arrived: make(chan int, 64)}
}

func (u *origin) gate(n int) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch, ok := u.release[n]
	if !ok {
		ch = make(chan struct{})
		u.release[n] = ch
	}
	return ch
}

func (u *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	u.mu.Lock()
	u.inside++
	u.peak = max(u.peak, u.inside)
	u.order = append(u.order, n)
	u.mu.Unlock()
	u.arrived <- n
	select {
	case <-u.gate(n):
	case <-r.Context().Done():
	}
	u.mu.Lock()
	u.inside--
	u.mu.Unlock()
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// clusterGauge is the value of gauge name for category on a's /metrics.
func clusterGauge(t *testing.T, a *App, name, category string) float64 {
	t.Helper()
	families, err := a.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				if labelOf(m, "category") == category {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// slowPageCluster starts instances over one Postgres (and Redis, when
// redis) with the configuration edit makes, and registers slow_page, a
// browser tool whose calls the returned origin holds; admin is the first
// principal. No instance dies, so the queues' leases are long: a machine
// that pauses past the 3 s of cluster.QueueLease must not let a held slot
// or a place in line lapse and reorder the line the test checks.
func slowPageCluster(t *testing.T, redis bool, edit func(*Config), names ...string) (up *origin, apps []*running, admin *models.Principal) {
	t.Helper()
	up = newUpstream()
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	db, redisURL := dbtest.Postgres(t), ""
	if redis {
		redisURL = dbtest.Redis(t)
	}
	apps = startInstancesOpts(t, Options{QueueLease: time.Hour}, func(cfg *Config) {
		cfg.DatabaseURL, cfg.RedisURL = db, redisURL
		cfg.NetPolicy = netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
		edit(cfg)
	}, names...)
	ctx := context.Background()
	def := tooldef.Definition{
		Name: "slow_page", Version: "1.0.0", Description: "Fetch a numbered page and wait for it. Input: n. Output: the page.",
		Category:   "browser",
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Execution:  tooldef.Execution{Timeout: 60_000},
		Runner:     tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: srv.URL + "/run?n={{n}}"},
	}
	if _, err := apps[0].Registry.Register(ctx, def, nil); err != nil {
		t.Fatal(err)
	}
	admin, err := apps[0].Store.PrincipalByID(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	return up, apps, admin
}

// A category's limit holds in the cluster: background calls of a tool
// whose category allows 3 at once, made one after the other on three
// instances (over Redis, or Postgres alone), reach the service the tool
// calls at most 3 at a time, in the order they were made; /metrics on
// every instance counts the cluster's waiters; a waiter cancelled through
// another instance than its own leaves the queue at once, and the calls
// behind it still run, every one.
func TestClusterQueuesAreOne(t *testing.T) {
	for _, redis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "postgres"}[redis], func(t *testing.T) {
			up, apps, admin := slowPageCluster(t, redis, func(*Config) {}, "a", "b", "c")
			ctx := context.Background()
			limit := invoke.DefaultQueueLimits()["browser"]
			const calls, cancelled = 7, 4
			ids := make([]string, calls)
			for i := range calls {
				on := apps[i%len(apps)]
				res, err := on.Invoker.CallAcknowledged(ctx, admin, invoke.CallRequest{Tool: "slow_page", SessionID: "q",
					Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Async: true})
				if err != nil || res.CallID == "" {
					t.Fatalf("call %d: %+v %v", i, res, err)
				}
				ids[i] = res.CallID
				if i < limit {
					if got := <-up.arrived; got != i {
						t.Fatalf("call %d came in as %d", i, got)
					}
					continue
				}
				// Counted as waiting in the cluster, seen from another instance.
				other := apps[(i+1)%len(apps)].App
				poll.True(t, 30*time.Second, fmt.Sprintf("%d waiting", i+1-limit), func() bool {
					return clusterGauge(t, other, "toolbelt_queue_cluster_waiting", "browser") == float64(i+1-limit)
				})
			}
			for _, a := range apps {
				if r := clusterGauge(t, a.App, "toolbelt_queue_cluster_running", "browser"); r != float64(limit) {
					t.Errorf("instance %s counts %v running", a.Config.Instance, r)
				}
			}
			// Call 4 waits on b; it is cancelled through c.
			if err := apps[2].Invoker.Cancel(ctx, admin, ids[cancelled]); err != nil {
				t.Fatal(err)
			}
			poll.True(t, 30*time.Second, "the cancelled waiter gone", func() bool {
				return clusterGauge(t, apps[0].App, "toolbelt_queue_cluster_waiting", "browser") == float64(calls-limit-1)
			})
			// The oldest leaves; the next in line comes in, one at a time.
			pending := []int{3, 5, 6}
			for _, n := range []int{0, 1, 2, 3, 5, 6} {
				close(up.gate(n))
				if len(pending) > 0 {
					if got := <-up.arrived; got != pending[0] {
						t.Fatalf("call %d came in after %d left; want %d", got, n, pending[0])
					}
					pending = pending[1:]
				}
			}
			for i, id := range ids {
				poll.True(t, 30*time.Second, "call "+strconv.Itoa(i)+" ended", func() bool {
					rec, err := apps[0].Store.CallByID(ctx, id)
					return err == nil && (rec.Status == models.StatusSucceeded || rec.Status == models.StatusFailed)
				})
				rec, _ := apps[1].Store.CallByID(ctx, id)
				if want := map[bool]string{true: models.StatusFailed, false: models.StatusSucceeded}[i == cancelled]; rec.Status != want ||
					(i == cancelled && rec.ErrorCode != models.CodeCancelled) {
					t.Errorf("call %d: %s %s; want %s", i, rec.Status, rec.ErrorCode, want)
				}
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			want := []int{0, 1, 2, 3, 5, 6}
			if up.peak != limit || !slices.Equal(up.order, want) {
				t.Errorf("at most %d inside at once (limit %d), in the order %v; want %v", up.peak, limit, up.order, want)
			}
		})
	}
}

// Fairness and the caller's own waiting bound hold in the cluster: a
// flood principal's async calls on instance a fill the browser category
// (3 running, 3 waiting: its bound), its next one is refused QUEUE_FULL
// at submission; a victim principal's call on instance b, made after
// them all, runs at the first free slot, before the flood's waiters.
func TestClusterQueuesAreFair(t *testing.T) {
	for _, redis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "postgres"}[redis], func(t *testing.T) {
			const bound = 3
			up, apps, flood := slowPageCluster(t, redis, func(cfg *Config) { cfg.QueueWaitingEach = bound }, "a", "b")
			ctx := context.Background()
			made, err := apps[0].Accounts.CreatePrincipal(ctx, access.NewPrincipal{Name: "victim", Role: access.RoleAdmin}, nil)
			if err != nil {
				t.Fatal(err)
			}
			victim, err := apps[1].Store.PrincipalByID(ctx, made.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Whatever the test finds, every call held is let go at its end.
			defer func() {
				for _, n := range append(slices.Collect(func(yield func(int) bool) {
					for n := range 2*bound + 1 {
						yield(n)
					}
				}), 100) {
					select {
					case <-up.gate(n):
					default:
						close(up.gate(n))
					}
				}
			}()
			limit := invoke.DefaultQueueLimits()["browser"]
			for i := 0; i <= limit+bound; i++ {
				res, err := apps[0].Invoker.CallAcknowledged(ctx, flood, invoke.CallRequest{Tool: "slow_page", SessionID: "flood",
					Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Async: true})
				if err != nil {
					t.Fatal(err)
				}
				if i == limit+bound {
					if res.Error == nil || res.Error.Code != models.CodeQueueFull || res.Error.RetryAfter == 0 {
						t.Fatalf("the flood's call past its bound of %d: %+v", bound, res)
					}
					break
				}
				if res.Status != models.StatusQueued {
					t.Fatalf("flood call %d: %+v", i, res)
				}
				if i < limit {
					<-up.arrived
				}
			}
			waiting := func(n float64) func() bool {
				return func() bool { return clusterGauge(t, apps[1].App, "toolbelt_queue_cluster_waiting", "browser") == n }
			}
			poll.True(t, 30*time.Second, "the flood's calls waiting", waiting(bound))
			answered := make(chan invoke.ToolResult, 1)
			go func() {
				answered <- apps[1].Invoker.Call(ctx, victim, invoke.CallRequest{Tool: "slow_page", SessionID: "victim",
					Arguments: json.RawMessage(`{"n":100}`)})
			}()
			poll.True(t, 30*time.Second, "the victim's call waiting", waiting(bound+1))
			close(up.gate(0))
			if next := <-up.arrived; next != 100 {
				t.Fatalf("the first free slot went to the flood's call %d; want the victim's", next)
			}
			close(up.gate(100))
			if res := <-answered; !res.Success {
				t.Errorf("the victim's call: %+v", res)
			}
		})
	}
}
