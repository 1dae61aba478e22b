package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/ops"
)

// StatsResponse is the usage over a window and the failure alerts firing
// now.
type StatsResponse struct {
	ops.Summary
	Alerts []ops.Alert `json:"alerts"`
}

// GetStats reports usage.
//
//	@Summary		Usage statistics
//	@ID			getStats
//	@Description	Over the last `hours` clock hours (the current one included): calls, success and cache hit rates, p50/p95 latency, failures by error code, calls per hour, and the same per tool; the busiest tools, tools whose failure rate rose in the last hour, pending approvals, and the failure-rate alerts firing now.
//	@Tags			stats
//	@Produce		json
//	@Param			hours	query		int	false	"Window in clock hours (1–168)"	default(24)
//	@Param			top		query		int	false	"How many busiest tools to name (1–100)"	default(5)
//	@Success		200		{object}	StatsResponse
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/stats [get]
func (h *Handler) GetStats(c *gin.Context) error {
	if err := OnlyQuery(c, "hours", "top"); err != nil {
		return err
	}
	var q ops.StatsQuery
	var err error
	if q.Hours, err = IntQuery(c, "hours"); err != nil {
		return err
	}
	if q.Top, err = IntQuery(c, "top"); err != nil {
		return err
	}
	// 0 means the default to the service: asked for, it is out of range.
	if c.Query("hours") != "" && q.Hours < 1 {
		return models.ErrInvalid.Errorf("hours must be between 1 and %d", ops.MaxStatsHours)
	}
	if c.Query("top") != "" && q.Top < 1 {
		return models.ErrInvalid.Errorf("top must be between 1 and 100")
	}
	sum, err := h.Stats.Summary(c.Request.Context(), q)
	if err != nil {
		return err
	}
	alerts := h.Alerts.Firing()
	if alerts == nil {
		alerts = []ops.Alert{}
	}
	c.JSON(http.StatusOK, StatsResponse{Summary: *sum, Alerts: alerts})
	return nil
}
