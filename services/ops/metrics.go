// Package ops is what operators watch: Prometheus metrics, call statistics,
// the failure-rate alert, readiness, and what the host can run.
package ops

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the service's Prometheus series, on a registry of their own
// (the web layer serves it at /metrics). Every method is safe on a nil
// *Metrics, so components built without metrics (tests) need no checks.
type Metrics struct {
	// Registry gathers the series (for /metrics); they are registered
	// through reg, which labels each with the instance.
	Registry *prometheus.Registry
	reg      prometheus.Registerer

	calls            *prometheus.CounterVec
	callSeconds      *prometheus.HistogramVec
	guardSeconds     *prometheus.HistogramVec
	cache            *prometheus.CounterVec
	cacheHits        prometheus.Counter
	cacheMisses      prometheus.Counter
	rateLimited      *prometheus.CounterVec
	queueDepth       *prometheus.GaugeVec
	queueWait        *prometheus.HistogramVec
	queueRefused     *prometheus.CounterVec
	callbackHeld     prometheus.Counter
	approvalsDecided *prometheus.CounterVec
	takenOver        *prometheus.CounterVec
	sandboxKills     *prometheus.CounterVec
	embedSeconds     prometheus.Histogram
	embedErrors      prometheus.Counter
	selectSeconds    prometheus.Histogram
	retrieval        *prometheus.CounterVec
	retrievalRank    prometheus.Histogram
	httpRequests     *prometheus.CounterVec
	httpSeconds      *prometheus.HistogramVec
	principalCaps    *prometheus.CounterVec
	mcpEvicted       prometheus.Counter
	// resolved holds the series of callLabels and httpLabels met so far
	// (bounded: tools are registered names, routes are patterns).
	resolved sync.Map
}

// Latency buckets from 100 µs to about 30 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 3, 13)

// NewMetrics registers every series, with the Go runtime and process
// collectors, each labelled instance="<instance>" (when instance is set)
// so that the series of several instances stay apart wherever they are
// gathered.
func NewMetrics(instance string) *Metrics {
	gather := prometheus.NewRegistry()
	var reg prometheus.Registerer = gather
	if instance != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"instance": instance}, gather)
	}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{Registry: gather, reg: reg,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_calls_total",
			Help: "Tool calls by tool and final status."}, []string{"tool", "status"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolbelt_call_duration_seconds",
			Help: "Time from receiving a call to its result, by tool.", Buckets: latencyBuckets}, []string{"tool"}),
		guardSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolbelt_guard_duration_seconds",
			Help: "Time spent in each guard of the chain itself (excluding the guards after it and the execution).", Buckets: latencyBuckets}, []string{"guard"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_cache_lookups_total",
			Help: "Result cache lookups of cacheable tools, by result (hit or miss)."}, []string{"result"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_rate_limited_total",
			Help: "Calls refused by a tool's rate limit, by tool."}, []string{"tool"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "toolbelt_queue_waiting",
			Help: "Calls waiting for a slot in their category's queue on this instance (toolbelt_queue_cluster_waiting: in the cluster)."}, []string{"category"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolbelt_queue_wait_seconds",
			Help: "Time calls waited for a slot in their category's queue.", Buckets: latencyBuckets}, []string{"category"}),
		queueRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_queue_refused_total",
			Help: "Calls refused QUEUE_FULL, by category and the waiting bound they passed: category (the category's) or principal (the caller's own)."}, []string{"category", "bound"}),
		callbackHeld: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolbelt_callbacks_held_back_total",
			Help: "Callback deliveries that were due while their principal's share of the delivery workers was busy (each counted once)."}),
		approvalsDecided: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_approvals_decided_total",
			Help: "Approvals decided, by decision (approved, denied, expired)."}, []string{"decision"}),
		takenOver: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_calls_taken_over_total",
			Help: "Background calls this instance took over from a stopped one (or its own earlier run), by outcome: requeued (its tool had not begun: run again), interrupted (it had), cancelled."}, []string{"outcome"}),
		sandboxKills: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_sandbox_kills_total",
			Help: "Sandboxed programs stopped at a limit, by limit (memory, processes, output, time)."}, []string{"reason"}),
		embedSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "toolbelt_embed_duration_seconds",
			Help: "Time to embed a batch of texts.", Buckets: latencyBuckets}),
		embedErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolbelt_embed_errors_total",
			Help: "Embedding requests that failed."}),
		selectSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "toolbelt_selection_duration_seconds",
			Help: "Time to select the tools for a task.", Buckets: latencyBuckets}),
		retrieval: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_retrieval_calls_total",
			Help: "Calls made after a selection in their session, by tool (unknown for a name that does not exist) and outcome: offered (the selection held the tool), not_offered, unknown_tool."}, []string{"tool", "outcome"}),
		retrievalRank: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "toolbelt_retrieval_offered_rank",
			Help: "The rank, in the session's preceding selection, of each called tool it offered.", Buckets: []float64{1, 2, 3, 5, 10, 15, 20, 40}}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_http_requests_total",
			Help: "HTTP requests by route pattern, method and status."}, []string{"route", "method", "status"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolbelt_http_request_duration_seconds",
			Help: "HTTP request latency by route pattern.", Buckets: latencyBuckets}, []string{"route"}),
		principalCaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolbelt_principal_cap_refusals_total",
			Help: "Requests refused because their principal already held its most of a resource, by resource (pending_approvals, mcp_sessions, event_streams)."}, []string{"resource"}),
		mcpEvicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolbelt_mcp_sessions_evicted_total",
			Help: "Idle MCP sessions closed to admit their principal's new session at its cap."}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.callSeconds, m.guardSeconds, m.cache, m.rateLimited, m.queueDepth,
		m.queueWait, m.queueRefused, m.callbackHeld, m.approvalsDecided, m.takenOver, m.sandboxKills, m.embedSeconds, m.embedErrors, m.selectSeconds, m.retrieval, m.retrievalRank, m.httpRequests, m.httpSeconds, m.principalCaps, m.mcpEvicted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	m.cacheHits, m.cacheMisses = m.cache.WithLabelValues("hit"), m.cache.WithLabelValues("miss")
	return m
}

// Gauge registers a gauge read at scrape time (such as pending approvals).
func (m *Metrics) Gauge(name, help string, read func() float64) {
	if m != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, read))
	}
}

// Register adds c to the series served, labelled like the others.
func (m *Metrics) Register(c prometheus.Collector) {
	if m != nil {
		m.reg.MustRegister(c)
	}
}

func (m *Metrics) Call(tool, status string, d time.Duration) {
	if m != nil {
		s := m.callSeries(tool, status)
		s.count.Inc()
		s.seconds.Observe(d.Seconds())
	}
}

// series are a label set's counter and histogram, resolved once: every
// call and request reports to them, and the vectors hash their labels on
// each lookup.
type series struct {
	count   prometheus.Counter
	seconds prometheus.Observer
}

type callLabels struct{ tool, status string }

type httpLabels struct {
	route, method string
	status        int
}

func (m *Metrics) callSeries(tool, status string) series {
	k := callLabels{tool, status}
	if s, ok := m.resolved.Load(k); ok {
		return s.(series)
	}
	s := series{m.calls.WithLabelValues(tool, status), m.callSeconds.WithLabelValues(tool)}
	m.resolved.Store(k, s)
	return s
}

func (m *Metrics) httpSeries(route, method string, status int) series {
	k := httpLabels{route, method, status}
	if s, ok := m.resolved.Load(k); ok {
		return s.(series)
	}
	s := series{m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)), m.httpSeconds.WithLabelValues(route)}
	m.resolved.Store(k, s)
	return s
}

// GuardTimer returns what records the time one guard of the chain spent
// on a call (its own, without the steps after it); a no-op without metrics.
func (m *Metrics) GuardTimer(name string) func(time.Duration) {
	if m == nil {
		return func(time.Duration) {}
	}
	obs := m.guardSeconds.WithLabelValues(name)
	return func(d time.Duration) { obs.Observe(d.Seconds()) }
}

func (m *Metrics) CacheLookup(hit bool) {
	switch {
	case m == nil:
	case hit:
		m.cacheHits.Inc()
	default:
		m.cacheMisses.Inc()
	}
}

func (m *Metrics) Limited(tool string) {
	if m != nil {
		m.rateLimited.WithLabelValues(tool).Inc()
	}
}

// CapRefused counts a request refused at its principal's cap of resource.
func (m *Metrics) CapRefused(resource string) {
	if m != nil {
		m.principalCaps.WithLabelValues(resource).Inc()
	}
}

// MCPSessionEvicted counts an idle MCP session closed to make room for
// its principal's new one.
func (m *Metrics) MCPSessionEvicted() {
	if m != nil {
		m.mcpEvicted.Inc()
	}
}

func (m *Metrics) Queued(category string, delta float64) {
	if m != nil {
		m.queueDepth.WithLabelValues(category).Add(delta)
	}
}

// ClusterQueues registers the gauges toolbelt_queue_cluster_running and
// toolbelt_queue_cluster_waiting of each category, read from depth at
// scrape time (within 2 s for them all): the queues the instances share,
// so every instance reports the same numbers (a category whose depth
// cannot be read is left out).
func (m *Metrics) ClusterQueues(categories []string, depth func(ctx context.Context, category string) (running, waiting int64, err error)) {
	if m != nil {
		m.reg.MustRegister(&clusterQueues{categories: categories, depth: depth,
			running: prometheus.NewDesc("toolbelt_queue_cluster_running",
				"Calls holding a slot of their category's queue in the cluster (the same on every instance).", []string{"category"}, nil),
			waiting: prometheus.NewDesc("toolbelt_queue_cluster_waiting",
				"Calls waiting for a slot of their category's queue in the cluster (the same on every instance).", []string{"category"}, nil)})
	}
}

type clusterQueues struct {
	categories       []string
	depth            func(ctx context.Context, category string) (running, waiting int64, err error)
	running, waiting *prometheus.Desc
}

func (c *clusterQueues) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.waiting
}

func (c *clusterQueues) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, cat := range c.categories {
		running, waiting, err := c.depth(ctx, cat)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(running), cat)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting), cat)
	}
}

// QueueRefused counts a call refused QUEUE_FULL at bound ("category" or
// "principal").
func (m *Metrics) QueueRefused(category, bound string) {
	if m != nil {
		m.queueRefused.WithLabelValues(category, bound).Inc()
	}
}

// CallbackHeldBack counts a due delivery held back for its principal's
// share of the delivery workers.
func (m *Metrics) CallbackHeldBack() {
	if m != nil {
		m.callbackHeld.Inc()
	}
}

func (m *Metrics) QueueWaited(category string, d time.Duration) {
	if m != nil {
		m.queueWait.WithLabelValues(category).Observe(d.Seconds())
	}
}

func (m *Metrics) Decided(decision string) {
	if m != nil {
		m.approvalsDecided.WithLabelValues(decision).Inc()
	}
}

// TakenOver counts a background call taken over from a stopped instance.
func (m *Metrics) TakenOver(outcome string) {
	if m != nil {
		m.takenOver.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) SandboxKill(reason string) {
	if m != nil {
		m.sandboxKills.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) Embedded(d time.Duration, err error) {
	if m != nil {
		m.embedSeconds.Observe(d.Seconds())
		if err != nil {
			m.embedErrors.Inc()
		}
	}
}

// Retrieval outcomes of a call after a selection (see RetrievalOutcome).
const (
	RetrievalOffered    = "offered"
	RetrievalNotOffered = "not_offered"
	RetrievalUnknown    = "unknown_tool"
)

// Retrieved records how a call related to its session's preceding
// selection: rank is the called tool's place in it, 0 when not offered;
// known is false for a tool that does not exist (counted as "unknown", so
// invented names do not grow the series).
func (m *Metrics) Retrieved(tool string, known bool, rank int) {
	if m == nil {
		return
	}
	switch {
	case !known:
		m.retrieval.WithLabelValues("unknown", RetrievalUnknown).Inc()
	case rank == 0:
		m.retrieval.WithLabelValues(tool, RetrievalNotOffered).Inc()
	default:
		m.retrieval.WithLabelValues(tool, RetrievalOffered).Inc()
		m.retrievalRank.Observe(float64(rank))
	}
}

func (m *Metrics) Selected(d time.Duration) {
	if m != nil {
		m.selectSeconds.Observe(d.Seconds())
	}
}

// HTTPRequest records one HTTP request (route is the matched pattern, or
// "unmatched").
func (m *Metrics) HTTPRequest(route, method string, status int, d time.Duration) {
	if m != nil {
		switch method {
		case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		default:
			method = "other" // a client's made-up methods must not grow the series
		}
		s := m.httpSeries(route, method, status)
		s.count.Inc()
		s.seconds.Observe(d.Seconds())
	}
}
