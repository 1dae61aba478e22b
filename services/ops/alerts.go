package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolbelt/models"
)

// AlertConfig says when a tool's failures raise an alert: when, over the
// last Window, at least MinCalls of its calls ran to an end and more than
// Threshold of them did not succeed (refused calls never ran: they count
// in neither). Webhook, when set, receives a JSON
// POST when an alert fires and when it resolves.
type AlertConfig struct {
	Window    time.Duration
	Threshold float64
	MinCalls  int64
	Webhook   string
	// Every is how often the rates are checked.
	Every time.Duration
}

// DefaultAlertConfig is half of at least 10 calls failing over 15
// minutes, checked every 30 s.
func DefaultAlertConfig() AlertConfig {
	return AlertConfig{Window: 15 * time.Minute, Threshold: 0.5, MinCalls: 10, Every: 30 * time.Second}
}

// Alert is a tool whose failure rate is past the threshold.
type Alert struct {
	Tool        string    `json:"tool" example:"web_search"`
	Status      string    `json:"status" example:"firing" enums:"firing,resolved"`
	FailureRate float64   `json:"failure_rate" example:"0.62"`
	Calls       int64     `json:"calls" example:"40"`
	Failed      int64     `json:"failed" example:"25"`
	Window      string    `json:"window" example:"15m0s"`
	Threshold   float64   `json:"threshold" example:"0.5"`
	Since       time.Time `json:"since"`
}

// Alerts watches the failure rate of every tool. A tool past the threshold
// fires an alert: posted to the webhook once in the cluster, and on the
// instance that checks, flagged (Firing, for the console and GET /stats),
// logged and set to 1 in the metric toolbelt_tool_failure_alert; when it
// falls back, the same happens with status "resolved".
//
// What fires is kept in the database (models.AlertState), not in memory:
// the leader that checks after a failover continues from it, so it posts
// neither a firing alert already posted nor a resolution twice. A post is
// claimed before it is sent and recorded once answered, so two instances
// checking at once post it once; a post that fails is tried again at the
// next check, and one whose instance died while posting is taken over
// once its claim lapses (postHold).
type Alerts struct {
	store  *models.Store
	cfg    AlertConfig
	log    *slog.Logger
	client *http.Client
	now    func() time.Time
	gauge  *prometheus.GaugeVec

	mu     sync.Mutex
	firing map[string]Alert // as this instance last saw them
}

// failureRule names the failure-rate alerts in the store.
const failureRule = "failure_rate"

// postHold is how long an instance that claimed an alert's post has to
// send and record it before another may: past the webhook's timeout.
const postHold = 30 * time.Second

// AlertsDeps is what the monitor needs.
type AlertsDeps struct {
	Store  *models.Store
	Config AlertConfig
	// Metrics receives the alert gauge (nil: none).
	Metrics *Metrics
	Log     *slog.Logger
	// Now reads the time (time.Now when nil; tests pass a clock).
	Now func() time.Time
}

// NewAlerts returns the monitor.
func NewAlerts(d AlertsDeps) *Alerts {
	a := &Alerts{store: d.Store, cfg: d.Config, log: d.Log, client: &http.Client{Timeout: 10 * time.Second},
		now: d.Now, firing: map[string]Alert{}}
	if a.now == nil {
		a.now = time.Now
	}
	a.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "toolbelt_tool_failure_alert",
		Help: "1 while a tool's failure rate is past the alert threshold."}, []string{"tool"})
	if d.Metrics != nil {
		d.Metrics.Register(a.gauge)
	}
	return a
}

// Run checks the rates every cfg.Every until ctx ends. Then this instance
// no longer watches (it stops, or no longer leads): it forgets what it
// saw, which the store keeps for the next leader.
func (a *Alerts) Run(ctx context.Context) error {
	defer a.forget()
	t := time.NewTicker(a.cfg.Every)
	defer t.Stop()
	for {
		if err := a.Check(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("check tool failure rates", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check computes the rates once, firing and resolving alerts in the store,
// posting what was not posted yet, and updating this instance's view.
func (a *Alerts) Check(ctx context.Context) error {
	now := a.now().UTC()
	outcomes, err := a.store.ToolOutcomes(ctx, now.Add(-a.cfg.Window), now.Add(time.Nanosecond))
	if err != nil {
		return err
	}
	rates := map[string]Alert{}
	for _, o := range outcomes {
		rate := ratio(o.Failed, o.Finished)
		al := Alert{Tool: o.Tool, Status: models.AlertResolved, FailureRate: rate, Calls: o.Finished, Failed: o.Failed,
			Window: a.cfg.Window.String(), Threshold: a.cfg.Threshold}
		if o.Finished >= a.cfg.MinCalls && rate > a.cfg.Threshold {
			al.Status = models.AlertFiring
		}
		rates[o.Tool] = al
	}
	states, err := a.store.AlertStates(ctx, failureRule)
	if err != nil {
		return err
	}
	known := map[string]string{}
	for _, st := range states {
		known[st.Tool] = st.Status
	}
	changed := false
	for tool, al := range rates {
		if al.Status == models.AlertFiring && known[tool] != models.AlertFiring {
			if err := a.store.RaiseAlert(ctx, failureRule, tool, now); err != nil {
				return err
			}
			changed = true
		}
	}
	for tool, status := range known {
		if status == models.AlertFiring && rates[tool].Status != models.AlertFiring {
			if err := a.store.ResolveAlert(ctx, failureRule, tool, now); err != nil {
				return err
			}
			changed = true
		}
	}
	if changed {
		if states, err = a.store.AlertStates(ctx, failureRule); err != nil {
			return err
		}
	}
	seen := map[string]Alert{}
	for _, st := range states {
		al := rates[st.Tool]
		al.Tool, al.Status, al.Since = st.Tool, st.Status, st.Since
		al.Window, al.Threshold = a.cfg.Window.String(), a.cfg.Threshold
		if st.Notified != st.Status {
			if err := a.post(ctx, al); err != nil {
				return err
			}
		}
		if st.Status == models.AlertFiring {
			seen[st.Tool] = al
		}
	}
	a.see(ctx, seen)
	return nil
}

// post posts al to the webhook unless another instance posts it or did:
// it claims the post, sends it, and records it (or, when the webhook did
// not take it, lets it go for the next check).
func (a *Alerts) post(ctx context.Context, al Alert) error {
	now := a.now()
	claimed, err := a.store.ClaimAlertPost(ctx, failureRule, al.Tool, al.Status, now, now.Add(postHold))
	if err != nil || !claimed {
		return err
	}
	sent := a.send(ctx, al)
	// Recorded even when ctx ended during the post (leadership lost),
	// so the next leader neither posts it again nor waits for the claim.
	record, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return a.store.AlertPosted(record, failureRule, al.Tool, al.Status, sent, a.now())
}

// see makes firing what this instance shows, logging and setting the
// metric for each alert that begins or ends firing here.
func (a *Alerts) see(ctx context.Context, firing map[string]Alert) {
	a.mu.Lock()
	last := a.firing
	a.firing = firing
	a.mu.Unlock()
	for tool, al := range firing {
		if _, ok := last[tool]; !ok {
			a.gauge.WithLabelValues(tool).Set(1)
			a.log.WarnContext(ctx, "tool failure rate alert", "tool", tool, "failure_rate", al.FailureRate,
				"calls", al.Calls, "failed", al.Failed, "window", al.Window, "threshold", al.Threshold, "since", al.Since)
		}
	}
	for tool := range last {
		if _, ok := firing[tool]; !ok {
			a.gauge.WithLabelValues(tool).Set(0)
			a.log.InfoContext(ctx, "tool failure rate alert resolved", "tool", tool)
		}
	}
}

// forget drops what this instance saw, metric included: it no longer
// watches, and would show alerts that resolved since.
func (a *Alerts) forget() {
	a.mu.Lock()
	last := a.firing
	a.firing = map[string]Alert{}
	a.mu.Unlock()
	for tool := range last {
		a.gauge.DeleteLabelValues(tool)
	}
}

// send posts al to the webhook, and reports whether it took it (true
// without a webhook: there is nothing to post to).
func (a *Alerts) send(ctx context.Context, al Alert) bool {
	if a.cfg.Webhook == "" {
		return true
	}
	body, _ := json.Marshal(al)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.Webhook, bytes.NewReader(body))
	if err != nil {
		a.log.ErrorContext(ctx, "alert webhook: invalid URL")
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		// Not the URL: a webhook's address often holds its secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		a.log.ErrorContext(ctx, "alert webhook", "err", err)
		return false
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		a.log.ErrorContext(ctx, "alert webhook", "err", fmt.Sprintf("answered %d", resp.StatusCode))
		return false
	}
	return true
}

// Firing returns the alerts firing now, by tool name.
func (a *Alerts) Firing() []Alert {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Alert, 0, len(a.firing))
	for _, al := range a.firing {
		out = append(out, al)
	}
	slices.SortFunc(out, func(x, y Alert) int { return bytes.Compare([]byte(x.Tool), []byte(y.Tool)) })
	return out
}
