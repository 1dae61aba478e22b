package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/sandbox"
)

// SelectionStatus is what readiness asks of the selection index.
type SelectionStatus interface {
	Status() string     // the embedder and what it has indexed
	EmbedFailing() bool // the embedder fails and ranking is lexical
	Host() HostCaps     // what the host can run
}

// Health reports whether the service can do its work, and which optional
// mechanisms (embedder, sandbox) are in use.
type Health struct {
	store     *models.Store
	selector  SelectionStatus
	embedNote string
	start     time.Time
	sandbox   *sandbox.Status
	toolFiles *catalog.ToolFiles
	cluster   ClusterStatus
	checks    []namedCheck
}

// ClusterStatus is what readiness tells of the instance among others.
type ClusterStatus interface {
	Instance() string // its name
	Role() string     // leader or follower
}

// namedCheck is a component probed by a function (Redis, say).
type namedCheck struct {
	name  string
	check func(context.Context) Component
}

// WithCluster adds the instance's name and role to the report.
func (h *Health) WithCluster(c ClusterStatus) *Health {
	h.cluster = c
	return h
}

// WithCheck adds component name, probed by check at each report; a
// component down makes the service not ready.
func (h *Health) WithCheck(name string, check func(context.Context) Component) *Health {
	h.checks = append(h.checks, namedCheck{name, check})
	return h
}

// WithToolFiles adds the watched tool files to the report: degraded while
// a file cannot be applied.
func (h *Health) WithToolFiles(tf *catalog.ToolFiles) *Health {
	h.toolFiles = tf
	return h
}

// WithSandbox adds the sandbox's isolation level to the report.
func (h *Health) WithSandbox(st sandbox.Status) *Health {
	h.sandbox = &st
	return h
}

// NewHealth returns the readiness checker. embedNote says why the
// embedder in use was chosen (e.g. Ollama unreachable), if there is more
// to say than its name.
func NewHealth(store *models.Store, selector SelectionStatus, embedNote string) *Health {
	return &Health{store: store, selector: selector, embedNote: embedNote, start: time.Now()}
}

// Component is the state of one part of the service.
type Component struct {
	Status string `json:"status" example:"ok"`
	Detail string `json:"detail,omitempty" example:"sqlite, WAL mode"`
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready bool `json:"ready"`
	// Instance and Role say which instance answered, and whether it runs
	// the leader-only background jobs (leader) or not (follower).
	Instance   string               `json:"instance,omitempty" example:"toolbelt-a"`
	Role       string               `json:"role,omitempty" example:"leader"`
	Uptime     string               `json:"uptime" example:"3m12s"`
	Components map[string]Component `json:"components"`
}

// Check probes every component within ctx.
func (h *Health) Check(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r := Readiness{Ready: true, Uptime: time.Since(h.start).Round(time.Second).String(), Components: map[string]Component{}}
	if err := h.store.Ping(ctx); err != nil {
		r.Ready = false
		r.Components["database"] = Component{Status: "down", Detail: err.Error()}
	} else {
		r.Components["database"] = Component{Status: "ok", Detail: h.store.Engine()}
	}
	if h.cluster != nil {
		r.Instance, r.Role = h.cluster.Instance(), h.cluster.Role()
	}
	for _, c := range h.checks {
		comp := c.check(ctx)
		if comp.Status == "down" {
			r.Ready = false
		}
		r.Components[c.name] = comp
	}
	if h.selector != nil {
		emb := Component{Status: "ok", Detail: h.selector.Status()}
		if h.embedNote != "" {
			emb.Status, emb.Detail = "degraded", emb.Detail+"; "+h.embedNote
		}
		if h.selector.EmbedFailing() {
			emb.Status = "degraded"
		}
		r.Components["embedder"] = emb
		host := h.selector.Host()
		yes := map[bool]string{true: "yes", false: "no"}
		r.Components["host"] = Component{Status: "ok", Detail: fmt.Sprintf("chromium %s, python3 %s, node %s, sandbox %s",
			yes[host.Chromium], yes[host.Python], yes[host.Node], yes[host.Sandbox])}
	}
	if h.sandbox != nil {
		// Without a sandbox the service still serves; tools that need one
		// refuse with SANDBOX_UNAVAILABLE.
		sb := Component{Status: "ok", Detail: h.sandbox.Backend + ", limits by " + h.sandbox.Limits}
		if h.sandbox.User != "" {
			sb.Detail += ", commands run as uid " + h.sandbox.User
		}
		if h.sandbox.Seccomp != "" {
			sb.Detail += ", seccomp: " + h.sandbox.Seccomp
		}
		if h.sandbox.Backend == sandbox.None {
			sb.Status, sb.Detail = "degraded", "none: "+h.sandbox.Reason
		} else if h.sandbox.Reason != "" {
			sb.Detail += "; " + h.sandbox.Reason
		}
		r.Components["sandbox"] = sb
	}
	if h.toolFiles != nil {
		tf := Component{Status: "ok", Detail: countOf(h.toolFiles.Count(), "tool", "tools") + " from " + h.toolFiles.Dir()}
		if ps := h.toolFiles.Problems(); len(ps) > 0 {
			parts := make([]string, len(ps))
			for i, p := range ps {
				parts[i] = p.File + ": " + p.Error
			}
			tf.Status = "degraded"
			tf.Detail += "; not applied (the previous versions stay): " + strings.Join(parts, "; ")
		}
		r.Components["tool_files"] = tf
	}
	return r
}

// countOf is n and the noun for it: "1 tool", "2 tools".
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
