package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"toolbelt/views"
)

// Dashboard is the console's first page.
func (h *Handler) Dashboard(c *gin.Context) error {
	ctx := c.Request.Context()
	cats, err := h.Registry.Categories(ctx)
	if err != nil {
		return err
	}
	d := views.DashboardData{}
	for _, cat := range cats {
		d.Categories = append(d.Categories, views.CategoryCount{Name: cat.Category, Tools: cat.Tools})
	}
	return h.Render(c, http.StatusOK, views.Dashboard(h.Page(c, "Dashboard"), d))
}
