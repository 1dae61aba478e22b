// Package audit reads the audit log: who registered, published, rolled
// back or retired a tool, created, disabled or deleted a principal,
// issued or revoked a key, set grants, approved or denied a call — when
// and from where. Entries are written by the services making each change,
// through models.Store.Audited, in the change's own transaction; this
// package lists, exports and prunes them.
package audit

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"toolbelt/models"
)

// DefaultRetention is how long entries are kept unless configured.
const DefaultRetention = 365 * 24 * time.Hour

// MaxLimit is the largest page.
const MaxLimit = 500

// Log reads and prunes the audit log.
type Log struct {
	store     *models.Store
	retention time.Duration
	log       *slog.Logger
}

// New returns the audit log over store, pruning entries older than
// retention (0 keeps them all).
func New(store *models.Store, retention time.Duration, log *slog.Logger) *Log {
	return &Log{store: store, retention: retention, log: log}
}

// Query is a request for entries as a person or a client writes it; every
// field is optional. Times are RFC 3339, or a date and minute
// ("2026-12-01T17:30", UTC) as a browser's date-time field sends them, or
// a date.
type Query struct {
	Actor  string
	Action string
	Target string
	Since  string
	Until  string
	// Sort is the order: newest first (-time, the default), oldest first
	// (time), or by actor, action or target, A to Z or Z to A (-actor…).
	Sort   string
	Cursor string
	Limit  int
}

// Page is one page of entries in the order asked (newest first by
// default); NextCursor, when set, asks for the next in that order.
type Page struct {
	Entries    []models.AuditEntry `json:"entries"`
	NextCursor string              `json:"next_cursor,omitempty" example:"41"`
}

var (
	actorPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	targetPattern = regexp.MustCompile(`^[a-z_]{1,16}(:[!-~]{1,180})?$`)
)

// unknownAction says what the actions are, briefly: those of the
// subject action names ("key.steal": key.issue, key.revoke), or the
// subjects when it names none of them.
func unknownAction(action string) string {
	subject, _, _ := strings.Cut(action, ".")
	var same, subjects []string
	for _, a := range models.AuditActions {
		s, _, _ := strings.Cut(a, ".")
		if s == subject {
			same = append(same, a)
		}
		if !slices.Contains(subjects, s) {
			subjects = append(subjects, s)
		}
	}
	if len(same) > 0 {
		return fmt.Sprintf("the %s actions are %s", subject, strings.Join(same, ", "))
	}
	return fmt.Sprintf("use an action of %s (such as %s)", strings.Join(subjects, ", "), models.AuditKeyRevoke)
}

// Filter checks q and turns it into the store's filter. Anything odd (an
// unknown action, a target or actor that cannot be one, a bad time or
// cursor) is models.ErrInvalid naming the parameter.
func (q Query) Filter() (models.AuditFilter, error) {
	f := models.AuditFilter{Actor: strings.TrimSpace(q.Actor), Action: strings.TrimSpace(q.Action), Target: strings.TrimSpace(q.Target), Limit: q.Limit}
	if f.Actor != "" && f.Actor != models.ActorName(nil) && !actorPattern.MatchString(f.Actor) {
		return f, models.ErrInvalid.Errorf("actor=%s is not a principal name (letters, digits, '.', '_' or '-', at most 64)", quote(f.Actor))
	}
	if f.Action != "" && !slices.Contains(models.AuditActions, f.Action) {
		return f, models.ErrInvalid.Errorf("action=%s is not an action; %s", quote(f.Action), unknownAction(f.Action))
	}
	if f.Target != "" && !targetPattern.MatchString(f.Target) {
		return f, models.ErrInvalid.Errorf("target=%s is not a target such as tool:file_read, principal:2, key:3 or approval:<id>", quote(f.Target))
	}
	var err error
	if f.Since, err = parseTime("since", q.Since); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", q.Until); err != nil {
		return f, err
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, models.ErrInvalid.Errorf("since must be before until")
	}
	if q.Cursor != "" {
		n, err := strconv.ParseUint(q.Cursor, 10, 32)
		if err != nil || n == 0 {
			return f, models.ErrInvalid.Errorf("cursor=%s is not a cursor this API gave", quote(q.Cursor))
		}
		f.After = uint(n)
	}
	if f.Sort = strings.TrimSpace(q.Sort); f.Sort != "" {
		if _, ok := models.AuditSorts[f.Sort]; !ok {
			return f, models.ErrInvalid.Errorf("sort=%s is not an order; use -time (newest first), time, actor, -actor, action, -action, target or -target", quote(f.Sort))
		}
	}
	switch {
	case f.Limit == 0:
		f.Limit = 50
	case f.Limit < 0 || f.Limit > MaxLimit:
		return f, models.ErrInvalid.Errorf("limit=%d must be between 1 and %d", f.Limit, MaxLimit)
	}
	return f, nil
}

// timeLayouts are the forms a time may take, the first RFC 3339.
var timeLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

func parseTime(name, v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, models.ErrInvalid.Errorf("%s=%s is not an RFC 3339 time (2026-12-01T17:30:00Z) or a date", name, quote(v))
}

// quote shows a refused value, cut short when long, so an error never
// echoes a whole hostile string.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:40]) + "…"
	}
	return strconv.Quote(s)
}

// List returns one page of the entries q asks for.
func (l *Log) List(ctx context.Context, q Query) (*Page, error) {
	f, err := q.Filter()
	if err != nil {
		return nil, err
	}
	entries, more, err := l.store.AuditEntries(ctx, f)
	if err != nil {
		return nil, err
	}
	p := &Page{Entries: entries}
	if p.Entries == nil {
		p.Entries = []models.AuditEntry{}
	}
	if more {
		p.NextCursor = strconv.FormatUint(uint64(entries[len(entries)-1].ID), 10)
	}
	return p, nil
}

// Export calls fn with every entry q asks for (its cursor and limit
// aside), in its order, a page at a time.
func (l *Log) Export(ctx context.Context, q Query, fn func(models.AuditEntry) error) error {
	q.Limit, q.Cursor = 0, ""
	f, err := q.Filter()
	if err != nil {
		return err
	}
	return l.store.EachAuditEntry(ctx, f, fn)
}

// Prune removes the entries older than the retention.
func (l *Log) Prune(ctx context.Context) error {
	if l.retention <= 0 {
		return nil
	}
	n, err := l.store.DeleteAuditEntriesBefore(ctx, time.Now().Add(-l.retention))
	if err != nil {
		return err
	}
	if n > 0 {
		l.log.InfoContext(ctx, "pruned the audit log", "count", n, "older_than", l.retention.String())
	}
	return nil
}

// Retention is how long entries are kept (0: forever).
func (l *Log) Retention() time.Duration { return l.retention }
