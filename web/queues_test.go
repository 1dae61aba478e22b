package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"toolbelt/app"
	"toolbelt/internal/poll"
	"toolbelt/services/netpolicy"
)

// gatedOrigin is the service a slow tool calls: each call, numbered n,
// is announced when it comes in and held until released.
type gatedOrigin struct {
	mu      sync.Mutex
	gates   map[string]chan struct{}
	open    bool // released all: calls pass
	arrived chan string
}

func (o *gatedOrigin) gate(n string) chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gates[n] == nil {
		o.gates[n] = make(chan struct{})
		if o.open {
			close(o.gates[n])
		}
	}
	return o.gates[n]
}

// releaseAll lets every call held go (at the test's end, whatever it
// found).
func (o *gatedOrigin) releaseAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for n, ch := range o.gates {
		select {
		case <-ch:
		default:
			close(ch)
		}
		o.gates[n] = ch
	}
	o.open = true
}

func (o *gatedOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := r.URL.Query().Get("n")
	o.arrived <- n
	select {
	case <-o.gate(n):
	case <-r.Context().Done():
	}
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// A flood agent fills the code category with async calls: past its own
// waiting bound (6 here) its next async call is refused at submission,
// 429 QUEUE_FULL with Retry-After, not accepted and dropped later; the
// victim agent's sync call, made after all of the flood's, runs at the
// first free slot, before the flood's waiting calls.
func TestAsyncFloodAgainstAnotherAgent(t *testing.T) {
	origin := &gatedOrigin{gates: map[string]chan struct{}{}, arrived: make(chan string, 64)}
	srv := httptest.NewServer(origin)
	defer srv.Close()
	defer origin.releaseAll()
	ta := newTestAppWith(t, hostCaps{Sandbox: true}, netpolicy.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		func(cfg *app.Config) { cfg.QueueWaitingEach = 6 })
	def := toolDef("slow_code", func(m map[string]any) {
		m["description"] = "Run a numbered job and wait for it. Input: n. Output: the job's answer."
		m["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "string"}}, "required": []any{"n"}}
		m["security"] = map[string]any{"level": "safe"}
		m["execution"] = map[string]any{"timeout": 60000}
		m["runner"] = map[string]any{"kind": "http", "method": "GET", "url": srv.URL + "/run?n={{n}}"}
	})
	if r := ta.do(t, "admin", "POST", "/api/v1/tools", def); r.Status != 201 {
		t.Fatal(string(r.Body))
	}
	victim := strconv.FormatUint(uint64(ta.ids["agent"]), 10)
	if r := ta.do(t, "admin", "PUT", "/api/v1/principals/"+victim+"/grants", map[string]any{"tools": []string{"slow_code"}}); r.Status != 200 {
		t.Fatal(string(r.Body))
	}
	const limit, bound = 4, 6 // the code category's slots; the flood's waiting bound
	var accepted []string
	for i := 0; ; i++ {
		r := ta.do(t, "admin", "POST", "/api/v1/calls", map[string]any{"tool": "slow_code", "arguments": map[string]any{"n": fmt.Sprint("f", i)}, "async": true})
		if r.Status == 202 {
			accepted = append(accepted, fmt.Sprint("f", i))
			if i < limit {
				if got := <-origin.arrived; got != fmt.Sprint("f", i) {
					t.Fatalf("call f%d came in as %s", i, got)
				}
			}
			if i > limit+bound {
				t.Fatalf("%d async calls of one agent accepted: its waiting bound of %d is not applied at submission", len(accepted), bound)
			}
			continue
		}
		res := r.JSON(t)
		if r.Status != 429 || errCode(res) != "QUEUE_FULL" || r.Header.Get("Retry-After") == "" || i != limit+bound {
			t.Fatalf("flood call %d: %d %v %v", i, r.Status, r.Header.Get("Retry-After"), res)
		}
		break
	}
	waiting := func(n float64) func() bool {
		return func() bool { return gaugeOf(t, ta, "toolbelt_queue_waiting", "code") == n }
	}
	poll.True(t, 20*time.Second, "the flood's calls waiting", waiting(bound))
	victimAnswer := make(chan response, 1)
	go func() {
		victimAnswer <- ta.do(t, "agent", "POST", "/api/v1/calls", map[string]any{"tool": "slow_code", "arguments": map[string]any{"n": "victim"}})
	}()
	poll.True(t, 20*time.Second, "the victim's call waiting", waiting(bound+1))
	start := time.Now()
	close(origin.gate("f0"))
	next := <-origin.arrived
	t.Logf("at the first free slot %s ran; the victim waited behind %d of the flood's calls", next, map[bool]int{true: 0, false: bound}[next == "victim"])
	if next != "victim" {
		t.Fatalf("the first free slot went to %s; want the victim's call (made after the flood's %d waiting calls)", next, bound)
	}
	origin.releaseAll()
	if r := <-victimAnswer; r.Status != 200 {
		t.Errorf("the victim's call: %d %s", r.Status, r.Body)
	}
	t.Logf("the victim's call answered %s after the first slot freed", time.Since(start).Round(time.Millisecond))
}

// gaugeOf is the value of the gauge name for category in ta's metrics.
func gaugeOf(t *testing.T, ta *testApp, name, category string) float64 {
	t.Helper()
	families, err := ta.app.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "category" && l.GetValue() == category {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
