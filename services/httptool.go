package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"toolbelt/services/netpolicy"
	"unicode/utf8"

	"toolbelt/models"
)

// Limits of http_request.
const MaxHTTPResponseBytes = 1 << 20

// httpRequest is the http_request built-in.
func (inv *Invoker) httpRequest(ctx context.Context, c *call) (any, error) {
	rawURL, _ := c.args["url"].(string)
	method, _ := c.args["method"].(string)
	if method == "" {
		method = http.MethodGet
	}
	body, _ := c.args["body"].(string)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, &toolError{code: models.CodeValidation, msg: err.Error(), suggestion: "Send an absolute http or https URL."}
	}
	if hs, ok := c.args["headers"].(map[string]any); ok {
		for k, v := range hs {
			if s, ok := v.(string); ok {
				req.Header.Set(k, s)
			}
		}
	}
	req.Header.Set("User-Agent", "Toolbelt/1 (+http_request)")
	return inv.doHTTP(ctx, c, req)
}

// doHTTP sends a request with the SSRF-guarded client and turns the answer
// into a result: status, a few headers, the body (capped); 5xx and 429
// are retryable upstream errors.
func (inv *Invoker) doHTTP(ctx context.Context, c *call, req *http.Request) (any, error) {
	resp, err := inv.httpClient.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, netpolicy.ErrAddressRefused):
			return nil, &toolError{code: models.CodeURLNotAllowed, msg: "the URL leads to an internal address", suggestion: "Only public addresses can be fetched."}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return nil, &toolError{code: models.CodeUpstream, msg: fmt.Sprintf("request failed: %v", err), retryable: true, suggestion: "The site did not answer; try again later."}
	}
	defer resp.Body.Close()
	// The host and status only: a URL's path and query may carry secrets.
	c.log.InfoContext(ctx, "http answered", "method", req.Method, "host", req.URL.Host, "status", resp.StatusCode)
	buf, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPResponseBytes+1))
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	truncated := len(buf) > MaxHTTPResponseBytes
	if truncated {
		buf = buf[:MaxHTTPResponseBytes]
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, &toolError{code: models.CodeUpstream, msg: fmt.Sprintf("%s answered %s", req.URL.Host, resp.Status), retryable: true,
			suggestion: "The site is failing or limiting requests; wait and try again."}
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
