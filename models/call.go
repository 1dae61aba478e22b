package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Call is the history record of one tool call. Arguments and Result hold
// JSON with secrets redacted; Result is capped in size.
type Call struct {
	ID          string `gorm:"primaryKey;size:32" json:"id"`
	PrincipalID uint   `json:"principal_id"`
	SessionID   string `gorm:"size:128" json:"session_id"`
	Tool        string `gorm:"size:64" json:"tool"`
	Version     string `gorm:"size:64" json:"version,omitempty"`
	// ParentID is the composite call this call was a step of.
	ParentID  string `gorm:"size:32" json:"parent_id,omitempty"`
	Arguments string `json:"arguments"`
	Status    string `gorm:"size:24" json:"status"`
	ErrorCode string `gorm:"size:32" json:"error_code,omitempty"`
	// ActedAs, for a call that acted as its person at an upstream (their
	// connected account, their own secrets), says as whom: "alice, as
	// alice@example.org at github".
	ActedAs string `gorm:"size:300;not null;default:''" json:"acted_as,omitempty"`
	Result  string `json:"-"`
	// Request holds the call as sent (tool, version, arguments) while it
	// waits for approval or runs in the background, so it survives a
	// restart; it is cleared once the call ends.
	Request string `json:"-"`
	// Prepared marks a record whose arguments were redacted (in memory
	// only, before it is stored).
	Prepared bool `gorm:"-" json:"-"`
	Attempts int  `json:"attempts"`
	Cached   bool `json:"cached"`
	// QueueMs is the time spent waiting for a slot in the category queue.
	QueueMs int64 `json:"queue_ms"`
	RunMs   int64 `json:"run_ms"`
	TotalMs int64 `json:"total_ms"`
	// Stages is the JSON array of the chain's steps as the call ran them
	// (see invoke's stages.go): each guard's own time, each attempt and
	// its outcome. Empty for calls recorded before it, and while a call
	// waits.
	Stages     string     `gorm:"not null;default:''" json:"-"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// ClaimedBy is the run of an instance that took the call to run it in
	// the background (an async or approved call; see claim.go), and
	// LeaseUntil when its claim lapses unless renewed. StartedAt is when
	// the tool began to execute, and CancelRequested asks the owner to
	// cancel it. Only the claim statements write them, never the
	// history's upserts (which name their columns) or gorm's Save.
	ClaimedBy       string     `gorm:"<-:false;size:128;not null;default:''" json:"-"`
	LeaseUntil      *time.Time `gorm:"<-:false" json:"-"`
	StartedAt       *time.Time `gorm:"<-:false" json:"-"`
	CancelRequested bool       `gorm:"<-:false;not null;default:false" json:"-"`
	// Hold makes SaveCalls write ClaimedBy, LeaseUntil and StartedAt too:
	// the record of a synchronous call whose tool is about to begin, held
	// by the instance that runs it as a claimed background call is (in
	// memory only).
	Hold bool `gorm:"-" json:"-"`
}

// SaveCalls inserts or replaces call records in one transaction (a call
// is saved as queued, running and finished under one id). A batch holding
// one id twice keeps the last. A record never moves a call back: one
// still open (queued, running, awaiting approval) does not replace a
// finished one, nor a queued one a running one (see forwardOnly), so a
// record written late (retried, spooled, replayed) cannot undo what
// happened since.
//
// Rows are written in the order of their ids: every statement that
// locks several call rows (claims renewed, takeovers) locks them in that
// order too, so two of them never wait for each other (40P01).
//
// It is the history's hot path (every call, cached hits included), so it
// skips gorm's per-row reflection: multi-row upserts, standard SQL that
// SQLite and Postgres both accept, in chunks of the sizes of chunkRows so
// the connection's statement cache keeps them prepared (preparing a
// statement of a new size cost about 2 µs a row).
func (s *Store) SaveCalls(ctx context.Context, cs []*Call) error {
	rows := lastOfEach(cs)
	if _, err := s.execChunks(ctx, rows); err != nil {
		return fmt.Errorf("record %d calls: %w", len(rows), err)
	}
	return nil
}

// chunkRows are the row counts of the multi-row statements, largest
// first: a batch is cut into at most three chunks of each size below the
// largest, so a few statements per connection are ever prepared.
var chunkRows = []int{256, 64, 16, 4, 1}

// execChunks upserts rows in one transaction (forward only); it returns
// how many rows it inserted or changed.
func (s *Store) execChunks(ctx context.Context, rows []*Call) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return 0, err
	}
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	if s.dialect.postgres && len(rows) > 1 {
		// The rows that exist are locked first, in the order of their
		// ids (rows is sorted), whatever order the statements below
		// write them in (plain ones first): one lock order for every
		// statement that writes several calls (RenewClaims too).
		ids := make([]string, len(rows))
		for i, c := range rows {
			ids[i] = c.ID
		}
		if _, err := tx.ExecContext(ctx, "SELECT 1 FROM calls WHERE id = ANY($1) ORDER BY id FOR UPDATE", ids); err != nil {
			return 0, err
		}
	}
	// Plain rows (most of them: finished calls without a parent, an
	// error code or time queued or run, such as cached hits) go in
	// statements that write those columns as constants: a fifth fewer
	// values to bind, each a cgo call.
	plain, other, held := make([]*Call, 0, len(rows)), make([]*Call, 0), make([]*Call, 0)
	for _, c := range rows {
		switch {
		case c.Hold:
			held = append(held, c)
		case c.plain():
			plain = append(plain, c)
		default:
			other = append(other, c)
		}
	}
	changed := 0
	args := make([]any, 0, min(len(rows), chunkRows[0])*(len(callColumns)+len(heldColumns)))
	for _, group := range []struct {
		rows        []*Call
		plain, held bool
	}{{plain, true, false}, {other, false, false}, {held, false, true}} {
		rows := group.rows
		for len(rows) > 0 {
			size := chunkRows[len(chunkRows)-1]
			for _, n := range chunkRows {
				if n <= len(rows) {
					size = n
					break
				}
			}
			args = args[:0]
			for _, c := range rows[:size] {
				args = c.appendValues(args, group.plain, s.dialect)
				if group.held {
					args = c.appendHold(args, s.dialect)
				}
			}
			res, err := tx.ExecContext(ctx, s.insertCallsSQL(callStatement{size, group.plain, group.held}), args...)
			if err != nil {
				return 0, err
			}
			n, _ := res.RowsAffected()
			changed += int(n)
			rows = rows[size:]
		}
	}
	return changed, tx.Commit()
}

// lastOfEach keeps the last record of each id, ordered by id (a
// statement may not hold one id twice: the first would win).
func lastOfEach(cs []*Call) []*Call {
	last := make(map[string]int, len(cs))
	for i, c := range cs {
		last[c.ID] = i
	}
	rows := make([]*Call, 0, len(last))
	for i, c := range cs {
		if last[c.ID] == i {
			rows = append(rows, c)
		}
	}
	slices.SortFunc(rows, func(a, b *Call) int { return strings.Compare(a.ID, b.ID) })
	return rows
}

// RestoreCalls writes records kept outside the database (a journal, a
// spool) as SaveCalls does, forward only: those the history lacks are
// inserted, those that take a call further (its end, where the history
// still has it open or interrupted) replace it, the others are left
// alone. It returns how many rows it inserted or changed. Of records
// sharing an id, the last counts.
func (s *Store) RestoreCalls(ctx context.Context, cs []*Call) (int, error) {
	n, err := s.execChunks(ctx, lastOfEach(cs))
	if err != nil {
		return 0, fmt.Errorf("restore %d calls: %w", len(cs), err)
	}
	return n, nil
}

// callColumns are the stored columns of Call, in the order of values.
var callColumns = []string{"id", "principal_id", "session_id", "tool", "version", "parent_id", "arguments", "status", "error_code",
	"acted_as", "result", "request", "attempts", "cached", "queue_ms", "run_ms", "total_ms", "stages", "created_at", "finished_at"}

// heldColumns are the claim's columns a held row writes too (Hold).
var heldColumns = []string{"claimed_by", "lease_until", "started_at"}

// appendHold appends the values of heldColumns.
func (c *Call) appendHold(args []any, d dialect) []any {
	var buf [64]byte
	var until, started any
	if c.LeaseUntil != nil {
		until = d.timeArg(buf[:], *c.LeaseUntil)
	}
	if c.StartedAt != nil {
		started = d.timeArg(buf[:], *c.StartedAt)
	}
	return append(args, c.ClaimedBy, until, started)
}

// plainColumns are the columns a plain row holds as constants.
var plainColumns = map[string]string{"parent_id": "''", "error_code": "''", "acted_as": "''", "request": "''", "queue_ms": "0", "run_ms": "0", "stages": "''"}

// plain reports whether the record's plainColumns hold their constants.
func (c *Call) plain() bool {
	return c.ParentID == "" && c.ErrorCode == "" && c.ActedAs == "" && c.Request == "" && c.QueueMs == 0 && c.RunMs == 0 && c.Stages == ""
}

// appendValues appends the record's values in the order of callColumns,
// without plainColumns for a plain row, times as d binds them.
func (c *Call) appendValues(args []any, plain bool, d dialect) []any {
	var buf [64]byte
	created := d.timeArg(buf[:], c.CreatedAt)
	var finished any
	if c.FinishedAt != nil {
		finished = d.timeArg(buf[:], *c.FinishedAt)
	}
	if plain {
		return append(args, c.ID, int64(c.PrincipalID), c.SessionID, c.Tool, c.Version, c.Arguments, c.Status,
			c.Result, int64(c.Attempts), c.Cached, c.TotalMs, created, finished)
	}
	return append(args, c.ID, int64(c.PrincipalID), c.SessionID, c.Tool, c.Version, c.ParentID, c.Arguments, c.Status, c.ErrorCode,
		c.ActedAs, c.Result, c.Request, int64(c.Attempts), c.Cached, c.QueueMs, c.RunMs, c.TotalMs, c.Stages, created, finished)
}

// callStatement is the shape of a multi-row statement: its row count,
// and plain or not.
type callStatement struct {
	rows        int
	plain, held bool
}

// forwardOnly is the condition under which a record replaces the stored
// row of its call: unless it would move the call back, from finished to
// open, or from running to waiting. Open records never replace a
// finished one, whichever came first to the database.
const forwardOnly = " WHERE NOT (excluded.status IN ('queued','running','awaiting_approval') AND " +
	"(calls.status NOT IN ('queued','running','awaiting_approval') OR (calls.status = 'running' AND excluded.status <> 'running')))"

// insertCallsSQL is the statement text of shape k, made once per store.
func (s *Store) insertCallsSQL(k callStatement) string {
	if q, ok := s.callStatements.Load(k); ok {
		return q.(string)
	}
	rows := k.rows
	columns := callColumns
	if k.held {
		columns = slices.Concat(callColumns, heldColumns)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO calls (" + strings.Join(columns, ",") + ") VALUES ")
	values := make([]string, len(columns))
	for i, col := range columns {
		values[i] = "?"
		if constant, ok := plainColumns[col]; ok && k.plain {
			values[i] = constant
		}
	}
	row := "(" + strings.Join(values, ",") + ")"
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(" ON CONFLICT (id) DO UPDATE SET ")
	for i, col := range columns[1:] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(col + "=excluded." + col)
	}
	b.WriteString(forwardOnly)
	q := s.dialect.bind(b.String())
	s.callStatements.Store(k, q)
	return q
}

// SaveCall inserts or replaces a call record.
func (s *Store) SaveCall(ctx context.Context, c *Call) error {
	if err := s.db.WithContext(ctx).Save(c).Error; err != nil {
		return fmt.Errorf("record call %s: %w", c.ID, err)
	}
	return nil
}

// openCalls are the states of calls not finished yet, the ones a restart
// acts on. Only they are indexed by status (a partial index): finished
// calls, nearly all of the history, cost no entry in it.
const openCalls = "status IN ('queued','running','awaiting_approval')"

// callIndexes are the call history's indexes, one B-tree each that every
// recorded call pays for, so each earns its place: the history filtered by
// principal (every agent's own view), session or tool and ordered by time;
// open calls for the restart (a partial index: finished calls, nearly all
// of the history, cost no entry in it); and the usage statistics' covering
// index, led by created_at, which also serves the unfiltered history and
// time ranges. Databases made before drop the single-column ones.
var callIndexes = []string{
	"DROP INDEX IF EXISTS idx_calls_status",
	"DROP INDEX IF EXISTS idx_calls_principal_id",
	"DROP INDEX IF EXISTS idx_calls_session_id",
	"DROP INDEX IF EXISTS idx_calls_tool",
	"DROP INDEX IF EXISTS idx_calls_created_at",
	"CREATE INDEX IF NOT EXISTS idx_calls_principal_time ON calls(principal_id, created_at)",
	"CREATE INDEX IF NOT EXISTS idx_calls_session_time ON calls(session_id, created_at)",
	"CREATE INDEX IF NOT EXISTS idx_calls_tool_time ON calls(tool, created_at)",
	"CREATE INDEX IF NOT EXISTS idx_calls_open ON calls(status, created_at) WHERE " + openCalls,
	"CREATE INDEX IF NOT EXISTS idx_calls_stats ON calls(created_at, tool, status, error_code, cached, total_ms)",
	// The steps of composite calls (no entry for the other calls).
	"CREATE INDEX IF NOT EXISTS idx_calls_parent ON calls(parent_id) WHERE parent_id <> ''",
}

// CallsInState returns the calls in an open state (queued, running,
// awaiting_approval), oldest first.
func (s *Store) CallsInState(ctx context.Context, status string) ([]Call, error) {
	var out []Call
	if err := s.db.WithContext(ctx).Where("status = ? AND "+openCalls, status).Order("created_at").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list %s calls: %w", status, err)
	}
	return out, nil
}

// CallByID returns one call record.
func (s *Store) CallByID(ctx context.Context, id string) (*Call, error) {
	var c Call
	if err := s.db.WithContext(ctx).Where("id = ?", id).First(&c).Error; err != nil {
		return nil, notFound(err, "call %q", id)
	}
	return &c, nil
}

// CallFilter narrows the call history. Empty fields do not filter.
type CallFilter struct {
	Tool        string
	Status      string
	PrincipalID uint
	SessionID   string
	Since       time.Time
	Until       time.Time
	Limit       int
	Offset      int
	// Sort orders the page: one of CallSorts ("" is newest first).
	Sort string
}

// CallSorts are the orders the history takes, by name: a column, or the
// column in reverse with "-". The newest call breaks ties. Only the time
// order reads an index; the others sort the calls that match, which the
// console's page bound (callsMaxPage) keeps to a page's worth of output.
var CallSorts = map[string]string{
	"time": "created_at, id", "-time": "created_at DESC, id DESC",
	"tool": "tool, created_at DESC, id DESC", "-tool": "tool DESC, created_at DESC, id DESC",
	"status": "status, created_at DESC, id DESC", "-status": "status DESC, created_at DESC, id DESC",
	"principal":  "(SELECT name FROM principals WHERE principals.id = calls.principal_id), created_at DESC, id DESC",
	"-principal": "(SELECT name FROM principals WHERE principals.id = calls.principal_id) DESC, created_at DESC, id DESC",
	"duration":   "total_ms, created_at DESC, id DESC", "-duration": "total_ms DESC, created_at DESC, id DESC",
}

// Calls returns one page of the history in f.Sort's order (newest first
// by default), and the total number of calls that match.
func (s *Store) Calls(ctx context.Context, f CallFilter) ([]Call, int64, error) {
	q := s.db.WithContext(ctx).Model(&Call{})
	if f.Tool != "" {
		q = q.Where("tool = ?", f.Tool)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.PrincipalID != 0 {
		q = q.Where("principal_id = ?", f.PrincipalID)
	}
	if f.SessionID != "" {
		q = q.Where("session_id = ?", f.SessionID)
	}
	if !f.Since.IsZero() {
		q = q.Where("created_at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		q = q.Where("created_at < ?", f.Until)
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count calls: %w", err)
	}
	var out []Call
	order, ok := CallSorts[f.Sort]
	if !ok {
		order = CallSorts["-time"]
	}
	if err := q.Order(order).Limit(f.Limit).Offset(f.Offset).Find(&out).Error; err != nil {
		return nil, 0, fmt.Errorf("list calls: %w", err)
	}
	return out, total, nil
}
