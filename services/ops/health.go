package ops

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// ClusterStatus is what readiness tells of the instance among others.
type ClusterStatus interface {
	Instance() string // its name
	Role() string     // leader or follower
}

// The states of a component.
const (
	StatusOK       = "ok"
	StatusDegraded = "degraded" // works, less well: the service stays ready
	StatusDown     = "down"
	StatusFull     = "full" // a disk below its threshold (DiskProbe)
)

// HealthDeps are what readiness reports on. Every field may be left out
// but Store; a probe left out is not reported.
type HealthDeps struct {
	Store    *models.Store
	Selector SelectionStatus
	// EmbedNote says why the embedder in use was chosen (e.g. Ollama
	// unreachable), if there is more to say than its name.
	EmbedNote string
	Sandbox   *sandbox.Status
	ToolFiles *catalog.ToolFiles
	Cluster   ClusterStatus

	// Disk is the data directory's file system (DiskProbe): full, the
	// instance can record nothing and make no work directory.
	Disk Probe
	// Journal is the call journal's directory (JournalProbe), where calls
	// are spooled while the database cannot take them; nil when there is
	// none: then calls are recorded in the database alone.
	Journal Probe
	// Sessions is the root of the session work directories
	// (SessionsProbe): down, no call can run (each makes its session's).
	Sessions Probe
	// Redis is the Redis server instances share through; nil without.
	// Down, it degrades the service: instances fall back to Postgres.
	Redis Probe
	// Upstreams are the upstream MCP servers: one failing, or with
	// changes waiting for an admin, degrades the service (only its tools
	// fail).
	Upstreams Probe
	// Outage is the database outage state the key check shares
	// (access.Outage): the database probe feeds it, and past its grace
	// the instance refuses calls, so it is not ready. Nil: an outage
	// leaves the instance ready as long as the journal takes the calls.
	Outage DatabaseOutage
	// HostPaths are the directories of this host the report names (the
	// data directory, the tool files'), each with what to say instead
	// to a caller who may not learn them (WithoutHostPaths).
	HostPaths map[string]string
}

// DatabaseOutage is since when the database has not answered, and
// whether the instance refuses calls for it (access.Outage).
type DatabaseOutage interface {
	Down(now time.Time)
	Up()
	Refusing(now time.Time) (since time.Time, refusing bool)
	Grace() time.Duration
}

// Health reports whether the service can do its work, and which optional
// mechanisms (embedder, sandbox) are in use.
type Health struct {
	d     HealthDeps
	start time.Time
	// The probes that cost I/O, each run at most once a second.
	database, disk, journal, sessions, redis, upstreams *cachedProbe
	paths                                               *strings.Replacer // HostPaths
}

// NewHealth returns the readiness checker of d.
func NewHealth(d HealthDeps) *Health {
	h := &Health{d: d, start: time.Now(), paths: hostPathReplacer(d.HostPaths)}
	h.database = cached(func(ctx context.Context) Component {
		if err := d.Store.Ping(ctx); err != nil {
			if d.Outage != nil {
				d.Outage.Down(time.Now())
			}
			return Component{Status: StatusDown, Detail: d.Store.Engine() + ": " + err.Error()}
		}
		if d.Outage != nil {
			d.Outage.Up()
		}
		return Component{Status: StatusOK, Detail: d.Store.Engine()}
	})
	h.disk, h.journal, h.sessions, h.redis, h.upstreams = cached(d.Disk), cached(d.Journal), cached(d.Sessions), cached(d.Redis), cached(d.Upstreams)
	return h
}

// Component is the state of one part of the service.
type Component struct {
	// Status is ok, degraded (works, less well), down, or full (a disk).
	Status string `json:"status" example:"ok" enums:"ok,degraded,down,full"`
	Detail string `json:"detail,omitempty" example:"sqlite, WAL mode"`
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready bool `json:"ready"`
	// Reasons say why the instance is not ready: one for each component
	// that stops it, naming it.
	Reasons []string `json:"reasons,omitempty" example:"disk: the data directory's disk is full"`
	// Instance and Role say which instance answered, and whether it runs
	// the leader-only background jobs (leader) or not (follower).
	Instance   string               `json:"instance,omitempty" example:"toolbelt-a"`
	Role       string               `json:"role,omitempty" example:"leader"`
	Uptime     string               `json:"uptime" example:"3m12s"`
	Components map[string]Component `json:"components"`
}

// checkTimeout bounds a whole report: the probes run at once, each
// within probeTimeout.
const checkTimeout = 2 * time.Second

// Check probes every component, at once, within ctx and checkTimeout.
// The service is not ready when it cannot record calls (the database down
// and no usable journal), when the data directory's disk is full, or when
// no session work directory can be made; Redis down only degrades it.
func (h *Health) Check(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	r := Readiness{Ready: true, Uptime: time.Since(h.start).Round(time.Second).String(), Components: map[string]Component{}}
	probes := map[string]*cachedProbe{"database": h.database, "disk": h.disk, "journal": h.journal, "sessions": h.sessions, "redis": h.redis, "upstreams": h.upstreams}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range probes {
		if p == nil {
			continue
		}
		wg.Go(func() {
			comp := p.get(ctx)
			mu.Lock()
			r.Components[name] = comp
			mu.Unlock()
		})
	}
	wg.Wait()
	h.judge(&r)
	if h.d.Cluster != nil {
		r.Instance, r.Role = h.d.Cluster.Instance(), h.d.Cluster.Role()
	}
	h.describe(&r)
	return r
}

// WithoutHostPaths is r for a caller who is not an admin: each host path
// of HostPaths is replaced by what it is, in every detail and reason (an
// error naming a file below one included).
func (h *Health) WithoutHostPaths(r Readiness) Readiness {
	out := r
	out.Reasons = make([]string, len(r.Reasons))
	for i, why := range r.Reasons {
		out.Reasons[i] = h.paths.Replace(why)
	}
	out.Components = make(map[string]Component, len(r.Components))
	for name, c := range r.Components {
		c.Detail = h.paths.Replace(c.Detail)
		out.Components[name] = c
	}
	return out
}

// hostPathReplacer replaces each path of paths, as given and absolute, by
// its name. A form without a separator ("data") would match prose, and is
// left; the longest form is tried first, so a path goes before its
// parent.
func hostPathReplacer(paths map[string]string) *strings.Replacer {
	type form struct{ path, name string }
	var forms []form
	for path, name := range paths {
		abs, _ := filepath.Abs(path)
		for _, f := range []string{path, abs} {
			if strings.ContainsRune(f, filepath.Separator) && f != string(filepath.Separator) {
				forms = append(forms, form{f, name})
			}
		}
	}
	slices.SortFunc(forms, func(a, b form) int { return cmp.Compare(len(b.path), len(a.path)) })
	args := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		args = append(args, f.path, f.name)
	}
	return strings.NewReplacer(args...)
}

// judge decides whether the probed components let the service work.
func (h *Health) judge(r *Readiness) {
	notReady := func(name, why string) {
		r.Ready = false
		r.Reasons = append(r.Reasons, name+": "+why)
	}
	db := r.Components["database"]
	journal, journaled := r.Components["journal"]
	var since time.Time
	var refusing bool
	if h.d.Outage != nil {
		since, refusing = h.d.Outage.Refusing(time.Now())
	}
	// Refusing first: it is what the key check decides by, and it may
	// have seen the database fail after the cached probe's ping.
	switch {
	case refusing:
		db.Status = StatusDown
		r.Components["database"] = db
		notReady("database", fmt.Sprintf("down since %s, longer than the outage grace (%s): API keys cannot be checked, calls are refused until it is back",
			since.UTC().Format(time.RFC3339), h.d.Outage.Grace()))
	case db.Status == StatusOK:
	case journaled && journal.Status == StatusOK:
		db.Detail += "; calls are spooled to the journal until it is back"
		if !since.IsZero() {
			db.Detail += fmt.Sprintf(", and refused from %s (the outage grace, %s, passed)", since.Add(h.d.Outage.Grace()).UTC().Format(time.RFC3339), h.d.Outage.Grace())
		}
		r.Components["database"] = db
	case journaled:
		notReady("database", "down, and the journal cannot take the calls either: no call can be recorded")
	default:
		notReady("database", "down: no call can be recorded")
	}
	if disk, ok := r.Components["disk"]; ok && disk.Status != StatusOK {
		notReady("disk", disk.Detail)
	}
	if s, ok := r.Components["sessions"]; ok && s.Status != StatusOK {
		notReady("sessions", "no call can run, each needing its work directory: "+s.Detail)
	}
	// Upstream servers only degrade it: their tools fail, no other.
	if up, ok := r.Components["upstreams"]; ok && up.Status == StatusDown {
		up.Status = StatusDegraded
		r.Components["upstreams"] = up
	}
	// Redis only degrades the service, whatever its probe says.
	if rd, ok := r.Components["redis"]; ok && rd.Status == StatusDown {
		rd.Status = StatusDegraded
		r.Components["redis"] = rd
	}
}

// describe adds what the service uses (the embedder, the sandbox, the
// tool files), which degrades it at most.
func (h *Health) describe(r *Readiness) {
	if sel := h.d.Selector; sel != nil {
		emb := Component{Status: StatusOK, Detail: sel.Status()}
		if h.d.EmbedNote != "" {
			emb.Status, emb.Detail = StatusDegraded, emb.Detail+"; "+h.d.EmbedNote
		}
		if sel.EmbedFailing() {
			emb.Status = StatusDegraded
		}
		r.Components["embedder"] = emb
		host := sel.Host()
		yes := map[bool]string{true: "yes", false: "no"}
		r.Components["host"] = Component{Status: StatusOK, Detail: fmt.Sprintf("chromium %s, python3 %s, node %s, sandbox %s",
			yes[host.Chromium], yes[host.Python], yes[host.Node], yes[host.Sandbox])}
	}
	if st := h.d.Sandbox; st != nil {
		// Without a sandbox the service still serves; tools that need one
		// refuse with SANDBOX_UNAVAILABLE.
		sb := Component{Status: StatusOK, Detail: st.Backend + ", limits by " + st.Limits}
		if st.User != "" {
			sb.Detail += ", commands run as uid " + st.User
		}
		if st.Seccomp != "" {
			sb.Detail += ", seccomp: " + st.Seccomp
		}
		if st.Backend == sandbox.None {
			sb.Status, sb.Detail = StatusDegraded, "none: "+st.Reason
		} else if st.Reason != "" {
			sb.Detail += "; " + st.Reason
		}
		r.Components["sandbox"] = sb
	}
	if tf := h.d.ToolFiles; tf != nil {
		tools, servers := tf.Count()
		what := countOf(tools, "tool", "tools")
		if servers > 0 {
			what += " and " + countOf(servers, "MCP server", "MCP servers")
		}
		comp := Component{Status: StatusOK, Detail: what + " from " + tf.Dir()}
		if ps := tf.Problems(); len(ps) > 0 {
			parts := make([]string, len(ps))
			for i, p := range ps {
				parts[i] = p.File + ": " + p.Error
			}
			comp.Status = StatusDegraded
			comp.Detail += "; not applied (the previous versions stay): " + strings.Join(parts, "; ")
		}
		r.Components["tool_files"] = comp
	}
}

// countOf is n and the noun for it: "1 tool", "2 tools".
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
