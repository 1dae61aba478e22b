package ops

import (
	"cmp"
	"context"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"

	"toolbelt/models"
)

// Thresholds of a rising failure rate: a tool is flagged when, over at
// least RisingMinCalls finished calls in the last hour, its failure rate is
// RisingMargin above the rate of the rest of the window and at least
// double it.
const (
	RisingMinCalls = 5
	RisingMargin   = 0.2
)

// Window limits of a statistics query, in hours.
const (
	DefaultStatsHours = 24
	MaxStatsHours     = 7 * 24
	DefaultTopTools   = 5
)

// Stats computes usage figures from the call history: per tool calls,
// success, latency percentiles, failures by code and cache hits; calls per
// hour; the busiest tools; tools whose failure rate is rising.
//
// The window is cut into clock hours. An hour that ended and holds no
// unfinished call does not change any more (a finished record is never
// rewritten), so its figures are kept in memory, and read again only when
// its number of records differs, counted every statsRecheck (a long call
// is written into its hour when it ends). A page load then reads the rows
// of the current hour and the outcomes of the last 60 minutes, however
// long the history.
type Stats struct {
	store *models.Store
	// flush writes call records still queued in memory, so a call just
	// made is counted.
	flush func()
	now   func() time.Time

	mu      sync.Mutex
	hours   map[int64]*hourStats // by the hour's Unix start
	checked time.Time            // when the kept hours were last counted
}

// statsRecheck is how often the kept hours are compared with the
// database: a record written late into a past hour shows within it.
const statsRecheck = 30 * time.Second

// StatsDeps is what the statistics service needs.
type StatsDeps struct {
	Store *models.Store
	// Flush, when not nil, writes the call records still pending before
	// each computation (the invoker's Flush).
	Flush func()
	// Now reads the time (time.Now when nil; tests pass a clock).
	Now func() time.Time
}

// NewStats returns the statistics service.
func NewStats(d StatsDeps) *Stats {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return &Stats{store: d.Store, now: now, hours: map[int64]*hourStats{}, flush: d.Flush}
}

// StatsQuery chooses the window of a summary.
type StatsQuery struct {
	// Hours is the number of clock hours, the current one included
	// (default 24, at most 168).
	Hours int `json:"hours" example:"24"`
	// Top is how many of the busiest tools to name (default 5).
	Top int `json:"top" example:"5"`
}

// Summary is the usage of the whole service over a window.
type Summary struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Calls counts every call created in the window: Succeeded and Failed
	// those that ran (interrupted ones count as failed), Refused those a
	// guard stopped before they ran (validation, permission, security
	// checks, rate limits, a denied approval), Open those still queued,
	// running or awaiting approval.
	Calls     int64 `json:"calls" example:"1200"`
	Succeeded int64 `json:"succeeded" example:"1130"`
	Failed    int64 `json:"failed" example:"42"`
	Refused   int64 `json:"refused" example:"20"`
	Open      int64 `json:"open" example:"8"`
	// SuccessRate is Succeeded over the calls that ran, Succeeded plus
	// Failed (0 with none): a refusal is the guards at work, not the tool
	// failing.
	SuccessRate float64 `json:"success_rate" example:"0.964"`
	// CacheHitRate is the share of the calls that ran answered from the
	// cache.
	CacheHitRate float64 `json:"cache_hit_rate" example:"0.31"`
	// P50Ms and P95Ms are percentiles of the duration of calls that ran
	// (succeeded or failed): exact below 128 ms, within 1.6% above.
	P50Ms int64 `json:"p50_ms" example:"12"`
	P95Ms int64 `json:"p95_ms" example:"480"`
	// Failures counts failed calls by error code, Refusals refused ones,
	// most frequent first.
	Failures []CodeCount `json:"failures"`
	Refusals []CodeCount `json:"refusals"`
	// Hourly has one entry per clock hour of the window, oldest first.
	Hourly []HourCount `json:"hourly"`
	// Tools has every tool called in the window, busiest first.
	Tools []ToolStats `json:"tools"`
	// Top names the busiest tools (at most StatsQuery.Top).
	Top []string `json:"top"`
	// Rising lists tools whose failure rate rose in the last hour.
	Rising []RisingTool `json:"rising"`
	// PendingApprovals counts calls waiting for a reviewer now.
	PendingApprovals int64 `json:"pending_approvals" example:"2"`
	// Retrieval is how well selection served the calls of the window.
	Retrieval Retrieval `json:"retrieval"`
}

// Retrieval measures selection by what agents did next: of the calls made
// after a selection in their session (Measured), the share whose tool the
// selection offered, their mean rank there and the share that took its
// first tool; the calls of tools it did not offer, and of tools that do
// not exist (an invented name). Calls in sessions without a selection are
// not measured.
type Retrieval struct {
	Measured     int64   `json:"measured" example:"420"`
	OfferedRate  float64 `json:"offered_rate" example:"0.93"`
	MeanRank     float64 `json:"mean_rank" example:"1.8"`
	Top1Rate     float64 `json:"top1_rate" example:"0.61"`
	NotOffered   int64   `json:"not_offered" example:"25"`
	UnknownTools int64   `json:"unknown_tools" example:"4"`
	// Tools has the figures of each tool called after a selection (not
	// the unknown names), most measured first.
	Tools []ToolRetrieval `json:"tools"`
}

// ToolRetrieval is Retrieval for the calls of one tool.
type ToolRetrieval struct {
	Tool        string  `json:"tool" example:"file_read"`
	Measured    int64   `json:"measured" example:"120"`
	OfferedRate float64 `json:"offered_rate" example:"0.97"`
	MeanRank    float64 `json:"mean_rank" example:"1.2"`
	NotOffered  int64   `json:"not_offered" example:"4"`
}

// retrievalOf sums the outcome counts of a window.
func retrievalOf(counts []models.RetrievalCount) Retrieval {
	r := Retrieval{Tools: []ToolRetrieval{}}
	var offered, rankSum, top1 int64
	for _, c := range counts {
		r.Measured += c.Measured
		if !c.Known {
			r.UnknownTools += c.Measured
			continue
		}
		offered += c.Offered
		rankSum += c.RankSum
		top1 += c.Top1
		r.NotOffered += c.Measured - c.Offered
		t := ToolRetrieval{Tool: c.Tool, Measured: c.Measured, OfferedRate: ratio(c.Offered, c.Measured), NotOffered: c.Measured - c.Offered}
		if c.Offered > 0 {
			t.MeanRank = round(float64(c.RankSum)/float64(c.Offered), 2)
		}
		r.Tools = append(r.Tools, t)
	}
	r.OfferedRate, r.Top1Rate = ratio(offered, r.Measured), ratio(top1, r.Measured)
	if offered > 0 {
		r.MeanRank = round(float64(rankSum)/float64(offered), 2)
	}
	return r
}

// CodeCount is how many failed (or refused) calls ended with one error
// code, and their share of the calls that ended.
type CodeCount struct {
	Code  string  `json:"code" example:"TIMEOUT"`
	Calls int64   `json:"calls" example:"7"`
	Rate  float64 `json:"rate" example:"0.012"`
}

// HourCount is the calls created in one clock hour.
type HourCount struct {
	Start     time.Time `json:"start"`
	Succeeded int64     `json:"succeeded"`
	Failed    int64     `json:"failed"`
	Refused   int64     `json:"refused"`
	Open      int64     `json:"open"`
}

// ToolStats is the usage of one tool over the window.
type ToolStats struct {
	Tool         string      `json:"tool" example:"file_read"`
	Calls        int64       `json:"calls" example:"340"`
	Succeeded    int64       `json:"succeeded" example:"331"`
	Failed       int64       `json:"failed" example:"9"`
	Refused      int64       `json:"refused" example:"2"`
	Open         int64       `json:"open" example:"0"`
	SuccessRate  float64     `json:"success_rate" example:"0.974"`
	CacheHitRate float64     `json:"cache_hit_rate" example:"0.4"`
	P50Ms        int64       `json:"p50_ms" example:"3"`
	P95Ms        int64       `json:"p95_ms" example:"21"`
	Failures     []CodeCount `json:"failures"`
	Refusals     []CodeCount `json:"refusals"`
}

// RisingTool is a tool failing more in the last hour than before it.
type RisingTool struct {
	Tool string `json:"tool" example:"web_search"`
	// Recent counts the calls that ran in the last 60 minutes; Prior
	// those earlier in the window (refused calls are in neither).
	RecentCalls  int64   `json:"recent_calls" example:"20"`
	RecentFailed int64   `json:"recent_failed" example:"9"`
	RecentRate   float64 `json:"recent_rate" example:"0.45"`
	PriorCalls   int64   `json:"prior_calls" example:"400"`
	PriorFailed  int64   `json:"prior_failed" example:"8"`
	PriorRate    float64 `json:"prior_rate" example:"0.02"`
}

// hourStats are the figures of one clock hour of history.
type hourStats struct {
	rows  int64
	open  bool // an unfinished call: the hour may still change
	tools map[string]*toolAgg
}

// toolAgg accumulates one tool's calls.
type toolAgg struct {
	succeeded, failed, refused, open, cached int64
	// codes counts the failed calls by error code, refusals the refused.
	codes, refusals map[string]int64
	// latency counts calls per histogram bin, densely, while adding up;
	// bins holds the non-empty bins of an hour once it is read, which is
	// smaller to keep and quick to add to another tool's latency.
	latency []int64
	bins    []binCount
}

type binCount struct {
	bin uint16
	n   uint32
}

func newToolAgg() *toolAgg { return &toolAgg{codes: map[string]int64{}, refusals: map[string]int64{}} }

func (a *toolAgg) addLatency(bin int, n int64) {
	if bin >= len(a.latency) {
		a.latency = append(a.latency, make([]int64, bin+1-len(a.latency))...)
	}
	a.latency[bin] += n
}

// pack turns the dense latency counts into bins.
func (a *toolAgg) pack() {
	a.bins = a.bins[:0]
	for b, n := range a.latency {
		if n > 0 {
			a.bins = append(a.bins, binCount{bin: uint16(b), n: uint32(n)})
		}
	}
	a.latency = nil
}

// merge adds a packed hour's figures to a.
func (a *toolAgg) merge(b *toolAgg) {
	a.succeeded += b.succeeded
	a.failed += b.failed
	a.refused += b.refused
	a.open += b.open
	a.cached += b.cached
	for k, v := range b.codes {
		a.codes[k] += v
	}
	for k, v := range b.refusals {
		a.refusals[k] += v
	}
	for _, bc := range b.bins {
		a.addLatency(int(bc.bin), int64(bc.n))
	}
}

// Summary computes the usage figures of a window ending now.
func (s *Stats) Summary(ctx context.Context, q StatsQuery) (*Summary, error) {
	if q.Hours == 0 {
		q.Hours = DefaultStatsHours
	}
	if q.Top == 0 {
		q.Top = DefaultTopTools
	}
	if q.Hours < 1 || q.Hours > MaxStatsHours {
		return nil, models.ErrInvalid.Errorf("hours must be between 1 and %d", MaxStatsHours)
	}
	if q.Top < 1 || q.Top > 100 {
		return nil, models.ErrInvalid.Errorf("top must be between 1 and 100")
	}
	if s.flush != nil {
		s.flush()
	}
	now := s.now().UTC()
	first := now.Truncate(time.Hour).Add(-time.Duration(q.Hours-1) * time.Hour)
	hours, err := s.readHours(ctx, first, q.Hours, now)
	if err != nil {
		return nil, err
	}
	recent, err := s.store.ToolOutcomes(ctx, now.Add(-time.Hour), now.Add(time.Nanosecond))
	if err != nil {
		return nil, err
	}
	pending, err := s.store.CountPendingApprovals(ctx, now)
	if err != nil {
		return nil, err
	}
	counts, err := s.store.RetrievalCounts(ctx, first, now.Add(time.Nanosecond))
	if err != nil {
		return nil, err
	}
	sum := summarize(first, now, hours, recent, q.Top, pending)
	sum.Retrieval = retrievalOf(counts)
	return sum, nil
}

// readHours returns the figures of each clock hour from first, reusing
// the settled hours whose record count has not changed.
func (s *Stats) readHours(ctx context.Context, first time.Time, n int, now time.Time) ([]*hourStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bounds := make([]time.Time, n+1)
	for i := range bounds {
		bounds[i] = first.Add(time.Duration(i) * time.Hour)
	}
	bounds[n] = now.Add(time.Nanosecond) // the current hour ends now
	// Settled hours are checked against their record count now and then
	// (a long call is written into its hour when it ends).
	var counts []int64
	if n > 1 && (now.Sub(s.checked) >= statsRecheck || now.Before(s.checked)) {
		var err error
		if counts, err = s.store.CountCallsBetween(ctx, bounds[:n]); err != nil {
			return nil, err
		}
		s.checked = now
	}
	out := make([]*hourStats, n)
	for i := range n {
		key := bounds[i].Unix()
		if h, ok := s.hours[key]; ok && i < n-1 && (counts == nil || h.rows == counts[i]) {
			out[i] = h
			continue
		}
		h := &hourStats{tools: map[string]*toolAgg{}}
		err := s.store.ScanCallStats(ctx, bounds[i], bounds[i+1], func(c models.CallStat) {
			h.add(c)
		})
		if err != nil {
			return nil, err
		}
		for _, a := range h.tools {
			a.pack()
		}
		out[i] = h
		// An hour is settled once it ended and every call in it finished.
		if !h.open && i < n-1 {
			s.hours[key] = h
		} else {
			delete(s.hours, key)
		}
	}
	// Hours older than the longest window are dropped (not those before
	// this window: windows of other lengths share the kept hours).
	horizon := now.Truncate(time.Hour).Add(-MaxStatsHours * time.Hour).Unix()
	for key := range s.hours {
		if key < horizon {
			delete(s.hours, key)
		}
	}
	return out, nil
}

func (h *hourStats) add(c models.CallStat) {
	h.rows++
	a := h.tools[c.Tool]
	if a == nil {
		a = newToolAgg()
		h.tools[c.Tool] = a
	}
	finished := true
	switch c.Status {
	case models.StatusSucceeded:
		a.succeeded++
	case models.StatusQueued, models.StatusRunning, models.StatusAwaitingApproval:
		a.open++
		h.open = true
		finished = false
	default:
		code := c.ErrorCode
		if code == "" {
			code = "UNKNOWN"
		}
		if models.NothingRan(c.Status, c.ErrorCode) {
			a.refused++
			a.refusals[code]++
		} else {
			a.failed++
			a.codes[code]++
		}
	}
	if finished && c.Cached && !models.NothingRan(c.Status, c.ErrorCode) {
		a.cached++
	}
	if c.Status == models.StatusSucceeded || c.Status == models.StatusFailed && !models.NothingRan(c.Status, c.ErrorCode) {
		a.addLatency(latencyBin(c.TotalMs), 1)
	}
}

// summarize merges the hours into the figures of the window.
func summarize(first, now time.Time, hours []*hourStats, recent []models.ToolOutcome, top int, pending int64) *Summary {
	sum := &Summary{Since: first, Until: now, PendingApprovals: pending,
		Failures: []CodeCount{}, Refusals: []CodeCount{}, Hourly: make([]HourCount, len(hours)), Tools: []ToolStats{}, Top: []string{}, Rising: []RisingTool{}}
	tools := map[string]*toolAgg{}
	all := newToolAgg()
	for i, h := range hours {
		hc := &sum.Hourly[i]
		hc.Start = first.Add(time.Duration(i) * time.Hour)
		for name, a := range h.tools {
			t := tools[name]
			if t == nil {
				t = newToolAgg()
				tools[name] = t
			}
			t.merge(a)
			all.merge(a)
			hc.Succeeded += a.succeeded
			hc.Failed += a.failed
			hc.Refused += a.refused
			hc.Open += a.open
		}
	}
	whole := toolStats("", all)
	sum.Calls, sum.Succeeded, sum.Failed, sum.Refused, sum.Open = whole.Calls, whole.Succeeded, whole.Failed, whole.Refused, whole.Open
	sum.SuccessRate, sum.CacheHitRate, sum.P50Ms, sum.P95Ms = whole.SuccessRate, whole.CacheHitRate, whole.P50Ms, whole.P95Ms
	sum.Failures, sum.Refusals = whole.Failures, whole.Refusals
	byName := map[string]ToolStats{}
	for name, a := range tools {
		ts := toolStats(name, a)
		sum.Tools = append(sum.Tools, ts)
		byName[name] = ts
	}
	for _, r := range recent {
		ts := byName[r.Tool]
		rt := RisingTool{Tool: r.Tool, RecentCalls: r.Finished, RecentFailed: r.Failed,
			PriorCalls: max(ts.Succeeded+ts.Failed-r.Finished, 0), PriorFailed: max(ts.Failed-r.Failed, 0)}
		rt.RecentRate = ratio(rt.RecentFailed, rt.RecentCalls)
		rt.PriorRate = ratio(rt.PriorFailed, rt.PriorCalls)
		// Rising needs something to rise from: as many calls before the
		// hour as in it at least.
		if rt.RecentCalls >= RisingMinCalls && rt.PriorCalls >= RisingMinCalls &&
			rt.RecentRate >= rt.PriorRate+RisingMargin && rt.RecentRate >= 2*rt.PriorRate {
			sum.Rising = append(sum.Rising, rt)
		}
	}
	slices.SortFunc(sum.Tools, func(a, b ToolStats) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Tool, b.Tool))
	})
	for _, t := range sum.Tools[:min(top, len(sum.Tools))] {
		sum.Top = append(sum.Top, t.Tool)
	}
	slices.SortFunc(sum.Rising, func(a, b RisingTool) int {
		return cmp.Or(cmp.Compare(b.RecentRate-b.PriorRate, a.RecentRate-a.PriorRate), cmp.Compare(a.Tool, b.Tool))
	})
	return sum
}

func toolStats(name string, a *toolAgg) ToolStats {
	ran := a.succeeded + a.failed
	ended := ran + a.refused
	ts := ToolStats{Tool: name, Calls: ended + a.open, Succeeded: a.succeeded, Failed: a.failed, Refused: a.refused, Open: a.open,
		SuccessRate: ratio(a.succeeded, ran), CacheHitRate: ratio(a.cached, ran)}
	ts.P50Ms, ts.P95Ms = histPercentile(a.latency, 50), histPercentile(a.latency, 95)
	ts.Failures, ts.Refusals = codeCounts(a.codes, ended), codeCounts(a.refusals, ended)
	return ts
}

// codeCounts lists the counts by code, most frequent first, each with its
// share of the ended calls.
func codeCounts(by map[string]int64, ended int64) []CodeCount {
	out := []CodeCount{}
	for code, n := range by {
		out = append(out, CodeCount{Code: code, Calls: n, Rate: ratio(n, ended)})
	}
	slices.SortFunc(out, func(x, y CodeCount) int { return cmp.Or(cmp.Compare(y.Calls, x.Calls), cmp.Compare(x.Code, y.Code)) })
	return out
}

func ratio(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return round(float64(n)/float64(of), 4)
}

// latencyBin maps a duration to a histogram bin: one bin per millisecond
// below 128 ms, then 64 bins per doubling (bins under 1.6% wide).
func latencyBin(ms int64) int {
	if ms < 128 {
		return int(max(ms, 0))
	}
	shift := bits.Len64(uint64(ms)) - 7 // ms>>shift is in [64, 128)
	return 128 + (shift-1)*64 + int(ms>>shift) - 64
}

// binMax is the largest duration in a bin.
func binMax(bin int) int64 {
	if bin < 128 {
		return int64(bin)
	}
	shift := (bin-128)/64 + 1
	m := int64((bin-128)%64 + 64)
	return (m+1)<<shift - 1
}

// histPercentile is the nearest-rank percentile p of a histogram (calls
// per bin): the smallest bin that at least p% of the calls reach, 0 with
// no calls.
func histPercentile(hist []int64, p int64) int64 {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := (n*p + 99) / 100
	var seen int64
	for b, c := range hist {
		seen += c
		if seen >= rank {
			return binMax(b)
		}
	}
	return binMax(len(hist) - 1)
}

// round rounds x to digits decimal places.
func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
