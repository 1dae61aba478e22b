package handlers

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"toolbelt/models"
	"toolbelt/services/audit"
)

// auditParams are the query parameters of the audit log, in the API and
// the console alike.
var auditParams = []string{"actor", "action", "target", "since", "until", "sort", "cursor", "limit", "format"}

// AuditQuery reads the audit log's filters from the query string.
func AuditQuery(c *gin.Context) (audit.Query, error) {
	if err := OnlyQuery(c, auditParams...); err != nil {
		return audit.Query{}, err
	}
	q := audit.Query{Actor: c.Query("actor"), Action: c.Query("action"), Target: c.Query("target"),
		Since: c.Query("since"), Until: c.Query("until"), Sort: c.Query("sort"), Cursor: c.Query("cursor")}
	var err error
	if q.Limit, err = IntQuery(c, "limit"); err != nil {
		return q, err
	}
	if q.Limit == 0 && c.Query("limit") != "" {
		return q, models.ErrInvalid.Errorf("limit=0 must be between 1 and %d", audit.MaxLimit)
	}
	_, err = q.Filter()
	return q, err
}

// ListAudit returns the audit log, or streams all of it.
//
//	@Summary		Audit log
//	@ID			listAudit
//	@Description	What admins and reviewers did — tools registered, published, rolled back, retired or imported; principals created, disabled, enabled or deleted; keys issued or revoked; grants set; calls approved or denied — with who, when, through which door (api, console, mcp, system), the client's address and the key's id and label (never the key). Newest first unless sort says otherwise, a page at a time: pass next_cursor as cursor (with the same filters and sort) for the next. With format=ndjson or format=csv every matching entry is streamed instead (cursor and limit are then ignored). Only changes that succeeded are recorded, each in the transaction of the change.
//	@Tags			access
//	@Produce		json
//	@Produce		application/x-ndjson
//	@Produce		text/csv
//	@Param			actor	query		string	false	"Principal name (or system)"
//	@Param			action	query		string	false	"Action"	Enums(tool.register, tool.publish, tool.rollback, tool.retire, tool.import, principal.create, principal.disable, principal.enable, principal.delete, key.issue, key.revoke, grants.set, approval.approve, approval.deny)
//	@Param			target	query		string	false	"Target, such as tool:file_read, principal:2, key:3, approval:<id>"
//	@Param			since	query		string	false	"RFC 3339 time, inclusive"
//	@Param			until	query		string	false	"RFC 3339 time, exclusive"
//	@Param			sort	query		string	false	"Order: newest first (default), oldest first, or by a column A to Z (actor) or Z to A (-actor), newest first within each"	Enums(-time, time, actor, -actor, action, -action, target, -target)
//	@Param			cursor	query		string	false	"next_cursor of the previous page"
//	@Param			limit	query		int		false	"Page size (default 50, at most 500)"
//	@Param			format	query		string	false	"Stream every entry instead of a page"	Enums(json, ndjson, csv)
//	@Success		200		{object}	audit.Page
//	@Failure		400		{object}	ErrorBody
//	@Failure		401		{object}	ErrorBody
//	@Failure		403		{object}	ErrorBody
//	@Security		BearerAuth
//	@Router			/api/v1/audit [get]
func (h *Handler) ListAudit(c *gin.Context) error {
	q, err := AuditQuery(c)
	if err != nil {
		return err
	}
	switch format := c.Query("format"); format {
	case "", "json":
		page, err := h.Audit.List(c.Request.Context(), q)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, page)
		return nil
	case "ndjson", "csv":
		ExportAudit(c, h.Audit, h.Log, q, format)
		return nil
	default:
		return models.ErrInvalid.Errorf("format=%s: use json, ndjson or csv", strconv.Quote(format))
	}
}

// auditColumns are the CSV export's columns.
var auditColumns = []string{"id", "at", "actor", "actor_role", "via", "key_id", "key_label", "client_ip", "request_id", "action", "target", "detail"}

// ExportAudit streams every entry of q in the audit log a as NDJSON or CSV
// (the API's format=ndjson|csv and the console's export). Once the first
// byte is out the status is sent: a failure after is logged and cuts the
// stream short (a client sees a truncated file, never a wrong one).
func ExportAudit(c *gin.Context, a *audit.Log, log *slog.Logger, q audit.Query, format string) {
	w := bufio.NewWriterSize(c.Writer, 32<<10)
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Disposition", `attachment; filename="toolbelt-audit.`+format+`"`)
	var write func(models.AuditEntry) error
	var cw *csv.Writer
	if format == "csv" {
		c.Header("Content-Type", "text/csv; charset=utf-8")
		cw = csv.NewWriter(w)
		_ = cw.Write(auditColumns)
		write = func(e models.AuditEntry) error {
			return cw.Write([]string{strconv.FormatUint(uint64(e.ID), 10), e.At.Format(time.RFC3339Nano), e.Actor, e.ActorRole, e.Via,
				strconv.FormatUint(uint64(e.KeyID), 10), cell(e.KeyLabel), e.ClientIP, e.RequestID, e.Action, cell(e.Target), cell(e.Detail)})
		}
	} else {
		c.Header("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		write = func(e models.AuditEntry) error { return enc.Encode(e) }
	}
	c.Status(http.StatusOK)
	n := 0
	err := a.Export(c.Request.Context(), q, func(e models.AuditEntry) error {
		if err := write(e); err != nil {
			return err
		}
		if n++; n%500 == 0 { // a page at a time reaches the client
			if cw != nil {
				cw.Flush()
			}
			if err := w.Flush(); err != nil {
				return err
			}
			c.Writer.Flush()
		}
		return nil
	})
	if cw != nil {
		cw.Flush()
	}
	_ = w.Flush()
	if err != nil {
		log.ErrorContext(c.Request.Context(), "audit export cut short", "err", err, "entries", n, "request_id", c.GetString(RequestIDKey))
	}
}

// cell keeps a free-text CSV value from being read as a formula by a
// spreadsheet (CSV injection): one starting with = + - @ gets a quote.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
