package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/services/runners"
)

// MaxResultBytes bounds an upstream tool's result, as encoded.
const MaxResultBytes = 1 << 20

// Result is what an upstream tool answered: its content blocks and, when
// the tool returns structured output, that.
type Result struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent any               `json:"structuredContent,omitempty"`
}

// Runner is the mcp runner (runners.Deps.MCP).
func (m *Manager) Runner() runners.Runner { return runners.RunnerFunc(m.call) }

// call runs a call of the mcp runner: its validated arguments sent upstream as
// tools/call, its progress passed on to the call's events, cancelled
// upstream when the call is. A result the tool marks isError is the
// call's failure, in the tool's words.
func (m *Manager) call(ctx context.Context, c *runners.Call) (any, error) {
	u, tools, err := m.callable(ctx, c.Def.Runner.Server)
	if errors.Is(err, models.ErrNotFound) {
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("the upstream server %s of %s is no longer registered", c.Def.Runner.Server, c.Def.Name),
			Suggestion: "Do not retry; choose another tool."}
	}
	if err != nil {
		return nil, err
	}
	if u.DisabledAt != nil {
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("the upstream server %s is disabled", u.Name),
			Suggestion: "Do not retry; choose another tool, or ask an administrator to enable the server."}
	}
	switch row, ok := tools[c.Def.Runner.Tool]; {
	case !ok || row.Status != models.UpstreamToolActive:
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("the upstream server %s no longer serves %s", u.Name, c.Def.Runner.Tool),
			Suggestion: "Do not retry; choose another tool."}
	case row.DisabledAt != nil:
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("%s is disabled: an administrator disabled it on its MCP server %s", c.Def.Name, u.Name),
			Suggestion: "Do not retry; choose another tool, or ask an administrator to enable it."}
	}
	cn, err := m.acquire(ctx, u, c, c.Principal)
	if err != nil {
		return nil, err
	}
	defer cn.release()
	if cn.key.person != 0 {
		c.ActedAs = m.actedAs(ctx, u, c.Principal)
	}
	params := &mcp.CallToolParams{Name: c.Def.Runner.Tool, Arguments: c.Args}
	if c.Emit != nil {
		params.Meta = mcp.Meta{"progressToken": c.ID}
		cn.progress.Store(c.ID, c.Emit)
		defer cn.progress.Delete(c.ID)
	}
	res, err := cn.cs.CallTool(ctx, params)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		if cn.auth != nil && cn.auth.refused.Load() {
			// The person's account is gone (disconnected, here or on
			// another instance) or the server refused their token: the
			// connection made with it goes.
			m.discard(cn)
			c.ActedAs = ""
			return nil, m.refusal(u, cn.auth)
		}
		if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			m.discard(cn)
			return nil, &runners.Error{Code: models.CodeExecutionFailed, Retryable: true,
				Message:    fmt.Sprintf("the upstream server %s stopped during the call: %v", u.Name, err),
				Suggestion: "Try again: the server is started again on the next call."}
		}
		if e := redirected(u, err); e != nil {
			return nil, e
		}
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("upstream server %s: %v", u.Name, err),
			Suggestion: "Check the arguments and try again."}
	}
	out := Result{Content: make([]json.RawMessage, 0, len(res.Content)), StructuredContent: res.StructuredContent}
	size := 0
	for _, block := range res.Content {
		raw, err := json.Marshal(block)
		if err != nil {
			return nil, fmt.Errorf("encode a content block of %s: %w", c.Def.Name, err)
		}
		size += len(raw)
		out.Content = append(out.Content, raw)
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		size += len(raw)
	}
	if size > MaxResultBytes {
		return nil, &runners.Error{Code: models.CodeExecutionFailed,
			Message:    fmt.Sprintf("%s answered %d bytes, more than the %d a result may hold", c.Def.Name, size, MaxResultBytes),
			Suggestion: "Ask for less (a narrower query, a smaller page)."}
	}
	if res.IsError {
		msg, err := runners.HideValues(text(res.Content), cn.hide)
		if err != nil {
			return nil, err
		}
		return nil, &runners.Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("%s failed: %s", c.Def.Name, msg),
			Suggestion: "Read the message, correct the arguments and try again."}
	}
	if len(cn.hide) > 0 {
		return runners.HideValues(out, cn.hide)
	}
	return out, nil
}

// redirected is the failure of a request to u that its client refused
// to follow to another origin with u's credentials (see
// netpolicy.ClientSending), nil for any other error.
func redirected(u *models.Upstream, err error) *runners.Error {
	why := netpolicy.RedirectRefusal(err)
	if why == "" {
		return nil
	}
	return &runners.Error{Code: models.CodeUpstream, Message: fmt.Sprintf("upstream server %s: %s", u.Name, why),
		Suggestion: "Do not retry: nothing was sent there. Tell an administrator the server's URL redirects elsewhere."}
}

// text joins a result's text blocks, for an error message.
func text(blocks []mcp.Content) string {
	var parts []string
	for _, b := range blocks {
		if t, ok := b.(*mcp.TextContent); ok {
			parts = append(parts, strings.TrimSpace(t.Text))
		}
	}
	if len(parts) == 0 {
		return "no message"
	}
	return strings.Join(parts, "; ")
}

// Fresh is how long a call trusts what it read of a server (enabled, the
// tools it serves) without reading it again: changes made on this
// instance apply at once, those made on another within Fresh.
const Fresh = 2 * time.Second

// known is what calls read of a server.
type known struct {
	u     *models.Upstream
	tools map[string]models.UpstreamTool // by name on the server
	at    time.Time
}

// callable is a server and its tools, read at most Fresh ago.
func (m *Manager) callable(ctx context.Context, name string) (*models.Upstream, map[string]models.UpstreamTool, error) {
	m.mu.Lock()
	k, ok := m.known[name]
	m.mu.Unlock()
	if ok && time.Since(k.at) < Fresh {
		return k.u, k.tools, nil
	}
	u, err := m.d.Store.UpstreamByName(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	rows, err := m.d.Store.UpstreamTools(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	tools := make(map[string]models.UpstreamTool, len(rows))
	for _, r := range rows {
		tools[r.Remote] = r
	}
	m.mu.Lock()
	m.known[name] = known{u: u, tools: tools, at: time.Now()}
	m.mu.Unlock()
	return u, tools, nil
}

// forgetKnown makes the next call read a server again (it changed here).
func (m *Manager) forgetKnown(name string) {
	m.mu.Lock()
	delete(m.known, name)
	m.mu.Unlock()
}
