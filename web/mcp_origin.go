package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
)

// ParseOrigins reads a comma-separated list of web origins
// (scheme://host[:port], as a browser sends them in Origin) and returns
// them in that form, lower case. A path, a wildcard or "null" is refused:
// each allowed origin is one site an admin trusts.
func ParseOrigins(list string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		origin, ok := normalOrigin(item)
		if !ok {
			return nil, fmt.Errorf("%q is not an origin: use scheme://host[:port], such as https://agents.example.com", item)
		}
		out = append(out, origin)
	}
	return out, nil
}

// normalOrigin is origin as scheme://host[:port] in lower case, if it is
// one (no user, path, query or fragment).
func normalOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Host, "*") {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}

// loopbackOrigin says whether origin is a page served from this machine
// under a loopback name (localhost, 127.0.0.0/8, ::1), such as a local MCP
// inspector; a rebinding page names its own domain instead.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkOrigin refuses, with 403, a request to /mcp sent by a web page of
// an origin nobody allowed. A page that rebinds its own domain to this
// server's address (DNS rebinding) would otherwise reach /mcp from inside
// the user's network, with whatever credentials the browser adds. A
// request without Origin comes from a program, not a page, and passes;
// the API key decides what it may do.
func checkOrigin(d Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		origin := c.GetHeader("Origin")
		if origin == "" {
			c.Next()
			return
		}
		normal, ok := normalOrigin(origin)
		if ok && (loopbackOrigin(normal) || slices.Contains(d.MCPAllowedOrigins, normal)) {
			c.Next()
			return
		}
		d.Handler.Fail(c, models.ErrForbidden.Errorf("requests from web pages at %q may not use %s; "+
			"an admin may allow that origin with TOOLBELT_MCP_ALLOWED_ORIGINS", origin, MCPPath))
	}
}

// requireInitialize answers, as the streamable HTTP transport says a
// server that keeps sessions should, 400 Bad Request with a JSON-RPC
// "invalid request" to a request that has no session and does not start
// one: the go-sdk would start a session for it and answer HTTP 200 with an
// error of code 0. A request of the stateless protocol (2026-07-28 and
// later, which names its version in _meta) needs no session.
func requireInitialize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		// A batch, or anything that is not one request, is the SDK's to
		// answer.
		if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || msg.Method == "" || msg.Method == "initialize" {
			next.ServeHTTP(w, r)
			return
		}
		if v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string); v >= StatelessProtocolVersion {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
			"code":    jsonrpc.CodeInvalidRequest,
			"message": fmt.Sprintf("%s needs a session: send initialize first, then its Mcp-Session-Id header", msg.Method),
		}})
	})
}
