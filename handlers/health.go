package handlers

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"toolbelt/services/access"
	"toolbelt/services/ops"
	"toolbelt/views"
)

// Healthz says the process is up.
//
//	@Summary	Liveness
//	@ID			healthz
//	@Security
//	@Tags		health
//	@Produce	json
//	@Success	200	{object}	map[string]string
//	@Router		/healthz [get]
func (h *Handler) Healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// Readyz says whether the service can work, what stops it when it cannot,
// and which embedder and sandbox it uses.
//
//	@Summary		Readiness
//	@ID				readyz
//	@Description	Probes, at most once a second each and within 2 s in all, what the instance needs: `database` (a ping), `disk` (free space on the data directory's file system: `full` below 64 MiB or 1% of it, whichever is smaller), `journal` (the call journal, where calls are spooled while the database is down, takes a write), `sessions` (a work directory can be made and written as sandboxed commands run) and `redis` (a PING, when configured). It answers 503, with `reasons` naming the components, when the instance cannot record calls (the database down and the journal unusable), when the disk is full, or when no work directory can be made; Redis down is `degraded` and stays 200 (instances fall back to Postgres). `embedder`, `host`, `sandbox` and `tool_files` say what is in use: `degraded` at worst. A database outage longer than the outage grace (`TOOLBELT_OUTAGE_GRACE`, 5 minutes) answers 503 too: from that moment the instance refuses every call. Host paths are shown to an admin (Bearer key or console session) alone; anyone else reads `$TOOLBELT_DATA_DIR` and `$TOOLBELT_TOOLS_DIR` in their place.
//	@Security
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	ops.Readiness
//	@Failure		503	{object}	ops.Readiness
//	@Router			/readyz [get]
func (h *Handler) Readyz(c *gin.Context) {
	r := h.readiness(c)
	status := http.StatusOK
	if !r.Ready {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, r)
}

// readiness is the report for the caller: host paths are for admins
// alone (a Bearer key or a console session the web layer resolved), so
// an anonymous probe learns the states, not where the data lives.
func (h *Handler) readiness(c *gin.Context) ops.Readiness {
	r := h.Health.Check(c.Request.Context())
	if p := CurrentPrincipal(c); p != nil && p.Role == access.RoleAdmin {
		return r
	}
	return h.Health.WithoutHostPaths(r)
}

// Home renders the landing page with links to the API documentation and
// health endpoints.
func (h *Handler) Home(c *gin.Context) {
	r := h.readiness(c)
	d := views.HomeData{Swagger: h.Links.Swagger, Healthz: h.Links.Healthz, Readyz: h.Links.Readyz, Ready: r.Ready}
	names := make([]string, 0, len(r.Components))
	for name := range r.Components {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		comp := r.Components[name]
		d.Components = append(d.Components, views.ComponentRow{Name: name, Status: comp.Status, Detail: comp.Detail})
	}
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Status(http.StatusOK)
	if err := views.Home(d).Render(c.Request.Context(), c.Writer); err != nil {
		h.Log.ErrorContext(c.Request.Context(), "render home page", "err", err)
	}
}
