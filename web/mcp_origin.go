package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"toolbelt/handlers/mcpserver"
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

// normalOrigin is origin as scheme://host[:port] in lower case, as a
// browser sends it (no default port), if it is one (no user, path, query
// or fragment).
func normalOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Host, "*") {
		return "", false
	}
	host := u.Host
	if port := u.Port(); (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return strings.ToLower(u.Scheme + "://" + host), true
}

// loopbackOrigin says whether origin is a page the browser loaded from its
// own machine under a loopback name (localhost, 127.0.0.0/8, ::1), such as
// a local MCP inspector; a rebinding page names its own domain instead.
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
//
// A page of an allowed origin is a browser MCP client: its requests carry
// a key, so the browser asks first (a CORS preflight, OPTIONS), and reads
// the answers only when they name its origin (see cors).
func checkOrigin(d Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		origin := c.GetHeader("Origin")
		if origin == "" {
			c.Next()
			return
		}
		normal, ok := normalOrigin(origin)
		if ok && (loopbackOrigin(normal) || slices.Contains(d.MCPAllowedOrigins, normal)) {
			cors(c.Writer.Header(), origin)
			c.Next()
			return
		}
		d.Handler.Fail(c, models.ErrForbidden.Errorf("requests from web pages at %q may not use %s; "+
			"an admin may allow that origin with TOOLBELT_MCP_ALLOWED_ORIGINS", origin, MCPPath))
	}
}

// cors lets the page at origin read the answer and the headers the
// streamable HTTP transport adds.
func cors(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate")
}

// preflight answers a browser's CORS preflight of /mcp, for an origin
// checkOrigin let through: the methods and headers a client sends. It
// needs no key (a browser sends none with it).
func preflight(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Access-Control-Allow-Methods", strings.Join(mcpMethods, ", "))
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, "+
		"MCP-Protocol-Version, Mcp-Method, Mcp-Name, "+mcpserver.SessionHeader)
	h.Set("Access-Control-Max-Age", "600")
	c.Status(http.StatusNoContent)
}

// requireInitialize answers, as the streamable HTTP transport says a
// server that keeps sessions should, 400 Bad Request with a JSON-RPC
// "invalid request" to a request that has no session and does not start
// one: the go-sdk would start a session for it and answer HTTP 200 with an
// error of code 0. It serves the session transport only (requests of
// 2026-07-28 and later go to the stateless one), where initialize starts
// a session and only ping and server/discover may come before it.
func requireInitialize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			status := http.StatusBadRequest
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "read request body: "+err.Error(), status)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		// A batch, a notification, or anything that is not one request,
		// is the SDK's to answer.
		if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || msg.Method == "" ||
			slices.Contains([]string{"initialize", "ping", "server/discover"}, msg.Method) {
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
