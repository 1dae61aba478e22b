package models

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Of instances claiming one queued call at once, exactly one gets it, and
// the history's writes leave the claim alone.
func TestClaimCallOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		for i := range 20 {
			id := fmt.Sprintf("q%02d", i)
			if err := store.SaveCalls(ctx, []*Call{{ID: id, Tool: "t", Status: StatusQueued, CreatedAt: now}}); err != nil {
				t.Fatal(err)
			}
			var won atomic.Int32
			var winner atomic.Value
			var wg sync.WaitGroup
			for o := range 4 {
				wg.Go(func() {
					owner := fmt.Sprintf("inst-%d#run", o)
					ok, err := store.ClaimCall(ctx, id, owner, now.Add(time.Minute), `{"status":"running"}`)
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
						winner.Store(owner)
					}
				})
			}
			wg.Wait()
			if won.Load() != 1 {
				t.Fatalf("call %s claimed %d times", id, won.Load())
			}
			// The history's upsert and gorm's Save keep the claim.
			rec, err := store.CallByID(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			rec.Attempts = 1
			if err := store.SaveCalls(ctx, []*Call{rec}); err != nil {
				t.Fatal(err)
			}
			if err := store.SaveCall(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if rec, _ = store.CallByID(ctx, id); rec.Status != StatusRunning || rec.ClaimedBy != winner.Load() || rec.LeaseUntil == nil {
				t.Fatalf("after the history's writes: %+v", rec)
			}
		}
		if ok, _ := store.ClaimCall(ctx, "q00", "late#run", now.Add(time.Minute), "{}"); ok {
			t.Error("a running call was claimed again")
		}
	})
}

// A lapsed claim is taken over: a call whose tool had not started is
// queued again with its approval back, one that had started is ended;
// a live claim is left alone unless it is an earlier run's of this
// instance, or every claim is void (SQLite at start).
func TestTakeOverCalls(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		calls := []struct {
			id, owner string
			lease     time.Duration
			started   bool
		}{
			{"unstarted", "a#1", -time.Second, false},
			{"started", "a#1", -time.Second, true},
			{"live", "b#1", time.Minute, true},
			{"restarted", "c#old", time.Minute, false},
		}
		for i, c := range calls {
			if err := store.SaveCalls(ctx, []*Call{{ID: c.id, Tool: "t", Status: StatusQueued, CreatedAt: now.Add(time.Duration(i) * time.Millisecond)}}); err != nil {
				t.Fatal(err)
			}
			if ok, err := store.ClaimCall(ctx, c.id, c.owner, now.Add(c.lease), "{}"); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if c.started {
				if ok, err := store.StartCall(ctx, c.id, c.owner, now); err != nil || !ok {
					t.Fatal(ok, err)
				}
			}
		}
		if ok, _ := store.StartCall(ctx, "unstarted", "b#1", now); ok {
			t.Error("a call was started by an instance that does not hold it")
		}
		if err := store.SaveCalls(ctx, []*Call{{ID: "waiting", Tool: "t", Status: StatusQueued, CreatedAt: now.Add(time.Second)}}); err != nil {
			t.Fatal(err)
		}
		a := &Approval{ID: "ap1", CallID: "unstarted", Status: ApprovalUsed, ExpiresAt: now.Add(time.Hour)}
		if err := store.DB().Create(a).Error; err != nil {
			t.Fatal(err)
		}
		decide := func(c *Call) Takeover {
			if c.StartedAt == nil {
				return Takeover{Requeue: true}
			}
			return Takeover{Status: StatusInterrupted, ErrorCode: CodeInternal, Result: `{"status":"interrupted"}`}
		}
		ids := func(cs []Call) (out []string) {
			for _, c := range cs {
				out = append(out, c.ID)
			}
			return out
		}
		queued, ended, err := store.TakeOverCalls(ctx, Void{Now: now, Run: "c#", Limit: 100}, decide)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(ids(queued), ids(ended)); got != "[unstarted restarted waiting] [started]" {
			t.Fatalf("taken over (queued, ended): %s", got)
		}
		for id, want := range map[string]string{"unstarted": StatusQueued, "started": StatusInterrupted, "live": StatusRunning, "restarted": StatusQueued} {
			rec, _ := store.CallByID(ctx, id)
			if rec.Status != want {
				t.Errorf("%s is %s, want %s", id, rec.Status, want)
			}
			if want == StatusQueued && (rec.ClaimedBy != "" || rec.StartedAt != nil) {
				t.Errorf("%s queued again keeps its claim: %+v", id, rec)
			}
		}
		if a, _ := store.ApprovalByID(ctx, "ap1"); a.Status != ApprovalApproved {
			t.Errorf("the approval of a call queued again is %s", a.Status)
		}
		if _, ended, _ := store.TakeOverCalls(ctx, Void{Now: now, Limit: 100}, decide); len(ended) != 0 {
			t.Errorf("ended twice: %v", ids(ended))
		}
		if _, ended, _ := store.TakeOverCalls(ctx, Void{Now: now, All: true, Limit: 100}, decide); fmt.Sprint(ids(ended)) != "[live]" {
			t.Errorf("every claim void: ended %v", ids(ended))
		}
	})
}

// Instances taking over at once take each lapsed call once.
func TestTakeOverCallsConcurrently(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		const n = 60
		for i := range n {
			id := fmt.Sprintf("r%02d", i)
			if err := store.SaveCalls(ctx, []*Call{{ID: id, Tool: "t", Status: StatusQueued, CreatedAt: now.Add(time.Duration(i) * time.Millisecond)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.ClaimCall(ctx, id, "dead#1", now.Add(-time.Second), "{}"); err != nil {
				t.Fatal(err)
			}
			if _, err := store.StartCall(ctx, id, "dead#1", now); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					_, ended, err := store.TakeOverCalls(ctx, Void{Now: now, Limit: 7}, func(*Call) Takeover {
						return Takeover{Status: StatusInterrupted, Result: "{}"}
					})
					if err != nil {
						t.Error(err)
						return
					}
					if len(ended) == 0 {
						return
					}
					mu.Lock()
					for _, c := range ended {
						seen[c.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != n {
			t.Errorf("%d of %d calls taken over", len(seen), n)
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("%s taken over %d times", id, k)
			}
		}
	})
}

// A cancel is requested of a running call only; a queued call is ended
// only while it is queued.
func TestCancelClaims(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		if err := store.SaveCalls(ctx, []*Call{{ID: "c1", Tool: "t", Status: StatusQueued, CreatedAt: now}, {ID: "c2", Tool: "t", Status: StatusQueued, CreatedAt: now}}); err != nil {
			t.Fatal(err)
		}
		if ok, _ := store.RequestCancel(ctx, "c1"); ok {
			t.Error("a cancel was requested of a queued call")
		}
		end := &Call{ID: "c1", Status: StatusFailed, ErrorCode: CodeCancelled, Result: "{}", FinishedAt: &now}
		if ok, err := store.EndCallIf(ctx, end, StatusQueued); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if ok, _ := store.ClaimCall(ctx, "c1", "a#1", now.Add(time.Minute), "{}"); ok {
			t.Error("a cancelled call was claimed")
		}
		if ok, _ := store.ClaimCall(ctx, "c2", "a#1", now.Add(time.Minute), "{}"); !ok {
			t.Fatal("not claimed")
		}
		end.ID = "c2"
		if ok, _ := store.EndCallIf(ctx, end, StatusQueued); ok {
			t.Error("a claimed call was ended as if queued")
		}
		if ok, err := store.RequestCancel(ctx, "c2"); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if yes, err := store.CancelRequested(ctx, "c2"); err != nil || !yes {
			t.Error("the cancel was not recorded", err)
		}
		if n, err := store.RenewClaims(ctx, "a#1", now.Add(time.Hour)); err != nil || n != 1 {
			t.Errorf("renewed %d claims, %v", n, err)
		}
	})
}

// One run at a time holds a delivery; a lapsed claim passes to another.
func TestClaimCallback(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		if err := store.CreateCallback(ctx, &Callback{CallID: "cb1", URL: "https://x", State: CallbackWaiting, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if ok, _ := store.ClaimCallback(ctx, "cb1", "a#1", now, now.Add(time.Minute)); ok {
			t.Error("a waiting delivery was claimed")
		}
		if ok, _ := store.CallbackDue(ctx, "cb1", "{}", now); !ok {
			t.Fatal("not due")
		}
		for _, tc := range []struct {
			owner string
			at    time.Time
			want  bool
		}{
			{"a#1", now, true},
			{"b#1", now, false},
			{"a#1", now, true}, // extended
			{"b#1", now.Add(2 * time.Minute), true},
			{"a#1", now.Add(2 * time.Minute), false},
		} {
			if ok, err := store.ClaimCallback(ctx, "cb1", tc.owner, tc.at, tc.at.Add(time.Minute)); err != nil || ok != tc.want {
				t.Errorf("%s at %s: %v %v, want %v", tc.owner, tc.at.Sub(now), ok, err, tc.want)
			}
		}
	})
}

// A call released by its owner before its tool began is queued again with
// its approval back; one begun, or held by another, is not released.
func TestReleaseCall(t *testing.T) {
	eachStore(t, func(t *testing.T, store *Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		for _, id := range []string{"r1", "r2"} {
			if err := store.SaveCalls(ctx, []*Call{{ID: id, Tool: "t", Status: StatusQueued, CreatedAt: now}}); err != nil {
				t.Fatal(err)
			}
			if ok, _ := store.ClaimCall(ctx, id, "a#1", now.Add(time.Minute), "{}"); !ok {
				t.Fatal("not claimed")
			}
		}
		if err := store.DB().Create(&Approval{ID: "ap-r1", CallID: "r1", Status: ApprovalUsed, ExpiresAt: now.Add(time.Hour)}).Error; err != nil {
			t.Fatal(err)
		}
		if ok, _ := store.StartCall(ctx, "r2", "a#1", now); !ok {
			t.Fatal("not started")
		}
		if ok, _ := store.ReleaseCall(ctx, "r1", "b#1"); ok {
			t.Error("released by an instance that does not hold it")
		}
		if ok, _ := store.ReleaseCall(ctx, "r2", "a#1"); ok {
			t.Error("a call whose tool began was released")
		}
		if ok, err := store.ReleaseCall(ctx, "r1", "a#1"); err != nil || !ok {
			t.Fatal(ok, err)
		}
		rec, _ := store.CallByID(ctx, "r1")
		a, _ := store.ApprovalByID(ctx, "ap-r1")
		if rec.Status != StatusQueued || rec.ClaimedBy != "" || a.Status != ApprovalApproved {
			t.Errorf("released: call %s by %q, approval %s", rec.Status, rec.ClaimedBy, a.Status)
		}
	})
}
