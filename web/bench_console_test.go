package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/models"
)

// BenchmarkConsolePages renders each console page server-side (no network:
// the router writes into a recorder) over a catalog of 10,000 tools and a
// history of 100,000 calls, and reports each page's median and p95.
func BenchmarkConsolePages(b *testing.B) {
	app := newTestApp(b)
	registerBenchTools(b, app)
	ctx := context.Background()
	const calls = 100_000
	start := time.Now().Add(-72 * time.Hour).UTC()
	statuses := []string{"succeeded", "succeeded", "succeeded", "failed", "refused"}
	batch := make([]*models.Call, 0, 500)
	for i := range calls {
		at := callTime(start, i)
		c := &models.Call{ID: fmt.Sprintf("%012x%012x", at.UnixMilli(), i), PrincipalID: app.ids[[]string{"admin", "agent"}[i%2]],
			SessionID: fmt.Sprintf("s%d", i%300), Tool: fmt.Sprintf("bench_tool_%05d", i%500), Version: "1.0.0",
			Arguments: `{"query":"invoices"}`, Status: statuses[i%len(statuses)], Result: `{"success":true}`,
			Attempts: 1, TotalMs: int64(i % 900), RunMs: int64(i % 800), CreatedAt: at, FinishedAt: &at}
		if c.Status != "succeeded" {
			c.ErrorCode = "EXECUTION_ERROR"
		}
		if batch = append(batch, c); len(batch) == cap(batch) {
			if err := app.store.SaveCalls(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	cookie := benchSignIn(b, app.handler, app.keys["admin"])
	sample := fmt.Sprintf("%012x%012x", callTime(start, calls/2).UnixMilli(), calls/2)
	pages := []string{
		"/admin",
		"/admin/tools",
		"/admin/tools?q=invoices&category=search",
		"/admin/tools/bench_tool_04242",
		"/admin/playground?q=find+invoices+in+a+record+set&limit=10",
		"/admin/approvals",
		"/admin/calls",
		"/admin/calls?tool=bench_tool_00042&status=failed",
		"/admin/calls/" + sample,
		"/admin/access",
	}
	for _, path := range pages {
		b.Run(benchName(path), func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.AddCookie(cookie)
				rec := httptest.NewRecorder()
				t0 := time.Now()
				app.handler.ServeHTTP(rec, req)
				took = append(took, time.Since(t0))
				if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `data-testid="error-`) {
					b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String()[:min(rec.Body.Len(), 300)])
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}

// callTime spreads the synthetic history evenly over three days.
func callTime(start time.Time, i int) time.Time {
	return start.Add(time.Duration(i) * (72 * time.Hour / 100_000))
}

// benchSignIn signs in through the form with a recorder and returns the
// session cookie.
func benchSignIn(b *testing.B, h http.Handler, key string) *http.Cookie {
	b.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/login", nil))
	doc, err := goquery.NewDocumentFromReader(rec.Body)
	if err != nil {
		b.Fatal(err)
	}
	token, _ := doc.Find(`input[name="_csrf"]`).Attr("value")
	form := url.Values{"key": {key}, "_csrf": {token}}
	req := httptest.NewRequest(http.MethodPost, "/admin/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range rec.Result().Cookies() {
		req.AddCookie(c)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == "tb_session" && c.Value != "" {
			return c
		}
	}
	b.Fatalf("sign in: %d", rec.Code)
	return nil
}

// benchName names a page's sub-benchmark after its path.
func benchName(path string) string {
	if path == "/admin" {
		return "dashboard"
	}
	return strings.NewReplacer("/", "_", "?", "_", "&", "_", "=", "-", "+", "-").Replace(strings.TrimPrefix(path, "/admin/"))
}
