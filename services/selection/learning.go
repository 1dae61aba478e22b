package selection

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"toolbelt/internal/ttlcache"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/tooldef"
)

// learningState is what the selector learned from and what it is
// learning: the learned queries, the queue of calls the learning worker
// measures and learns from, and what it measured last.
type learningState struct {
	queries atomic.Pointer[learnedIndex]
	loaded  bool // learned queries read from the store (under catalog.mu)
	// lessons is the learning worker's queue (while Run runs), queued
	// counts the lessons not yet learned.
	lessons chan callSeen
	queued  sync.WaitGroup
	// observations are what observe measured last per session and tool.
	observations *ttlcache.Cache[string, observation]
	// onLearned tells the other instances which tools' learned queries
	// changed here (Deps.OnLearned).
	onLearned func(ctx context.Context, tools []string)
}

// Feedback teaches the index from a recorded selection: its query becomes
// retrieval text for each named tool (the tools the agent actually used,
// whether or not they were among those selected).
func (s *Selector) Feedback(ctx context.Context, caller *models.Principal, selectionID string, tools []string) ([]string, error) {
	sel, err := s.recorder.byID(ctx, selectionID)
	if err != nil {
		return nil, err
	}
	if caller != nil && caller.Role == access.RoleAgent && sel.PrincipalID != caller.ID {
		return nil, models.ErrForbidden.Errorf("selection %s was made by another principal", selectionID)
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, err
	}
	var ps models.Problems
	if len(tools) == 0 {
		ps.Add("/tools", "is required: name the tools the task used")
	}
	ix := s.catalog.snapshot.Load()
	for i, t := range tools {
		n, ok := ix.byName[t]
		switch {
		case !ok:
			ps.Add(fmt.Sprintf("/tools/%d", i), "tool %q is not in the catalog", t)
		case !vis.allows(ix.entries[n]):
			ps.Add(fmt.Sprintf("/tools/%d", i), "tool %q is not among the tools you may use", t)
		}
	}
	if len(ps) > 0 {
		return nil, &models.ValidationError{What: "feedback", Problems: ps}
	}
	return s.learn(ctx, sel, tooldef.Dedupe(tools), "feedback")
}

// LearnFromCall teaches the index that a session's latest selection led to
// a call of tool. Calls outside a selected session teach nothing.
func (s *Selector) LearnFromCall(ctx context.Context, sessionID, tool string) error {
	return s.observe(ctx, callSeen{session: sessionID, tool: tool, known: true, learn: true, at: time.Now().UTC()}, false)
}

// callSeen is a call as the selector measures and learns from it.
type callSeen struct {
	session, tool, callID string
	known                 bool      // the tool exists
	learn                 bool      // it succeeded, not from the cache: it teaches the index
	at                    time.Time // when the call was made
}

// ObserveCallLater queues, for Run's learning worker, what a call of tool
// in a session says of the selection before it: the tool's rank there,
// or that it was not offered or does not exist (RetrievalOutcome, the
// toolbelt_retrieval_* metrics, the statistics), and, when learn (the call
// succeeded), a lesson for the index. A call never waits for this while
// Run runs; it is best effort: when the queue is full it is dropped.
// Without Run, the caller learns it.
func (s *Selector) ObserveCallLater(sessionID, tool, callID string, known, learn bool) {
	seen := callSeen{session: sessionID, tool: tool, callID: callID, known: known, learn: learn, at: time.Now().UTC()}
	if sessionID == "" || s.observed(seen) {
		return // nothing to measure, or measured already (the cached reads of one file, say)
	}
	// Queued under the lock Run takes to stop: Run learns every lesson
	// queued before it stopped.
	s.jobs.mu.Lock()
	if !s.jobs.running {
		s.jobs.mu.Unlock()
		s.learnOne(seen)
		return
	}
	s.learning.queued.Add(1)
	select {
	case s.learning.lessons <- seen:
	default:
		s.learning.queued.Done()
	}
	s.jobs.mu.Unlock()
}

// learnLessons is the learning worker: it measures and learns queued
// calls until ctx ends.
func (s *Selector) learnLessons(ctx context.Context) {
	for {
		select {
		case l := <-s.learning.lessons:
			s.learnOne(l)
			s.learning.queued.Done()
		case <-ctx.Done():
			return
		}
	}
}

// learnQueued learns the lessons still queued (Run's end).
func (s *Selector) learnQueued() {
	for {
		select {
		case l := <-s.learning.lessons:
			s.learnOne(l)
			s.learning.queued.Done()
		default:
			return
		}
	}
}

// learnOne measures and learns one call, logging what fails.
func (s *Selector) learnOne(l callSeen) {
	if err := s.observe(context.Background(), l, true); err != nil {
		s.log.Warn("observe call", "err", err, "session", l.session, "tool", l.tool)
	}
}

// observe relates a call to the newest selection of its session made
// before it: measured when measure, learned from when l.learn. A tool
// called again after the same selection is measured and learned from
// once (observations): a repeated call — an agent reading one file again
// and again, from the cache — is no new evidence, and each had cost a
// lookup and a row.
func (s *Selector) observe(ctx context.Context, l callSeen, measure bool) error {
	if l.session == "" {
		return nil
	}
	key := l.session + "\x00" + l.tool
	seen, hadSeen := s.learning.observations.Get(key)
	if s.settled(l, seen, hadSeen) {
		return nil
	}
	sel, err := s.recorder.lastOf(ctx, l.session, l.at)
	if errors.Is(err, models.ErrNotFound) {
		s.learning.observations.Add(key, observation{})
		return nil
	}
	if err != nil {
		return err
	}
	again := hadSeen && seen.selection == sel.ID
	if again {
		measure = false // measured already: only the lesson may be new
	}
	learn := l.learn && !(again && seen.learned)
	s.learning.observations.Add(key, observation{selection: sel.ID, learned: l.learn || again && seen.learned})
	if measure {
		rank := 0
		for i, name := range strings.Split(strings.Trim(sel.Tools, ","), ",") {
			if name == l.tool {
				rank = i + 1
				break
			}
		}
		tool := l.tool
		if utf8.RuneCountInString(tool) > 64 { // an invented name may be anything
			tool = head(tool, 64)
		}
		o := &models.RetrievalOutcome{CallID: l.callID, SessionID: l.session, SelectionID: sel.ID, Tool: tool,
			Rank: rank, Known: l.known, CreatedAt: l.at}
		if err := s.store.CreateRetrievalOutcome(ctx, o); err != nil {
			return err
		}
		s.metrics.Retrieved(l.tool, l.known, rank)
	}
	if !learn {
		return nil
	}
	_, err = s.learn(ctx, sel, []string{l.tool}, "call")
	return err
}

// observed reports whether observe would do nothing for l: the tool was
// measured against the session's newest selection known here (or against
// none) already, and there is nothing new to learn.
func (s *Selector) observed(l callSeen) bool {
	seen, ok := s.learning.observations.Get(l.session + "\x00" + l.tool)
	return s.settled(l, seen, ok)
}

// settled is observed's rule for what observe last did for l's session
// and tool (seen, when ok).
func (s *Selector) settled(l callSeen, seen observation, ok bool) bool {
	return ok && seen.selection == s.recorder.lastKnown(l.session, l.at) && (seen.learned || !l.learn || seen.selection == "")
}

// observation is what observe did for a session's tool last: the
// selection it measured the call against ("" for none) and whether it
// learned from it.
type observation struct {
	selection string
	learned   bool
}

// observationTTL bounds how long observe trusts that a session has no
// newer selection than the one it saw: a selection made on another
// instance is found after at most this long. (A tool called again after
// longer is measured again.)
const observationTTL = 30 * time.Second

// WaitLearning waits until queued lessons are learned (tests, shutdown).
func (s *Selector) WaitLearning() { s.learning.queued.Wait() }

func (s *Selector) learn(ctx context.Context, sel *models.Selection, tools []string, source string) ([]string, error) {
	model := s.emb.Model()
	var vec []byte
	if v := s.embedQuery(ctx, sel.Query); v != nil {
		vec = encodeVector(v) // usually cached: the selection embedded it
	} else {
		model = ""
	}
	type lesson struct {
		q       models.LearnedQuery
		dropped []uint
	}
	var lessons []lesson
	write := func(st *models.Store) error {
		lessons = lessons[:0]
		for _, t := range tools {
			q := models.LearnedQuery{ToolName: t, Query: sel.Query, Source: source, SelectionID: sel.ID, Model: model, Vector: vec}
			added, dropped, err := st.AddLearnedQuery(ctx, &q, s.cfg.keep)
			if err != nil {
				return err
			}
			if added {
				lessons = append(lessons, lesson{q, dropped})
			}
		}
		return nil
	}
	// What a caller teaches is audited; what calls teach is not (the
	// calls are recorded).
	var err error
	if source == "feedback" {
		err = s.store.Audited(ctx, models.AuditSelectionLearn, func(tx *models.Store) (string, string, error) {
			err := write(tx)
			return "selection:" + sel.ID, fmt.Sprintf("%d of %s learned", len(lessons), strings.Join(tools, ", ")), err
		})
	} else {
		err = write(s.store)
	}
	if err != nil {
		return nil, err
	}
	var learned []string
	li := s.learning.queries.Load()
	for _, l := range lessons {
		li.add(l.q, l.dropped)
		learned = append(learned, l.q.ToolName)
	}
	s.learnedChanged(ctx, learned...)
	return learned, nil
}

func (s *Selector) learnedChanged(ctx context.Context, tools ...string) {
	if s.learning.onLearned != nil && len(tools) > 0 {
		s.learning.onLearned(ctx, tools)
	}
}

// SyncLearnedLater runs SyncLearned for each tool in Run's background
// (here without Run), logging what fails.
func (s *Selector) SyncLearnedLater(tools []string) {
	sync := func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for _, tool := range tools {
			if err := s.SyncLearned(ctx, tool); err != nil && ctx.Err() == nil {
				s.log.Warn("sync learned queries", "tool", tool, "err", err)
			}
		}
	}
	if !s.goJob(sync) {
		sync(context.Background())
	}
}

// SyncLearned reads tool's learned queries from the store again, after
// another instance learned or forgot some: the rankings here use them at
// once, where they waited for the next start.
func (s *Selector) SyncLearned(ctx context.Context, tool string) error {
	s.catalog.mu.Lock() // as a refresh, which loads them the first time
	defer s.catalog.mu.Unlock()
	if !s.learning.loaded {
		return nil // the first refresh loads every tool's
	}
	qs, err := s.store.LearnedQueries(ctx, tool)
	if err != nil {
		return err
	}
	s.learning.queries.Load().sync(tool, qs)
	return nil
}

// LearnedQueries lists what a tool was learned from, newest first.
func (s *Selector) LearnedQueries(ctx context.Context, tool string) ([]models.LearnedQuery, error) {
	if err := tooldef.CheckName(tool); err != nil {
		return nil, err
	}
	if _, _, err := s.store.ToolByName(ctx, tool, true); err != nil {
		return nil, err
	}
	return s.store.LearnedQueries(ctx, tool)
}

// ForgetQuery removes one learned query of a tool.
func (s *Selector) ForgetQuery(ctx context.Context, tool string, id uint) error {
	if err := tooldef.CheckName(tool); err != nil {
		return err
	}
	err := s.store.Audited(ctx, models.AuditQueryForget, func(tx *models.Store) (string, string, error) {
		return "tool:" + tool, fmt.Sprintf("learned query %d", id), tx.DeleteLearnedQuery(ctx, tool, id)
	})
	if err != nil {
		return err
	}
	s.learning.queries.Load().remove([]uint{id})
	s.learnedChanged(ctx, tool)
	return nil
}
