package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
)

// Under the stateless protocol (2026-07-28) every request stands alone,
// and the go-sdk serves each by building a session for it and decoding
// the message over and over, each decode taking a fresh 32 KB buffer: a
// cached tools/call cost five times the CPU of the same call through the
// REST API (profiled: two thirds of it the SDK's decoding and the garbage
// it leaves). ServeStateless answers the two methods agents send most,
// tools/call and tools/list, without it, byte for byte as the SDK would
// (TestMCPStatelessAsSDK holds them equal, errors included); anything it
// does not recognise exactly, it leaves to the SDK.

// statelessVersion is the protocol version ServeStateless answers.
const statelessVersion = protocolResultType

// The _meta keys of the stateless protocol's requests.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
)

// statelessCall is one request ServeStateless answers.
type statelessCall struct {
	id     jsonrpc.ID
	method string
	// params of a tools/call; cursor of a tools/list.
	params *mcp.CallToolParamsRaw
	cursor string
	// opens says the client declared URL mode elicitation.
	opens bool
}

// ServeStateless answers r, a stateless request (its MCP-Protocol-Version
// header names 2026-07-28) that principal p sent with subjectToken (its
// token for token exchange, or ""), when it is one tools/call or
// tools/list, as the SDK's stateless transport would, and says whether it
// did. Otherwise r is left as it came (its body read again from the
// start), for the SDK. The request's end cancels the call.
func (s *Server) ServeStateless(w http.ResponseWriter, r *http.Request, p *models.Principal, subjectToken string) bool {
	if r.Method != http.MethodPost || r.Header.Get("MCP-Protocol-Version") != statelessVersion || !acceptsBoth(r.Header.Values("Accept")) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	if err != nil {
		return false
	}
	call, ok := parseStateless(body, r.Header)
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false
	}
	ctx := r.Context()
	var result mcp.Result
	switch call.method {
	case "tools/list":
		// A page's answer is the same for every request that lists it
		// (the page is kept under what it depends on): encoded once.
		res, page, err := s.listPage(ctx, p, call.cursor)
		var raw json.RawMessage
		if err == nil {
			raw, err = page.stateless.get(func() (json.RawMessage, error) {
				res.ResultType = "complete"
				s.signed(res)
				return marshalResult(res)
			})
		}
		s.write(ctx, w, call.id, raw, err)
		return true
	case "tools/call":
		var res *mcp.CallToolResult
		if res, err = s.callTool(ctx, p, subjectToken, r.Header, nil, call.opens, call.params); err == nil {
			result = completed(res)
		}
	}
	if err == nil {
		s.signed(result)
	}
	s.answer(ctx, w, call.id, result, err)
	return true
}

// signed names the server in res's _meta, as the SDK does in each result
// of the stateless protocol (SEP-2575), unless res names one already.
func (s *Server) signed(res mcp.Result) {
	m := res.GetMeta()
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m[mcp.MetaKeyServerInfo]; ok {
		return
	}
	m[mcp.MetaKeyServerInfo] = s.impl
	res.SetMeta(m)
}

// answer writes the response to request id as the SDK's stateless
// transport does: an event stream of one message, or, for the errors the
// protocol gives an HTTP status, that status and the bare message.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, id jsonrpc.ID, result mcp.Result, err error) {
	var raw json.RawMessage
	if err == nil {
		if raw, err = marshalResult(result); err != nil {
			s.log.ErrorContext(ctx, "mcp stateless answer", "err", err)
			err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
	}
	s.write(ctx, w, id, raw, err)
}

// write is answer with the result encoded (raw) or the error.
func (s *Server) write(ctx context.Context, w http.ResponseWriter, id jsonrpc.ID, raw json.RawMessage, err error) {
	resp := &jsonrpc.Response{ID: id, Result: raw}
	if err != nil {
		resp.Result = nil
		rpc, ok := err.(*jsonrpc.Error)
		if !ok { // as the SDK's wire: the message said, a wrapped code kept
			rpc = &jsonrpc.Error{Message: err.Error()}
			var wrapped *jsonrpc.Error
			if errors.As(err, &wrapped) {
				rpc.Code = wrapped.Code
			}
		}
		resp.Error = rpc
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		s.log.ErrorContext(ctx, "mcp stateless answer", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if status := errorStatus(resp.Error); status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(data)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	var b bytes.Buffer
	b.Grow(len("event: message\ndata: \n\n") + len(data))
	b.WriteString("event: message\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	_, _ = w.Write(b.Bytes())
	_ = http.NewResponseController(w).Flush()
}

// errorStatus is the HTTP status the stateless protocol gives an error
// answer (SEP-2575), 0 for the rest, which go on an event stream.
func errorStatus(err error) int {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) {
		return 0
	}
	switch rpc.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// marshalResult encodes a result as the SDK does: encoding/json without
// HTML escaping, no newline after.
func marshalResult(v mcp.Result) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// parseStateless reads body as one tools/call or tools/list of the
// stateless protocol that the SDK would pass to the server's handler
// unchanged: its headers say its method (and tool), its _meta the
// protocol version of its header and the client's capabilities, and it
// asks for no progress. Fields are matched exactly (the SDK's decoder
// ignores no case), and any field ServeStateless does not know leaves the
// request to the SDK.
func parseStateless(body []byte, header http.Header) (statelessCall, bool) {
	var call statelessCall
	var msg map[string]json.RawMessage
	if !strictObject(body, &msg, "jsonrpc", "id", "method", "params") ||
		string(msg["jsonrpc"]) != `"2.0"` || json.Unmarshal(msg["method"], &call.method) != nil ||
		call.method != header.Get("Mcp-Method") {
		return call, false
	}
	id, ok := requestID(msg["id"])
	if !ok {
		return call, false
	}
	call.id = id
	var params map[string]json.RawMessage
	switch call.method {
	case "tools/list":
		if !strictObject(msg["params"], &params, "cursor", "_meta") ||
			params["cursor"] != nil && json.Unmarshal(params["cursor"], &call.cursor) != nil {
			return call, false
		}
	case "tools/call":
		call.params = &mcp.CallToolParamsRaw{}
		if !strictObject(msg["params"], &params, "name", "arguments", "_meta") ||
			json.Unmarshal(params["name"], &call.params.Name) != nil || call.params.Name == "" ||
			call.params.Name != header.Get("Mcp-Name") {
			return call, false
		}
		call.params.Arguments = params["arguments"]
	default:
		return call, false
	}
	meta, opens, ok := statelessMeta(params["_meta"], header)
	if !ok {
		return call, false
	}
	if call.params != nil {
		call.params.Meta = meta
	}
	call.opens = opens
	return call, true
}

// statelessMeta reads a request's _meta: it must name the protocol
// version of the request's header and hold the client's capabilities
// (and may name the client); a request with a progress token is the
// SDK's, which sends progress. meta is what the call reads of it (the
// call session it names), opens says the capabilities declare URL mode
// elicitation.
func statelessMeta(raw json.RawMessage, header http.Header) (meta mcp.Meta, opens, ok bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return nil, false, false
	}
	var version string
	if json.Unmarshal(fields[metaProtocolVersion], &version) != nil || version != header.Get("MCP-Protocol-Version") {
		return nil, false, false
	}
	if _, progress := fields["progressToken"]; progress {
		return nil, false, false
	}
	var caps mcp.ClientCapabilities
	if c := fields[metaClientCapabilities]; !isObject(c) || json.Unmarshal(c, &caps) != nil {
		return nil, false, false
	}
	if info, present := fields[metaClientInfo]; present {
		var impl mcp.Implementation
		if !isObject(info) || json.Unmarshal(info, &impl) != nil {
			return nil, false, false
		}
	}
	// Of the rest of _meta, the call reads its session alone.
	if v, present := fields[SessionMeta]; present {
		var session any
		if json.Unmarshal(v, &session) != nil {
			return nil, false, false
		}
		meta = mcp.Meta{SessionMeta: session}
	}
	return meta, capsOpenURLs(&caps), true
}

// strictObject decodes raw, a JSON object whose keys are all among known
// (spelled exactly), into out.
func strictObject(raw json.RawMessage, out *map[string]json.RawMessage, known ...string) bool {
	if !isObject(raw) || json.Unmarshal(raw, out) != nil {
		return false
	}
	for k := range *out {
		if !contains(known, k) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// isObject says whether raw is a JSON object (not null, not another value).
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// requestID is a request's id, a string or an integer, as the SDK reads it.
func requestID(raw json.RawMessage) (jsonrpc.ID, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return jsonrpc.ID{}, false
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	n, err := strconv.ParseInt(string(t), 10, 53)
	if err != nil || strings.HasPrefix(string(t), "-0") || (len(t) > 1 && t[0] == '0') {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
}

// acceptsBoth says whether Accept names JSON and event streams, as the
// transport requires.
func acceptsBoth(values []string) bool {
	jsonOK, streamOK := false, false
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(raw, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json":
				jsonOK = true
			case "text/event-stream":
				streamOK = true
			}
		}
	}
	return jsonOK && streamOK
}

// errReader fails with err (nil: io.EOF).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}
