package runners

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"toolbelt/services/netpolicy"

	"toolbelt/models"
)

// Limits of http_request.
const MaxHTTPResponseBytes = 1 << 20

// httpRequest is the http_request built-in.
func (t *Table) httpRequest(ctx context.Context, c *Call) (any, error) {
	rawURL, _ := c.Args["url"].(string)
	method, _ := c.Args["method"].(string)
	if method == "" {
		method = http.MethodGet
	}
	body, _ := c.Args["body"].(string)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, &Error{Code: models.CodeValidation, Message: err.Error(), Suggestion: "Send an absolute http or https URL."}
	}
	if hs, ok := c.Args["headers"].(map[string]any); ok {
		for k, v := range hs {
			if s, ok := v.(string); ok {
				req.Header.Set(k, s)
			}
		}
	}
	req.Header.Set("User-Agent", "Toolbelt/1 (+http_request)")
	return t.doHTTP(ctx, c, req)
}

// doHTTP sends a request with the SSRF-guarded client and turns the answer
// into a result: status, a few headers, the body (capped); 5xx and 429
// are retryable upstream errors.
func (t *Table) doHTTP(ctx context.Context, c *Call, req *http.Request) (any, error) {
	resp, err := t.httpClient.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, netpolicy.ErrAddressRefused):
			return nil, &Error{Code: models.CodeURLNotAllowed, Message: "the URL leads to an internal address", Suggestion: "Only public addresses can be fetched."}
		case errors.Is(err, netpolicy.ErrRedirectRefused):
			return nil, &Error{Code: models.CodeUpstream, Message: netpolicy.RedirectRefusal(err),
				Suggestion: "Do not retry: nothing was sent there. Call the address it redirects to if it is the one meant, or ask an administrator to point the tool at it."}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return nil, &Error{Code: models.CodeUpstream, Message: fmt.Sprintf("request failed: %v", err), Retryable: true, Suggestion: "The site did not answer; try again later."}
	}
	defer resp.Body.Close()
	// The host and status only: a URL's path and query may carry secrets.
	c.Log.InfoContext(ctx, "http answered", "method", req.Method, "host", req.URL.Host, "status", resp.StatusCode)
	buf, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPResponseBytes+1))
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	truncated := len(buf) > MaxHTTPResponseBytes
	if truncated {
		buf = buf[:MaxHTTPResponseBytes]
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, &Error{Code: models.CodeUpstream, Message: fmt.Sprintf("%s answered %s", req.URL.Host, resp.Status), Retryable: true,
			Suggestion: "The site is failing or limiting requests; wait and try again."}
	}
	out := map[string]any{"status": resp.StatusCode, "headers": flatHeaders(resp.Header), "truncated": truncated}
	if utf8.Valid(buf) {
		out["body"] = string(buf)
	} else {
		out["body_bytes"] = len(buf)
		out["body"] = ""
	}
	return out, nil
}

func flatHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"Content-Type", "Content-Length", "Last-Modified", "Etag", "Location", "Retry-After"} {
		if v := h.Get(k); v != "" {
			out[k] = v
		}
	}
	return out
}
