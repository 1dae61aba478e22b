package handlers

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

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

// Readyz says whether the service can work, and which embedder and sandbox
// it uses.
//
//	@Summary	Readiness
//	@ID			readyz
//	@Security
//	@Tags		health
//	@Produce	json
//	@Success	200	{object}	ops.Readiness
//	@Failure	503	{object}	ops.Readiness
//	@Router		/readyz [get]
func (h *Handler) Readyz(c *gin.Context) {
	r := h.Health.Check(c.Request.Context())
	status := http.StatusOK
	if !r.Ready {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, r)
}

// Home renders the landing page with links to the API documentation and
// health endpoints.
func (h *Handler) Home(c *gin.Context) {
	r := h.Health.Check(c.Request.Context())
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
