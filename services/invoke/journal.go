package invoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"toolbelt/models"
)

// callJournal makes a call's record survive a crash from the moment its
// answer is sent, while the history goes on being written in batches: the
// record is appended to a journal file as one JSON line, with one write(2)
// and no fsync — a killed process loses nothing the kernel already has (a
// power cut can lose the last lines, as SQLite's synchronous=NORMAL can).
// It is also the spool of records the database could not take (see
// callRecorder), appended and fsync'd (appendSync).
//
// The journal is a directory of numbered segments. Now and then the
// recorder closes the current segment, waits until every record queued so
// far is in the database, and deletes the closed segments: each of their
// records was queued before it was journaled. At start, segments left
// behind are replayed: a record the database lacks is inserted, one it has
// is left alone (the database's is as new or newer).
type callJournal struct {
	dir string
	log *slog.Logger

	// first is this run's first segment: those before it are a previous
	// run's, left for replay.
	first int

	// mu is held shared by appenders (O_APPEND makes each write(2) one
	// atomic append, so they need not wait for each other) and exclusively
	// to switch segments.
	mu   sync.RWMutex
	f    *os.File
	seq  int
	size atomic.Int64
}

// errJournalClosed is appending after close.
var errJournalClosed = errors.New("the call journal is closed")

// journalSegmentBytes is the size past which a segment is closed early.
const journalSegmentBytes = 4 << 20

// openCallJournal opens the journal under the data directory; without one
// (it could not be created) answers wait for the database instead, and
// nothing can be spooled.
func openCallJournal(dataDir string, log *slog.Logger) *callJournal {
	j, err := openJournal(filepath.Join(dataDir, "journal"), log)
	if err != nil {
		log.Error("no call journal: answers wait for the database", "err", err)
		return nil
	}
	return j
}

func openJournal(dir string, log *slog.Logger) (*callJournal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create call journal: %w", err)
	}
	j := &callJournal{dir: dir, log: log}
	segs, err := j.segments()
	if err != nil {
		return nil, err
	}
	if len(segs) > 0 {
		j.seq = segs[len(segs)-1]
	}
	if err := j.next(); err != nil {
		return nil, err
	}
	j.first = j.seq
	return j, nil
}

// segments lists the segment numbers in the directory, oldest first.
func (j *callJournal) segments() ([]int, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("read call journal: %w", err)
	}
	var out []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "calls-")); ok && err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (j *callJournal) path(seq int) string {
	return filepath.Join(j.dir, fmt.Sprintf("calls-%09d.jsonl", seq))
}

// next starts a new segment (with mu held, or before the journal is shared).
func (j *callJournal) next() error {
	f, err := os.OpenFile(j.path(j.seq+1), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open call journal segment: %w", err)
	}
	if j.f != nil {
		_ = j.f.Close()
	}
	j.f, j.seq = f, j.seq+1
	j.size.Store(0)
	return nil
}

// append writes one record as a line.
func (j *callJournal) append(c *models.Call) error {
	bp := journalLines.Get().(*[]byte)
	line := appendJournalLine((*bp)[:0], c)
	defer func() {
		if cap(line) <= 64<<10 { // a rare large record's buffer is not kept
			*bp = line
			journalLines.Put(bp)
		}
	}()
	if j.size.Load() >= journalSegmentBytes {
		j.mu.Lock()
		if j.f != nil && j.size.Load() >= journalSegmentBytes {
			if err := j.next(); err != nil {
				j.mu.Unlock()
				return err
			}
		}
		j.mu.Unlock()
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.f == nil {
		return errJournalClosed
	}
	n, err := j.f.Write(line)
	j.size.Add(int64(n))
	if err != nil {
		return fmt.Errorf("append to call journal: %w", err)
	}
	return nil
}

// appendSync writes records as lines and syncs the segment to disk: the
// spool of records the database could not take, which must survive a
// power cut as a commit would.
func (j *callJournal) appendSync(cs []*models.Call) error {
	var buf []byte
	for _, c := range cs {
		buf = appendJournalLine(buf, c)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errJournalClosed
	}
	n, err := j.f.Write(buf)
	j.size.Add(int64(n))
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("spool to call journal: %w", err)
	}
	return nil
}

// journalLines are reusable line buffers.
var journalLines = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendJournalLine appends the JSON line of a record, the JSON of
// journalRecord with its field names. Every answered call writes one, so
// it is written by hand: encoding/json's reflection cost a fifth of the
// journal's time.
func appendJournalLine(b []byte, c *models.Call) []byte {
	b = append(b, `{"id":`...)
	b = models.AppendJSONString(b, c.ID)
	b = append(b, `,"principal_id":`...)
	b = strconv.AppendUint(b, uint64(c.PrincipalID), 10)
	b = append(b, `,"session_id":`...)
	b = models.AppendJSONString(b, c.SessionID)
	b = append(b, `,"tool":`...)
	b = models.AppendJSONString(b, c.Tool)
	b = append(b, `,"version":`...)
	b = models.AppendJSONString(b, c.Version)
	b = append(b, `,"parent_id":`...)
	b = models.AppendJSONString(b, c.ParentID)
	b = append(b, `,"arguments":`...)
	b = models.AppendJSONString(b, c.Arguments)
	b = append(b, `,"status":`...)
	b = models.AppendJSONString(b, c.Status)
	b = append(b, `,"error_code":`...)
	b = models.AppendJSONString(b, c.ErrorCode)
	if c.ActedAs != "" {
		b = append(b, `,"acted_as":`...)
		b = models.AppendJSONString(b, c.ActedAs)
	}
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(c.Attempts), 10)
	b = append(b, `,"cached":`...)
	b = strconv.AppendBool(b, c.Cached)
	b = append(b, `,"queue_ms":`...)
	b = strconv.AppendInt(b, c.QueueMs, 10)
	b = append(b, `,"run_ms":`...)
	b = strconv.AppendInt(b, c.RunMs, 10)
	b = append(b, `,"total_ms":`...)
	b = strconv.AppendInt(b, c.TotalMs, 10)
	b = append(b, `,"created_at":"`...)
	b = models.AppendTime(b, c.CreatedAt, models.JournalTimeLayout)
	b = append(b, '"')
	if c.FinishedAt != nil {
		b = append(b, `,"finished_at":"`...)
		b = models.AppendTime(b, *c.FinishedAt, models.JournalTimeLayout)
		b = append(b, '"')
	}
	b = append(b, `,"result":`...)
	b = models.AppendJSONString(b, c.Result)
	if c.Request != "" {
		b = append(b, `,"request":`...)
		b = models.AppendJSONString(b, c.Request)
	}
	if c.Stages != "" {
		b = append(b, `,"stages":`...)
		b = models.AppendJSONString(b, c.Stages)
	}
	return append(b, "}\n"...)
}

// journalRecord is a call as journaled: its JSON omits result and
// request, which the journal needs.
type journalRecord struct {
	models.Call
	Result  string `json:"result"`
	Request string `json:"request,omitempty"`
	Stages  string `json:"stages,omitempty"`
}

// rotate closes the current segment (unless it is empty) and returns the
// numbers of this run's closed ones.
func (j *callJournal) rotate() ([]int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.size.Load() > 0 && j.f != nil {
		if err := j.next(); err != nil {
			return nil, err
		}
	}
	segs, err := j.segments()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(segs, func(n int) bool { return n < j.first || n >= j.seq }), nil
}

// remove deletes closed segments.
func (j *callJournal) remove(segs []int) {
	for _, n := range segs {
		if err := os.Remove(j.path(n)); err != nil && !os.IsNotExist(err) {
			j.log.Warn("remove call journal segment", "err", err)
		}
	}
}

// leftBehind reads the records of the segments before the current one (a
// previous run's), skipping a torn last line; lines have no length limit.
func (j *callJournal) leftBehind() ([]*models.Call, []int, error) {
	segs, err := j.segments()
	if err != nil {
		return nil, nil, err
	}
	segs = slices.DeleteFunc(segs, func(n int) bool { return n >= j.first })
	var out []*models.Call
	for _, n := range segs {
		// A segment is a few MB (closed past journalSegmentBytes); its
		// lines have no length limit (a queued call keeps its request).
		data, err := os.ReadFile(j.path(n))
		if err != nil {
			return nil, nil, fmt.Errorf("read call journal: %w", err)
		}
		for line := range bytes.SplitSeq(data, []byte{'\n'}) {
			if len(line) == 0 {
				continue
			}
			var r journalRecord
			if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
				j.log.Warn("skip an unreadable call journal line", "segment", n)
				continue
			}
			c := r.Call
			c.Result, c.Request, c.Stages = r.Result, r.Request, r.Stages
			out = append(out, &c)
		}
	}
	return out, segs, nil
}

func (j *callJournal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		_ = j.f.Close()
		if j.size.Load() == 0 {
			_ = os.Remove(j.path(j.seq))
		}
		j.f = nil
	}
}
