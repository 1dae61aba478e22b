package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAuditedInTheChangesTransaction: an entry is written with the change
// and the actor the context carries; a change that fails writes neither.
func TestAuditedInTheChangesTransaction(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		admin := &Principal{ID: 7, Name: "alice", Role: "admin"}
		ctx := WithActor(context.Background(), Actor{Principal: admin, KeyID: 9, KeyLabel: "laptop", Via: ViaAPI, ClientIP: "203.0.113.7", RequestID: "r1"})
		p := &Principal{Name: "bot", Role: "agent"}
		err := s.Audited(ctx, AuditPrincipalCreate, func(tx *Store) (string, string, error) {
			return fmt.Sprintf("principal:%d", p.ID+1), "bot", tx.CreatePrincipal(ctx, p, &APIKey{Prefix: "tb_1", Hash: "h1"})
		})
		if err != nil {
			t.Fatal(err)
		}
		// The same name again fails inside: no principal, no entry.
		err = s.Audited(ctx, AuditPrincipalCreate, func(tx *Store) (string, string, error) {
			return "principal:x", "", tx.CreatePrincipal(ctx, &Principal{Name: "bot", Role: "agent"}, &APIKey{Prefix: "tb_2", Hash: "h2"})
		})
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("duplicate: %v, want a conflict", err)
		}
		// A change whose own write went through but whose fn then fails is
		// rolled back with it.
		err = s.Audited(ctx, AuditPrincipalCreate, func(tx *Store) (string, string, error) {
			if err := tx.CreatePrincipal(ctx, &Principal{Name: "ghost", Role: "agent"}, &APIKey{Prefix: "tb_3", Hash: "h3"}); err != nil {
				return "", "", err
			}
			return "", "", ErrInvalid.Errorf("changed my mind")
		})
		if !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
		if _, err := s.PrincipalByName(ctx, "ghost"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the failed change left its principal: %v", err)
		}
		got, more, err := s.AuditEntries(ctx, AuditFilter{})
		if err != nil || more || len(got) != 1 {
			t.Fatalf("entries %+v more %v err %v, want the one that succeeded", got, more, err)
		}
		e := got[0]
		if e.Actor != "alice" || e.ActorID != 7 || e.ActorRole != "admin" || e.Via != ViaAPI || e.KeyID != 9 || e.KeyLabel != "laptop" ||
			e.ClientIP != "203.0.113.7" || e.RequestID != "r1" || e.Action != AuditPrincipalCreate || e.Target != fmt.Sprintf("principal:%d", p.ID) || e.Detail != "bot" {
			t.Errorf("entry %+v", e)
		}
		if time.Since(e.At) > time.Minute || e.At.Location() != time.UTC {
			t.Errorf("at %v", e.At)
		}
		// Without an actor on the context, the server did it.
		if err := s.Audited(context.Background(), AuditToolRegister, func(*Store) (string, string, error) { return "tool:x", "", nil }); err != nil {
			t.Fatal(err)
		}
		got, _, _ = s.AuditEntries(ctx, AuditFilter{Action: AuditToolRegister})
		if len(got) != 1 || got[0].Actor != "system" || got[0].Via != ViaSystem || got[0].ActorID != 0 {
			t.Errorf("system entry %+v", got)
		}
	})
}

// TestAuditEntriesFilterAndPage: each filter selects exactly its entries,
// pages go newest first without gaps or repeats, the export reads past a
// page, values that are strange to SQL are only values, and pruning
// removes what is older than the cut.
func TestAuditEntriesFilterAndPage(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		var rows []AuditEntry
		for i := range 1203 {
			actor, action := "alice", AuditKeyIssue
			if i%3 == 0 {
				actor, action = "bob", AuditToolRetire
			}
			rows = append(rows, AuditEntry{At: base.Add(time.Duration(i) * time.Minute), Actor: actor, Via: ViaAPI,
				Action: action, Target: fmt.Sprintf("key:%d", i%10), Detail: "d"})
		}
		if err := s.db.CreateInBatches(rows, 200).Error; err != nil {
			t.Fatal(err)
		}
		count := func(f AuditFilter) int {
			n := 0
			if err := s.EachAuditEntry(ctx, f, func(AuditEntry) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			return n
		}
		for _, tc := range []struct {
			name string
			f    AuditFilter
			want int
		}{
			{"all", AuditFilter{}, 1203},
			{"actor", AuditFilter{Actor: "bob"}, 401},
			{"action", AuditFilter{Action: AuditKeyIssue}, 802},
			{"target", AuditFilter{Target: "key:3"}, 120},
			{"since", AuditFilter{Since: base.Add(1200 * time.Minute)}, 3},
			{"until", AuditFilter{Until: base.Add(10 * time.Minute)}, 10},
			{"range and actor", AuditFilter{Actor: "bob", Since: base, Until: base.Add(9 * time.Minute)}, 3},
			{"quote", AuditFilter{Actor: "x' OR '1'='1"}, 0},
			{"like wildcard", AuditFilter{Target: "key:%"}, 0},
		} {
			if got := count(tc.f); got != tc.want {
				t.Errorf("%s: %d entries, want %d", tc.name, got, tc.want)
			}
		}
		seen := map[uint]bool{}
		f := AuditFilter{Limit: 100}
		var last uint
		for pages := 0; ; pages++ {
			page, more, err := s.AuditEntries(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				if seen[e.ID] || (last != 0 && e.ID >= last) {
					t.Fatalf("entry %d out of order or repeated", e.ID)
				}
				seen[e.ID], last = true, e.ID
			}
			if !more {
				if pages != 12 {
					t.Errorf("%d pages of 100 for 1203 entries", pages+1)
				}
				break
			}
			f.After = page[len(page)-1].ID
		}
		if len(seen) != 1203 {
			t.Errorf("paged through %d entries", len(seen))
		}
		n, err := s.DeleteAuditEntriesBefore(ctx, base.Add(1000*time.Minute))
		if err != nil || n != 1000 {
			t.Errorf("pruned %d (%v), want 1000", n, err)
		}
		if got := count(AuditFilter{}); got != 203 {
			t.Errorf("%d left after pruning, want 203", got)
		}
	})
}

// TestAuditEntriesSorted: every order pages through the entries a filter
// matches exactly once, in the order a sort of all of them gives (the
// newest first within a value); an entry added between pages neither
// repeats nor shifts one; a page's last entry pruned meanwhile is a clear
// error; an unknown order is refused.
func TestAuditEntriesSorted(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		actors := []string{"carol", "alice", "bob", "alice", "dave"}
		var rows []AuditEntry
		for i := range 157 {
			rows = append(rows, AuditEntry{At: base.Add(time.Duration(i) * time.Minute), Actor: actors[i%len(actors)], Via: ViaAPI,
				Action: AuditActions[i%len(AuditActions)], Target: fmt.Sprintf("key:%d", i%7)})
		}
		if err := s.db.CreateInBatches(rows, 100).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.db.Order("id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, filter := range []AuditFilter{{}, {Actor: "alice"}} {
			for sort, col := range AuditSorts {
				var want []uint
				for _, e := range rows {
					if filter.Actor == "" || e.Actor == filter.Actor {
						want = append(want, e.ID)
					}
				}
				value := func(id uint) string {
					e := rows[slices.IndexFunc(rows, func(e AuditEntry) bool { return e.ID == id })]
					return map[string]string{"actor": e.Actor, "action": e.Action, "target": e.Target}[col]
				}
				slices.SortStableFunc(want, func(a, b uint) int {
					switch {
					case sort == "time":
						return cmp.Compare(a, b)
					case col == "":
						return cmp.Compare(b, a)
					}
					by := cmp.Compare(value(a), value(b))
					if strings.HasPrefix(sort, "-") {
						by = -by
					}
					return cmp.Or(by, cmp.Compare(b, a))
				})
				f := filter
				f.Sort, f.Limit = sort, 20
				var got []uint
				for {
					page, more, err := s.AuditEntries(ctx, f)
					if err != nil {
						t.Fatalf("%s: %v", sort, err)
					}
					for _, e := range page {
						got = append(got, e.ID)
					}
					if !more {
						break
					}
					f.After = page[len(page)-1].ID
				}
				if !slices.Equal(got, want) {
					t.Errorf("sort %s, actor %q: %d entries in the wrong order\n got %v\nwant %v", sort, filter.Actor, len(got), got, want)
				}
			}
		}
		// An entry added between pages does not move the next page.
		first, _, err := s.AuditEntries(ctx, AuditFilter{Sort: "actor", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.db.Create(&AuditEntry{At: base, Actor: "aaron", Via: ViaAPI, Action: AuditKeyIssue, Target: "key:1"}).Error; err != nil {
			t.Fatal(err)
		}
		next, _, err := s.AuditEntries(ctx, AuditFilter{Sort: "actor", Limit: 10, After: first[9].ID})
		if err != nil || len(next) == 0 || next[0].Actor == "aaron" || slices.ContainsFunc(next, func(e AuditEntry) bool { return e.ID == first[9].ID }) {
			t.Errorf("the page after an insert: %v %v", next, err)
		}
		if err := s.db.Where("id = ?", first[9].ID).Delete(&AuditEntry{}).Error; err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.AuditEntries(ctx, AuditFilter{Sort: "actor", After: first[9].ID}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no longer in the log") {
			t.Errorf("a pruned cursor: %v", err)
		}
		if _, _, err := s.AuditEntries(ctx, AuditFilter{Sort: "actor; DROP TABLE audit_log"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("an unknown order: %v", err)
		}
	})
}
