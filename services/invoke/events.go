package invoke

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"toolbelt/models"
)

// Event is one thing that happened to a call: a status change, progress a
// tool emitted, or the final result.
type Event struct {
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
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
func (inv *Invoker) Events(ctx context.Context, caller *models.Principal, id string) (*models.Call, <-chan Event, func(), error) {
	ch, stop := inv.events.subscribe(id)
	rec, err := inv.CallRecord(ctx, caller, id)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return rec, ch, stop, nil
}
