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

// DefaultAlertConfig: half of at least 10 calls failing over 15 minutes,
// checked every 30 s.
var DefaultAlertConfig = AlertConfig{Window: 15 * time.Minute, Threshold: 0.5, MinCalls: 10, Every: 30 * time.Second}

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
// is flagged (Firing, for the console and GET /stats), logged, set to 1 in
// the metric toolbelt_tool_failure_alert, and posted to the webhook; when
// it falls back, the same happens with status "resolved".
type Alerts struct {
	store  *models.Store
	cfg    AlertConfig
	log    *slog.Logger
	client *http.Client
	now    func() time.Time
	gauge  *prometheus.GaugeVec

	mu     sync.Mutex
	firing map[string]Alert
}

// NewAlerts returns the monitor; m may be nil.
func NewAlerts(store *models.Store, cfg AlertConfig, m *Metrics, log *slog.Logger) *Alerts {
	a := &Alerts{store: store, cfg: cfg, log: log, client: &http.Client{Timeout: 10 * time.Second}, now: time.Now,
		firing: map[string]Alert{}}
	a.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "toolbelt_tool_failure_alert",
		Help: "1 while a tool's failure rate is past the alert threshold."}, []string{"tool"})
	if m != nil {
		m.Register(a.gauge)
	}
	return a
}

// WithClock makes the monitor read the time from now (tests).
func (a *Alerts) WithClock(now func() time.Time) *Alerts {
	a.now = now
	return a
}

// Run checks the rates every cfg.Every until ctx ends.
func (a *Alerts) Run(ctx context.Context) {
	t := time.NewTicker(a.cfg.Every)
	defer t.Stop()
	for {
		if err := a.Check(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("check tool failure rates", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check computes the rates once, firing and resolving alerts.
func (a *Alerts) Check(ctx context.Context) error {
	now := a.now().UTC()
	outcomes, err := a.store.ToolOutcomes(ctx, now.Add(-a.cfg.Window), now.Add(time.Nanosecond))
	if err != nil {
		return err
	}
	past := map[string]Alert{}
	for _, o := range outcomes {
		rate := ratio(o.Failed, o.Finished)
		if o.Finished >= a.cfg.MinCalls && rate > a.cfg.Threshold {
			past[o.Tool] = Alert{Tool: o.Tool, Status: "firing", FailureRate: rate, Calls: o.Finished, Failed: o.Failed,
				Window: a.cfg.Window.String(), Threshold: a.cfg.Threshold, Since: now}
		}
	}
	var changes []Alert
	a.mu.Lock()
	for tool, al := range past {
		if old, ok := a.firing[tool]; ok {
			al.Since = old.Since
		} else {
			changes = append(changes, al)
		}
		a.firing[tool] = al
	}
	for tool, old := range a.firing {
		if _, ok := past[tool]; !ok {
			delete(a.firing, tool)
			old.Status = "resolved"
			changes = append(changes, old)
		}
	}
	a.mu.Unlock()
	for _, al := range changes {
		a.announce(ctx, al)
	}
	return nil
}

func (a *Alerts) announce(ctx context.Context, al Alert) {
	if al.Status == "firing" {
		a.gauge.WithLabelValues(al.Tool).Set(1)
		a.log.WarnContext(ctx, "tool failure rate alert", "tool", al.Tool, "failure_rate", al.FailureRate,
			"calls", al.Calls, "failed", al.Failed, "window", al.Window, "threshold", al.Threshold)
	} else {
		a.gauge.WithLabelValues(al.Tool).Set(0)
		a.log.InfoContext(ctx, "tool failure rate alert resolved", "tool", al.Tool)
	}
	if a.cfg.Webhook == "" {
		return
	}
	body, _ := json.Marshal(al)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.Webhook, bytes.NewReader(body))
	if err != nil {
		a.log.ErrorContext(ctx, "alert webhook: invalid URL")
		return
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
		return
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		a.log.ErrorContext(ctx, "alert webhook", "err", fmt.Sprintf("answered %d", resp.StatusCode))
	}
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
