// Package mcpserver serves the tool catalog over the Model Context Protocol
// (the official go-sdk): tools/list offers what the caller may call,
// search_tools runs stage 2's selection, and tools/call goes through the
// same guard chain as POST /api/v1/calls, its refusals and approvals
// becoming isError results whose text tells the model what to do.
//
// The catalog differs per caller and changes while a session lasts, so the
// package answers tools/list and tools/call itself, in a receiving
// middleware of one shared mcp.Server, instead of registering tools on it.
// The transport authenticates each HTTP request and hands the principal in
// the request's token info (see TokenInfo), so every message acts as the
// principal whose key sent it.
package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/formats"
	"toolbelt/services/invoke"
	"toolbelt/services/runners"
	"toolbelt/services/selection"
	"toolbelt/services/tooldef"
)

// Names of the tools this server adds to the catalog (reserved: no
// registered tool takes them; one registered before they were reserved is
// hidden here).
const (
	SearchToolsName = tooldef.MCPSearchTools
	CallResultName  = tooldef.MCPCallResult
)

// PageSize is how many tools one tools/list page holds; clients follow
// nextCursor for the rest.
const PageSize = 500

// CacheScopePrivate is the cacheScope of every tools/list answer: the list
// is the caller's own (its grants decide it), so no shared cache may serve
// it to another principal.
const CacheScopePrivate = "private"

// principalKey and subjectTokenKey are where TokenInfo keeps the
// principal and the caller's token for token exchange.
const (
	principalKey    = "toolbelt/principal"
	subjectTokenKey = "toolbelt/subject-token"
)

// TokenInfo is the token info the transport attaches to an authenticated
// request: UserID binds the MCP session to the principal (the SDK refuses
// a session's messages from anyone else), and the principal itself rides
// along so each message acts as whoever sent it, with their current role.
// subjectToken, the caller's token of the organisation's OpenID provider
// (access.Grant.SubjectToken), rides along the same way, for the calls of
// that request only.
func TokenInfo(p *models.Principal, subjectToken string) *auth.TokenInfo {
	return &auth.TokenInfo{
		UserID: fmt.Sprintf("principal-%d", p.ID),
		// Keys do not expire; a revoked one is refused by the transport
		// before a message gets here.
		Expiration: time.Now().Add(time.Hour),
		Extra:      map[string]any{principalKey: p, subjectTokenKey: subjectToken},
	}
}

// Server answers MCP requests from the catalog, the selector and the
// invoker.
type Server struct {
	selector *selection.Selector
	invoker  *invoke.Invoker
	log      *slog.Logger
	mcp      *mcp.Server
	impl     *mcp.Implementation
	builtins []*mcp.Tool
	// waits caps the calls each principal holds open (see Deps.Waits).
	waits *access.Holds
	// following counts the calls held open for progress (see follow);
	// closing, closed by Close, ends their wait.
	following     sync.WaitGroup
	closing       chan struct{}
	closeOnce     sync.Once
	followFor     time.Duration
	progressEvery time.Duration
	// sessions are the open MCP sessions, their owners and what keeps
	// them busy (sessions.go).
	sessions sessionUses
	// pages are tools/list's decoded pages (listcache.go).
	pages *listCache
}

// Deps are what the MCP server is built from.
type Deps struct {
	Selector *selection.Selector
	Invoker  *invoke.Invoker
	// Waits, when set, caps what each principal holds open waiting for
	// its calls: a call followed with progress and a call_result that
	// waits each hold one, counted with the REST API's call event
	// streams, which wait the same way.
	Waits *access.Holds
	// Version is reported to clients.
	Version string
	Log     *slog.Logger
}

// New returns the MCP server of Toolbelt.
func New(d Deps) *Server {
	s := &Server{selector: d.Selector, invoker: d.Invoker, log: d.Log, waits: d.Waits, builtins: builtinTools(),
		pages: newListCache(), closing: make(chan struct{}), followFor: FollowFor, progressEvery: ProgressEvery}
	s.impl = &mcp.Implementation{Name: "toolbelt", Title: "Toolbelt", Version: d.Version}
	s.mcp = mcp.NewServer(s.impl, &mcp.ServerOptions{
		Instructions: "Toolbelt runs tools for you. Call " + SearchToolsName + " with your task to find the tools that fit it " +
			"(the list can be long). Some calls wait for a human reviewer's approval: their result says so, " +
			"and " + CallResultName + " fetches the outcome later.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Logger:       d.Log,
	})
	s.mcp.AddReceivingMiddleware(s.tools)
	return s
}

// hold holds one of principal p's waits, or refuses at its cap.
func (s *Server) hold(p *models.Principal) (release func(), err error) {
	if s.waits == nil {
		return func() {}, nil
	}
	return s.waits.Take(p.ID, 0)
}

// MCP returns the protocol server, for a transport to serve.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Close ends every open session. A client's event stream (the GET of the
// streamable transport) otherwise stays open, and a graceful HTTP shutdown
// would wait for it until its deadline; call Close once the calls in
// flight have been answered. Calls held open for progress are answered
// first, with where they stand.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.following.Wait()
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
}

// tools is the receiving middleware that answers tools/list and
// tools/call; every other method goes on to the SDK.
func (s *Server) tools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			if p, err := principalOf(req); err == nil {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
					s.opened(ss, p)
				}
			}
		case "tools/list":
			r, ok := req.(*mcp.ListToolsRequest)
			if !ok {
				break
			}
			p, err := principalOf(req)
			if err != nil {
				return nil, err
			}
			cursor := ""
			if r.Params != nil {
				cursor = r.Params.Cursor
			}
			res, err := s.list(ctx, p, cursor)
			if err != nil {
				return nil, err // not a typed nil: exactly one of the two is nil
			}
			return res, nil
		case "tools/call":
			r, ok := req.(*mcp.CallToolRequest)
			if !ok || r.Params == nil {
				break
			}
			p, err := principalOf(req)
			if err != nil {
				return nil, err
			}
			var header http.Header
			if extra := req.GetExtra(); extra != nil {
				header = extra.Header
			}
			res, err := s.callTool(ctx, p, subjectTokenOf(req), header, r.Session, opensURLs(r.Session), r.Params)
			if err != nil {
				return nil, err // not a typed nil: exactly one of the two is nil
			}
			return complete(r.Session, res), nil
		}
		return next(ctx, method, req)
	}
}

func principalOf(req mcp.Request) (*models.Principal, error) {
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		if p, ok := extra.TokenInfo.Extra[principalKey].(*models.Principal); ok && p != nil {
			return p, nil
		}
	}
	// The transport authenticates every request, so this is a wiring
	// fault, not the client's.
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "request not authenticated"}
}

// subjectTokenOf is the token for token exchange the request's HTTP
// request brought (TokenInfo), or "".
func subjectTokenOf(req mcp.Request) string {
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		s, _ := extra.TokenInfo.Extra[subjectTokenKey].(string)
		return s
	}
	return ""
}

var unsafeSessionChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// A client picks the call session (the work directory and the selection
// history) with the SessionHeader on its HTTP requests or, per call, with
// SessionMeta in the call's _meta; otherwise the MCP session names it. A
// session is the principal's own: two principals never share one.
const (
	SessionHeader = "Toolbelt-Session"
	SessionMeta   = "toolbelt/session_id"
)

// callTool answers a tools/call of principal p, whose HTTP request
// brought header and subjectToken (its token for token exchange, or ""),
// in MCP session ss (nil for a request that stands alone); opens says
// whether the client opens URLs for its user (connectRequired).
func (s *Server) callTool(ctx context.Context, p *models.Principal, subjectToken string, header http.Header,
	ss *mcp.ServerSession, opens bool, params *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	// This message's own token for token exchange, or none.
	ctx = runners.WithSubjectToken(ctx, subjectToken)
	session, err := callSession(header, ss, params.Meta)
	if err != nil {
		return refused(models.CodeValidation, sentence(err.Error())+
			" The "+sentence(invoke.SessionIDRule)+" Send none to use this MCP session's."), nil
	}
	return s.call(ctx, p, session, ss, opens, params)
}

// callSession is the call session a tools/call asks for, its HTTP request
// carrying header.
func callSession(header http.Header, ss *mcp.ServerSession, meta mcp.Meta) (string, error) {
	chosen, from := "", ""
	if v, ok := meta[SessionMeta]; ok {
		str, isString := v.(string)
		if !isString {
			return "", fmt.Errorf("_meta %q must be a string", SessionMeta)
		}
		chosen, from = str, "_meta "+strconv.Quote(SessionMeta)
	} else if header.Get(SessionHeader) != "" {
		chosen, from = header.Get(SessionHeader), "the "+SessionHeader+" header"
	}
	if from == "" {
		return sessionID(ss), nil
	}
	if !invoke.ValidSessionID(chosen) {
		return "", fmt.Errorf("%s: %q is not a session id", from, chosen)
	}
	return chosen, nil
}

// sessionID names the call session after the MCP session, so the files a
// conversation writes and the selections it makes stay together; without
// an MCP session the invoker's per-principal default applies.
func sessionID(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	return sessionName(ss.ID())
}

// sessionName turns an MCP session id into a call session id, which must
// be invoke.ValidSessionID ("mcp-" first, so never a dot).
func sessionName(mcpID string) string {
	id := unsafeSessionChars.ReplaceAllString(mcpID, "")
	if id == "" {
		return ""
	}
	id = "mcp-" + id
	if len(id) > 128 {
		id = id[:128]
	}
	return id
}

// list answers one page of tools/list: the server's own tools first, then
// the catalog the caller may call, in name order. The cursor is the last
// name of the previous page.
func (s *Server) list(ctx context.Context, p *models.Principal, cursor string) (*mcp.ListToolsResult, error) {
	res, _, err := s.listPage(ctx, p, cursor)
	return res, err
}

// listPage is list with the catalog page it answers from.
func (s *Server) listPage(ctx context.Context, p *models.Principal, cursor string) (*mcp.ListToolsResult, listPage, error) {
	after := ""
	// Each principal lists the tools it may call: only its own client may
	// keep the list (cacheScope private, which 2026-07-28 requires).
	res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}, Cacheable: mcp.Cacheable{CacheScope: CacheScopePrivate}}
	if cursor == "" {
		res.Tools = append(res.Tools, s.builtins...)
	} else {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(raw) == 0 {
			return nil, listPage{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor; list again from the start"}
		}
		after = string(raw)
	}
	page, err := s.page(ctx, p, after)
	if err != nil {
		s.log.ErrorContext(ctx, "mcp tools/list", "err", err)
		return nil, listPage{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	res.Tools = append(res.Tools, page.tools...)
	if page.next != "" {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(page.next))
	}
	return res, page, nil
}

// page is the catalog's page of p's tools after the name after: kept
// (listCache) when p's key is the same before and after reading it.
func (s *Server) page(ctx context.Context, p *models.Principal, after string) (listPage, error) {
	key, err := s.selector.CallableKey(ctx, p)
	if err != nil {
		return listPage{}, err
	}
	if page, ok := s.pages.get(pageKey{key, after}); ok {
		return page, nil
	}
	raws, next, err := s.selector.Callable(ctx, p, formats.FormatMCP, after, PageSize)
	if err != nil {
		return listPage{}, err
	}
	page := listPage{tools: make([]*mcp.Tool, 0, len(raws)), next: next, stateless: &encodedOnce{}}
	for _, raw := range raws {
		t, err := storedTool(raw)
		if err != nil {
			s.log.ErrorContext(ctx, "mcp tools/list: decode stored rendering", "err", err)
			continue
		}
		if t.Name == SearchToolsName || t.Name == CallResultName {
			continue
		}
		page.tools = append(page.tools, t)
	}
	if now, err := s.selector.CallableKey(ctx, p); err == nil && now == key {
		s.pages.put(pageKey{key, after}, page)
	}
	return page, nil
}

// storedTool decodes a tool's stored MCP rendering, its schemas kept as
// the JSON they are: decoded into maps and encoded again they cost a page
// of 500 tools some 50 ms (BenchmarkMCPToolsList10k).
func storedTool(raw json.RawMessage) (*mcp.Tool, error) {
	var stored struct {
		mcp.Tool
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, err
	}
	t := stored.Tool
	t.InputSchema = stored.InputSchema
	if len(stored.OutputSchema) > 0 && string(stored.OutputSchema) != "null" {
		t.OutputSchema = stored.OutputSchema
	}
	return &t, nil
}

// protocolResultType is the first MCP version whose tools/call results
// must say their resultType (SEP-2322).
const protocolResultType = "2026-07-28"

// complete marks res as a complete result for a client whose protocol
// requires resultType. The go-sdk sets it on the results of the tools it
// dispatches itself, in an unexported field; this server answers
// tools/call in a middleware, so the SDK's own decoder sets the field (from
// a result that holds nothing else) and res's fields are copied in, as they
// are: structuredContent keeps its numbers exact. As the SDK does, a
// session that never said its version speaks the newest.
func complete(ss *mcp.ServerSession, res *mcp.CallToolResult) *mcp.CallToolResult {
	if ss == nil || res == nil {
		return res
	}
	if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion < protocolResultType {
		return res
	}
	return completed(res)
}

// completeResult is an empty result marked complete, decoded once: the
// SDK's decoder takes a 32 KB buffer for each value it decodes.
var completeResult = sync.OnceValues(func() (mcp.CallToolResult, error) {
	var out mcp.CallToolResult
	err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &out)
	return out, err
})

// completed is res marked complete (TestCompleted holds it to the wire).
func completed(res *mcp.CallToolResult) *mcp.CallToolResult {
	out, err := completeResult()
	if err != nil {
		return res
	}
	out.Meta, out.IsError, out.StructuredContent = res.Meta, res.IsError, res.StructuredContent
	out.InputRequests, out.RequestState = res.InputRequests, res.RequestState
	if res.Content != nil {
		out.Content = res.Content
	}
	return &out
}

// call runs one tools/call; its error is the request's (connect.go).
func (s *Server) call(ctx context.Context, p *models.Principal, session string, ss *mcp.ServerSession, opens bool, params *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	switch params.Name {
	case SearchToolsName:
		return s.searchTools(ctx, p, session, params.Arguments), nil
	case CallResultName:
		return s.callResult(ctx, p, params.Arguments), nil
	}
	args := params.Arguments
	if len(strings.TrimSpace(string(args))) == 0 || string(args) == "null" {
		args = nil
	}
	ctx = models.WithDirections(ctx, directions{})
	token := params.GetProgressToken()
	if token != nil && ss != nil {
		ctx = invoke.WithListener(ctx, toolProgress(ctx, ss, token))
	}
	res, err := s.invoker.CallAcknowledged(ctx, p, invoke.CallRequest{Tool: params.Name, Arguments: args, SessionID: session})
	if err != nil {
		s.log.ErrorContext(ctx, "mcp call not recorded", "call_id", res.CallID, "err", err)
		return refused(models.CodeInternal, "the call could not be recorded. Try again."), nil
	}
	if token != nil && ss != nil && !models.Terminal(res.Status) {
		// Past the principal's cap of held waits the call is answered at
		// once, as to a client without a token: call_result reads the rest.
		if release, err := s.hold(p); err == nil {
			res = s.follow(ctx, p, ss, token, res)
			release()
		}
	}
	if ss != nil && !models.Terminal(res.Status) {
		s.unended(ss, res.CallID)
	}
	if err := connectRequired(opens, res); err != nil {
		return nil, err
	}
	return s.result(ctx, params.Name, res), nil
}

// result is Result, but an upstream MCP server's tool answers with its
// own content blocks (text, images, resources…) and structured content,
// as the server sent them (redacted), rather than their JSON as text.
func (s *Server) result(ctx context.Context, tool string, res invoke.ToolResult) *mcp.CallToolResult {
	out := Result(res)
	if !res.Success || s.invoker.Runner(ctx, tool) != tooldef.RunnerMCP {
		return out
	}
	var blocks mcp.CallToolResult
	if err := json.Unmarshal(res.Data, &blocks); err != nil || blocks.Content == nil {
		return out // not blocks any more: the JSON, as for any tool
	}
	blocks.Meta = out.Meta
	blocks.Content = append(blocks.Content, out.Content[1:]...) // what Result said beside the data
	return &blocks
}

// toolProgress passes the progress a tool reports while it runs (an
// upstream MCP server's notifications) on to the client, as progress of
// its request, with the tool's total and message: the tool's own numbers
// while it counts up, moved past what was sent when it counts again from
// the start (a retry's new attempt), so that they keep rising.
func toolProgress(ctx context.Context, ss *mcp.ServerSession, token any) func(string, any) {
	var n progressNumbers
	return func(event string, data any) {
		if event != "progress" {
			return
		}
		m, _ := data.(map[string]any)
		params := &mcp.ProgressNotificationParams{ProgressToken: token}
		params.Progress, params.Total = n.next(m)
		params.Message, _ = m["message"].(string)
		_ = ss.NotifyProgress(ctx, params)
	}
}

// progressNumbers turns a tool's progress numbers into the client's.
type progressNumbers struct {
	mu               sync.Mutex
	base, prev, last float64
	sent             bool
}

// next is the progress and total (0: none) to send for the tool's
// notification m.
func (n *progressNumbers) next(m map[string]any) (progress, total float64) {
	p, counted := m["progress"].(float64)
	total, _ = m["total"].(float64)
	n.mu.Lock()
	defer n.mu.Unlock()
	if !counted { // a tool that says no number: one step more
		p, total = n.prev+1, 0
	}
	if n.sent && p <= n.prev { // counting again: a new attempt
		n.base = n.last + 1
	}
	n.prev, n.sent = p, true
	n.last = n.base + p
	if total > 0 {
		total += n.base
	}
	return n.last, total
}

// Result turns a ToolResult into what the model reads: the data on
// success, otherwise an isError result saying what happened and what to do.
func Result(res invoke.ToolResult) *mcp.CallToolResult {
	meta := mcp.Meta{"toolbelt/call_id": res.CallID, "toolbelt/status": res.Status}
	if res.Success {
		data := res.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}
		if len(data) > 0 && data[0] == '{' {
			out.StructuredContent = data
		}
		if e := res.Error; e != nil { // ran, but not recorded: said beside the data
			out.Content = append(out.Content, &mcp.TextContent{Text: e.Code + ": " + sentence(e.Message) + " " + sentence(e.Suggestion)})
		}
		out.Meta = meta
		return out
	}
	var b strings.Builder
	e := res.Error
	if e == nil {
		e = &invoke.ToolError{Code: models.CodeInternal, Message: "the call ended " + res.Status + " without an error"}
	}
	b.WriteString(e.Code + ": " + sentence(e.Message))
	for _, pr := range e.Problems {
		at := pr.Pointer
		if at == "" {
			at = "(arguments)"
		}
		fmt.Fprintf(&b, "\n- %s: %s", at, pr.Message)
	}
	if len(e.Problems) > 0 {
		b.WriteString("\n")
	} else {
		b.WriteString(" ")
	}
	if res.Status == models.StatusAwaitingApproval {
		fmt.Fprintf(&b, "The call %s waits for a human reviewer to approve it and has not run; "+
			"calling the tool again would ask for another approval. ", res.CallID)
	}
	b.WriteString(sentence(e.Suggestion))
	if res.Status == models.StatusAwaitingApproval && e.Suggestion == "" {
		b.WriteString(" Tell the user, then check later with " + callResultCall(res.CallID) + ".")
	}
	if res.Status == models.StatusAwaitingApproval {
		fmt.Fprintf(&b, " To wait for the decision instead, call %s {\"call_id\": %q, \"wait_seconds\": %d}.", CallResultName, res.CallID, MaxWaitSeconds)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " Retry after %d s.", e.RetryAfter)
	}
	if id := approvalID(res); id != "" {
		meta["toolbelt/approval_id"] = id
	}
	out := errorResult(b.String())
	out.Meta = meta
	return out
}

// directions name this server's tools in the invoker's suggestions:
// search_tools to choose a tool, call_result to fetch a call's result.
type directions struct{}

func (directions) SearchTools() string { return SearchToolsName }

func (directions) PollCall(callID string) string { return "Check later with " + callResultCall(callID) }

// callResultCall is the call_result call that reads callID's result.
func callResultCall(callID string) string {
	return fmt.Sprintf("%s {\"call_id\": %q}", CallResultName, callID)
}

// refused is an isError result saying code and what happened.
func refused(code, text string) *mcp.CallToolResult { return errorResult(code + ": " + text) }

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// sentence ends s with a full stop unless it already ends a sentence.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "!") {
		return s
	}
	return s + "."
}

// searchArgs are search_tools' arguments.
type searchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

// Found is one tool search_tools returns.
type Found struct {
	Name        string  `json:"name"`
	Score       float64 `json:"score"`
	Reason      string  `json:"reason"`
	Description string  `json:"description"`
}

// searchTools runs stage 2 as the caller and returns the ranked tools.
func (s *Server) searchTools(ctx context.Context, p *models.Principal, session string, raw json.RawMessage) *mcp.CallToolResult {
	var args searchArgs
	if err := strictDecode(raw, &args); err != nil {
		return refused(models.CodeValidation, sentence(err.Error())+" Send {\"query\": \"<your task>\", \"limit\": 12}.")
	}
	sel, err := s.selector.Select(ctx, p, selection.SelectRequest{Query: args.Query, Limit: args.Limit, SessionID: session, Format: formats.FormatMCP})
	if err != nil {
		var ve *models.ValidationError
		if errors.As(err, &ve) {
			var b strings.Builder
			b.WriteString(models.CodeValidation + ": invalid " + ve.What + ".")
			for _, pr := range ve.Problems {
				fmt.Fprintf(&b, "\n- %s: %s", pr.Pointer, pr.Message)
			}
			b.WriteString("\nFix the arguments and call " + SearchToolsName + " again.")
			return errorResult(b.String())
		}
		s.log.ErrorContext(ctx, "mcp search_tools", "err", err)
		return refused(models.CodeInternal, "the search failed. Try again.")
	}
	if err := s.selector.Committed(ctx, sel); err != nil {
		s.log.ErrorContext(ctx, "selection answered but not recorded", "selection_id", sel.SelectionID, "err", err)
	}
	found := make([]Found, 0, len(sel.Tools))
	for _, t := range sel.Tools {
		var r struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(t.Tool, &r)
		found = append(found, Found{Name: t.Name, Score: t.Score, Reason: reason(t.Reasons), Description: r.Description})
	}
	body := map[string]any{"tools": found}
	text, _ := json.Marshal(body)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
		StructuredContent: json.RawMessage(text),
		Meta:              mcp.Meta{"toolbelt/selection_id": sel.SelectionID},
	}
}

// reason says in a few words why a tool ranked where it did.
func reason(r selection.Reasons) string {
	var parts []string
	if r.Intent != "" {
		parts = append(parts, fmt.Sprintf("answers %q", r.Intent))
	}
	if len(r.MatchedTerms) > 0 {
		parts = append(parts, "matches "+strings.Join(r.MatchedTerms, ", "))
	}
	if r.LexicalRank > 0 {
		parts = append(parts, fmt.Sprintf("lexical rank %d", r.LexicalRank))
	}
	if r.DenseRank > 0 {
		parts = append(parts, fmt.Sprintf("semantic rank %d", r.DenseRank))
	}
	if len(r.LearnedQueries) > 0 {
		parts = append(parts, "used before for "+strings.Join(quoteAll(r.LearnedQueries), ", "))
	}
	if len(parts) == 0 {
		return "related to the task"
	}
	return strings.Join(parts, "; ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// callResultArgs are call_result's arguments.
type callResultArgs struct {
	CallID string `json:"call_id"`
	// WaitSeconds holds the answer until the call ends, at most this long:
	// a client that sends no progress token can still wait for a reviewer
	// without asking again and again.
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// MaxWaitSeconds bounds call_result's wait_seconds: a wait must end
// before the request timeout of the MCP clients agents use by default
// (docs/mcp.md lists them), or the client gives up on the answer.
const MaxWaitSeconds = 50

// callResult returns the outcome of an earlier call, the way to learn what
// became of a call that waited for approval.
func (s *Server) callResult(ctx context.Context, p *models.Principal, raw json.RawMessage) *mcp.CallToolResult {
	var args callResultArgs
	if err := strictDecode(raw, &args); err != nil || args.CallID == "" || args.WaitSeconds < 0 || args.WaitSeconds > MaxWaitSeconds {
		return refused(models.CodeValidation, fmt.Sprintf("send {\"call_id\": \"<the id a call answered with>\"}, "+
			"and wait_seconds (0-%d) to wait for the call to end.", MaxWaitSeconds))
	}
	if args.WaitSeconds > 0 {
		release, err := s.hold(p)
		if err != nil {
			return refused(models.CodeRateLimit, sentence(err.Error())+fmt.Sprintf(" Call %s without wait_seconds to read the call as it stands, "+
				"and again later.", CallResultName))
		}
		defer release()
	}
	rec, err := s.waitCall(ctx, p, args.CallID, time.Duration(args.WaitSeconds)*time.Second)
	if models.CodeOf(err) == models.CodeNotFound {
		return refused(models.CodeNotFound, fmt.Sprintf("there is no call %q of yours. Check the id the call answered with.", args.CallID))
	}
	if err != nil {
		s.log.ErrorContext(ctx, "mcp call_result", "call_id", args.CallID, "err", err)
		return refused(models.CodeInternal, "the call could not be read. Try again.")
	}
	res, _ := storedResult(rec)
	switch res.Status {
	case models.StatusAwaitingApproval:
		out := refused(models.CodeConfirmationRequired, fmt.Sprintf("the call %s is still waiting for a human reviewer. Check again later.", rec.ID))
		out.Meta = mcp.Meta{"toolbelt/call_id": rec.ID, "toolbelt/status": res.Status}
		return out
	case models.StatusQueued, models.StatusRunning:
		out := errorResult(fmt.Sprintf("%s: the call %s has not finished yet. Check again in a few seconds.", strings.ToUpper(res.Status), rec.ID))
		out.Meta = mcp.Meta{"toolbelt/call_id": rec.ID, "toolbelt/status": res.Status}
		return out
	}
	return s.result(ctx, rec.Tool, res)
}

// waitCall reads the record of a caller's call, once it has ended or
// wait has passed (or the client gave up waiting), whichever comes first.
func (s *Server) waitCall(ctx context.Context, p *models.Principal, id string, wait time.Duration) (*models.Call, error) {
	if wait <= 0 {
		return s.invoker.CallRecord(ctx, p, id)
	}
	// Counted with the followed calls: Close answers it before it ends
	// the sessions.
	s.following.Add(1)
	defer s.following.Done()
	rec, events, stop, err := s.invoker.Events(ctx, p, id)
	if err != nil || models.Terminal(rec.Status) {
		if stop != nil {
			stop()
		}
		return rec, err
	}
	defer stop()
	limit := time.NewTimer(wait)
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-s.closing:
		case <-limit.C:
		case ev, open := <-events:
			if open && ev.Name != "result" {
				continue
			}
		}
		return s.invoker.CallRecord(context.WithoutCancel(ctx), p, id)
	}
}

// strictDecode reads a tool's arguments, refusing unknown fields; absent
// arguments decode as {}.
func strictDecode(raw json.RawMessage, v any) error {
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

// builtinTools describes the server's own tools.
func builtinTools() []*mcp.Tool {
	no := false
	return []*mcp.Tool{
		{
			Name:  SearchToolsName,
			Title: "Search Tools",
			Description: "Find the tools that fit a task, best first, with a score and why each fits. " +
				"Input: query (the task in a sentence), limit (1-40, default 12). Output: tools with name, score, reason, description.",
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
				`"query":{"type":"string","minLength":1,"description":"The task the tools are for, e.g. read the config file; as long as you have it (the end is read first)"},`+
				`"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"How many tools at most (default %d)"}},`+
				`"required":["query"],"additionalProperties":false}`, selection.MaxSelectLimit, selection.DefaultSelectLimit)),
			Annotations: &mcp.ToolAnnotations{Title: "Search Tools", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: &no},
		},
		{
			Name:  CallResultName,
			Title: "Call Result",
			Description: "The outcome of an earlier call, by its call id: use it for a call that waited for a reviewer's approval. " +
				"Input: call_id, and wait_seconds to wait for the call to end. Output: the call's result, or that it is still waiting.",
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
				`"call_id":{"type":"string","minLength":1,"maxLength":64,"description":"The call id the earlier call answered with"},`+
				`"wait_seconds":{"type":"integer","minimum":0,"maximum":%d,"description":"Wait up to this many seconds for the call to end (default 0: answer at once)"}},`+
				`"required":["call_id"],"additionalProperties":false}`, MaxWaitSeconds)),
			Annotations: &mcp.ToolAnnotations{Title: "Call Result", ReadOnlyHint: true, IdempotentHint: false, DestructiveHint: &no, OpenWorldHint: &no},
		},
	}
}
