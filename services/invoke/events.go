package invoke

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"toolbelt/models"
	"toolbelt/services/cluster"
)

// Event is one thing that happened to a call: a status change, progress a
// tool emitted, or the final result.
type Event struct {
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
}

// listenerKey carries a listener of the events of calls made with a
// context.
type listenerKey struct{}

// WithListener returns ctx whose calls also tell fn of the events their
// tools emit while they run (progress): what a caller following its own
// synchronous call (an MCP client that sent a progress token) passes on.
func WithListener(ctx context.Context, fn func(event string, data any)) context.Context {
	return context.WithValue(ctx, listenerKey{}, fn)
}

func listenerOf(ctx context.Context) func(event string, data any) {
	fn, _ := ctx.Value(listenerKey{}).(func(event string, data any))
	return fn
}

// broker fans a call's events out to its subscribers (Server-Sent Events
// clients). Events are not stored: a late subscriber starts from the
// call's current record.
type broker struct {
	mu   sync.Mutex
	subs map[string]map[chan Event]struct{}
	// listening counts subscriptions: with none (nearly always), every
	// call's events cost one atomic load.
	listening atomic.Int64
}

func newBroker() *broker { return &broker{subs: map[string]map[chan Event]struct{}{}} }

func (b *broker) subscribe(id string) (chan Event, func()) {
	ch := make(chan Event, 64)
	b.mu.Lock()
	if b.subs[id] == nil {
		b.subs[id] = map[chan Event]struct{}{}
	}
	b.subs[id][ch] = struct{}{}
	b.listening.Add(1)
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		if _, ok := b.subs[id][ch]; ok {
			b.listening.Add(-1)
		}
		delete(b.subs[id], ch)
		if len(b.subs[id]) == 0 {
			delete(b.subs, id)
		}
		b.mu.Unlock()
	}
}

// publish delivers an event to every subscriber of a call; a subscriber
// too slow to keep up misses it rather than holding the call back.
func (b *broker) publish(id, name string, data any) {
	if b.listening.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs[id]) == 0 {
		return
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return
	}
	for ch := range b.subs[id] {
		select {
		case ch <- Event{Name: name, Data: raw}:
		default:
		}
	}
}

// Events subscribes to a call's events. It returns the call as it is now
// (if it already ended, there is nothing more to wait for) and a channel
// of what happens next; stop ends the subscription.
//
// Among several instances the call may run on another: the others are
// asked to send its events here (topicWatch; whoever runs it, now or once
// it claims it, does), and the record is read every recheck, so that the
// end is seen even if its message is lost or its instance died.
func (inv *Invoker) Events(ctx context.Context, caller *models.Principal, id string) (*models.Call, <-chan Event, func(), error) {
	ch, stop := inv.recording.events.subscribe(id)
	rec, err := inv.CallRecord(ctx, caller, id)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	if inv.cluster.bus == nil || models.Terminal(rec.Status) {
		return rec, ch, stop, nil
	}
	inv.cluster.bus.SendMessage(ctx, topicWatch, id)
	done := make(chan struct{})
	inv.flight.bg.help(func() { inv.recheck(id, ch, done) })
	var once sync.Once
	return rec, ch, func() {
		once.Do(func() {
			close(done)
			stop()
			inv.cluster.bus.SendMessage(context.Background(), topicUnwatch, id)
		})
	}, nil
}

// recheckEvery is how often a stream of a call another instance may run
// reads the call's record.
const recheckEvery = time.Second

// recheck reads a streamed call's record every recheckEvery until done,
// and sends its end to ch once it is recorded.
func (inv *Invoker) recheck(id string, ch chan Event, done <-chan struct{}) {
	t := time.NewTicker(recheckEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-inv.flight.bg.ctx.Done():
			return
		case <-t.C:
		}
		rec, err := inv.store.CallByID(inv.flight.bg.ctx, id)
		if err != nil || !models.Terminal(rec.Status) {
			continue
		}
		status, _ := json.Marshal(statusEvent{rec.Status})
		for _, ev := range []Event{{Name: "status", Data: status}, {Name: "result", Data: json.RawMessage(rec.Result)}} {
			select {
			case ch <- ev:
			default:
			}
		}
		return
	}
}

// publish delivers a call's event to its subscribers here and, when
// another instance streams the call, to that instance.
func (inv *Invoker) publish(id, name string, data any) {
	inv.recording.events.publish(id, name, data)
	if !inv.cluster.watches.has(id) {
		return
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return
	}
	body := id + " " + name + " "
	if len(body)+len(raw) <= cluster.MaxBody {
		body += string(raw)
	} // else sent without data: a result is read from the record, progress is dropped
	inv.cluster.bus.SendMessage(context.Background(), topicEvent, body)
}

// heardEvent publishes here an event another instance sent ("id name
// data"): a result too large to send is read from the record.
func (inv *Invoker) heardEvent(body string) {
	id, rest, _ := strings.Cut(body, " ")
	name, data, _ := strings.Cut(rest, " ")
	if data != "" {
		inv.recording.events.publish(id, name, json.RawMessage(data))
		return
	}
	if name != "result" {
		return
	}
	inv.flight.bg.help(func() {
		ctx, cancel := context.WithTimeout(inv.flight.bg.ctx, 5*time.Second)
		defer cancel()
		if rec, err := inv.recording.calls.byID(ctx, id); err == nil && models.Terminal(rec.Status) {
			inv.recording.events.publish(id, name, json.RawMessage(rec.Result))
		}
	})
}

// watches counts, per call, the streams other instances hold of it.
type watches struct {
	mu sync.Mutex
	n  map[string]*watch
	// any says whether there is a watch at all: with none (nearly
	// always), a call's events cost one atomic load here.
	any atomic.Bool
}

type watch struct {
	n     int
	until time.Time
}

// watchTTL bounds how long a watch is kept whose end was not heard.
const watchTTL = time.Hour

func (w *watches) add(id string, d int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]*watch{}
	}
	x := w.n[id]
	if x == nil {
		x = &watch{}
		w.n[id] = x
	}
	x.n += d
	x.until = time.Now().Add(watchTTL)
	if x.n <= 0 {
		delete(w.n, id)
	}
	w.any.Store(len(w.n) > 0)
}

func (w *watches) has(id string) bool {
	if !w.any.Load() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[id] != nil
}

// prune drops the watches past their time.
func (w *watches) prune(now time.Time) {
	if !w.any.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, x := range w.n {
		if now.After(x.until) {
			delete(w.n, id)
		}
	}
	w.any.Store(len(w.n) > 0)
}

// Streamed reports whether another instance streams the events of call
// id, so this one sends them there.
func (inv *Invoker) Streamed(id string) bool { return inv.cluster.watches.has(id) }
