package upstream

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/tooldef"
)

// served is one tool as the upstream serves it: the fields that make its
// definition (what an admin accepts), in a stable encoding.
type served struct {
	Name         string               `json:"name"`
	Title        string               `json:"title,omitempty"`
	Description  string               `json:"description,omitempty"`
	InputSchema  any                  `json:"inputSchema"`
	OutputSchema any                  `json:"outputSchema,omitempty"`
	Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
}

// pin encodes a served tool and hashes it: encoding/json sorts map keys,
// so the same definition always gives the same bytes.
func pin(t *mcp.Tool) (string, string) {
	raw, _ := json.Marshal(served{Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations})
	sum := sha256.Sum256(raw)
	return string(raw), hex.EncodeToString(sum[:])
}

// Bounds of what an upstream serves: the tools looked at (those past
// MaxTools are skipped), a name's length (MCP's), and one tool's
// definition as encoded (a schema or description of megabytes would
// bloat every prompt that shows it).
const (
	MaxTools          = 500
	MaxRemoteName     = 128
	MaxDefinitionSize = 128 << 10
)

// listing is what an upstream serves: the tools that may become Toolbelt
// tools, the ones refused (by name, with why), and what was refused that
// names no tool it could be stored as.
type listing struct {
	tools   []*mcp.Tool
	refused map[string]string
	unnamed []string
}

// list asks the upstream for every tool it serves and sorts out what it
// cannot serve as a Toolbelt tool: one tool's fault never refuses the
// others. A personal server (personal.go) is listed with the connection
// of by (the admin asking), else of the admin who registered it; until
// one of them is connected the answer is UPSTREAM_NOT_CONNECTED.
func (m *Manager) list(ctx context.Context, u *models.Upstream, by *models.Principal) (*listing, error) {
	c, err := m.acquire(ctx, u, nil, by)
	if isNotConnected(err) {
		if creator := m.creator(ctx, u); creator != nil && (by == nil || creator.ID != by.ID) {
			c, err = m.acquire(ctx, u, nil, creator)
		}
	}
	if err != nil {
		return nil, err
	}
	defer c.release()
	var served []*mcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("upstream server %s: tools/list: %w", u.Name, err)
		}
		if len(served) == MaxTools {
			// Paging on would let a server keep Toolbelt reading forever.
			return sortOut(served, fmt.Sprintf("the server serves more than %d tools: %+q and those after it are skipped", MaxTools, t.Name)), nil
		}
		served = append(served, t)
	}
	return sortOut(served, ""), nil
}

// sortOut refuses the tools served without a usable name, under a name
// served twice, or with a definition too large; over adds a refusal of
// the list itself.
func sortOut(served []*mcp.Tool, over string) *listing {
	l := &listing{refused: map[string]string{}}
	count := map[string]int{}
	for _, t := range served {
		count[t.Name]++
	}
	for i, t := range served {
		if msg := nameProblem(t.Name); msg != "" {
			l.unnamed = append(l.unnamed, fmt.Sprintf("tool #%d (%+q) %s: skipped", i+1, t.Name, msg))
			continue
		}
		if count[t.Name] > 1 {
			l.refused[t.Name] = fmt.Sprintf("the server serves %d tools named %q: which one a call would run is unknown", count[t.Name], t.Name)
			continue
		}
		if raw, _ := pin(t); len(raw) > MaxDefinitionSize {
			l.refused[t.Name] = fmt.Sprintf("its definition is %d bytes, more than the %d a tool may have (a description or schema this large would fill every prompt that shows it)", len(raw), MaxDefinitionSize)
			continue
		}
		l.tools = append(l.tools, t)
	}
	if over != "" {
		l.unnamed = append(l.unnamed, over)
	}
	return l
}

// nameProblem says why a served name cannot be a tool's ("" when it
// can). Only printable ASCII: a control, bidi or zero-width character
// would make one name display as another, and any character beyond ASCII
// would vanish from the Toolbelt name.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "has no name"
	case !utf8.ValidString(name):
		return "has a name that is not UTF-8"
	case len(name) > MaxRemoteName:
		return fmt.Sprintf("has a name of %d bytes, more than MCP's %d", len(name), MaxRemoteName)
	}
	for _, r := range name {
		switch {
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("has a name holding %U, a control or formatting character that changes how the name reads", r)
		case r > unicode.MaxASCII:
			return fmt.Sprintf("has a name holding %U: a tool's name must be ASCII letters, digits and punctuation", r)
		case r == ' ':
			return "has a name holding a space"
		}
	}
	return ""
}

// ToolName is the Toolbelt name of an upstream's tool: the server's name
// ('-' as '_'), two underscores, and the tool's name in snake_case as
// OpenAPI imports make it (catalog.SnakeCase).
func ToolName(server, remote string) string {
	return strings.ReplaceAll(server, "-", "_") + "__" + catalog.SnakeCase(remote)
}

// toolbeltName is the name of an upstream's tool in Toolbelt: the one it
// was accepted as, else the alias an admin gave it, else ToolName.
func toolbeltName(server string, row *models.UpstreamTool) string {
	return cmp.Or(row.Tool, row.Alias, ToolName(server, row.Remote))
}

// Level is the security level an upstream tool gets from its MCP
// annotations: read-only is safe; one that says it is not destructive
// is moderate; anything else (destructive, or unknown: the protocol's
// default is destructive) is dangerous and waits for a reviewer.
func Level(a *mcp.ToolAnnotations) string {
	switch {
	case a == nil:
		return tooldef.LevelDangerous
	case a.ReadOnlyHint:
		return tooldef.LevelSafe
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return tooldef.LevelModerate
	}
	return tooldef.LevelDangerous
}

// define is the Toolbelt definition of an accepted upstream tool.
func define(u *models.Upstream, row *models.UpstreamTool, pinned, version string) (tooldef.Definition, error) {
	var t served
	if err := json.Unmarshal([]byte(pinned), &t); err != nil {
		return tooldef.Definition{}, fmt.Errorf("decode pinned tool: %w", err)
	}
	params, err := json.Marshal(draft2020(t.InputSchema))
	if err != nil {
		return tooldef.Definition{}, fmt.Errorf("encode the input schema of %s: %w", t.Name, err)
	}
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = strings.TrimSpace(t.Title)
	}
	if desc == "" {
		desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, u.Name)
	}
	if len([]rune(desc)) > tooldef.MaxDescriptionLen {
		desc = string([]rune(desc)[:tooldef.MaxDescriptionLen-1]) + "…"
	}
	level := cmp.Or(row.Level, Level(t.Annotations))
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	def := tooldef.Definition{
		Name: toolbeltName(u.Name, row), Version: version, Description: desc, Category: cmp.Or(row.Category, u.Category),
		Tags:       []string{"mcp", u.Name},
		Parameters: params,
		Security:   tooldef.Security{Level: level, Sandbox: u.Transport == models.TransportStdio, Network: u.Transport != models.TransportStdio || len(u.Egress) > 0},
		Execution:  tooldef.Execution{Retryable: readOnly, MaxRetries: map[bool]int{true: 2}[readOnly]},
		Runner:     tooldef.Runner{Kind: tooldef.RunnerMCP, Server: u.Name, Tool: t.Name},
	}
	return def, nil
}

// Report says what a look at an upstream's tools found.
type Report struct {
	// Accepted are the tools made or published now; Pending the changed
	// or new ones waiting for an admin; Gone the ones no longer served;
	// Unchanged how many are as accepted.
	Accepted  []string `json:"accepted"`
	Pending   []string `json:"pending"`
	Gone      []string `json:"gone"`
	Unchanged int      `json:"unchanged"`
	// Refused are tools that could not become Toolbelt tools, with why.
	Refused map[string]string `json:"refused,omitempty"`
}

// Sync reads what the upstream serves now and compares it with what was
// accepted: a changed or new tool is held pending (and audited), a tool
// no longer served is marked gone (its calls refused), one served again
// as accepted is active again, one that cannot be a Toolbelt tool is
// refused (audited, with why). With acceptAll, every pending tool is
// accepted at once (when an admin adds the server, or asks).
func (m *Manager) Sync(ctx context.Context, name string, acceptAll bool, by *models.Principal) (*Report, error) {
	u, err := m.d.Store.UpstreamByName(ctx, name)
	if err != nil {
		return nil, err
	}
	l, err := m.list(ctx, u, by)
	if err != nil {
		return nil, err
	}
	rep, err := m.compare(ctx, u, l, acceptAll, by)
	if err != nil || by == nil {
		return rep, err
	}
	// An admin's sync is recorded whatever it found: what the server
	// served when someone looked is part of the story.
	err = m.d.Store.Audited(ctx, models.AuditUpstreamSync, func(*models.Store) (string, string, error) {
		return "upstream:" + name, fmt.Sprintf("%d unchanged, %d accepted, %d pending, %d gone",
			rep.Unchanged, len(rep.Accepted), len(rep.Pending), len(rep.Gone)), nil
	})
	return rep, err
}

// compare is Sync's work on what u serves now.
func (m *Manager) compare(ctx context.Context, u *models.Upstream, l *listing, acceptAll bool, by *models.Principal) (*Report, error) {
	rows, err := m.d.Store.UpstreamTools(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	byRemote := map[string]*models.UpstreamTool{}
	for i := range rows {
		byRemote[rows[i].Remote] = &rows[i]
	}
	defer m.forgetKnown(u.Name)
	rep := &Report{Accepted: []string{}, Pending: []string{}, Gone: []string{}, Refused: map[string]string{}}
	if err := m.refuseList(ctx, u, l.unnamed); err != nil {
		return nil, err
	}
	refused := maps.Clone(l.refused)
	if err := m.refuse(ctx, u, l.tools, byRemote, refused); err != nil {
		return nil, err
	}
	for _, remote := range slices.Sorted(maps.Keys(refused)) {
		row := byRemote[remote]
		delete(byRemote, remote)
		if row == nil {
			row = &models.UpstreamTool{UpstreamID: u.ID, Remote: remote, Status: models.UpstreamToolNew}
		}
		why := clip(refused[remote], refusedMax)
		rep.Refused[remote] = why
		if row.Refused == why {
			continue
		}
		row.Refused = why
		err := m.d.Store.Audited(ctx, models.AuditUpstreamRefuse, func(tx *models.Store) (string, string, error) {
			return "upstream:" + u.Name, fmt.Sprintf("%s serves %s, refused: %s", u.Name, remote, why), tx.SaveUpstreamTool(ctx, row)
		})
		if err != nil {
			return nil, err
		}
		m.d.Log.WarnContext(ctx, "upstream tool refused", "server", u.Name, "tool", remote, "why", why)
	}
	now := time.Now().UTC()
	for _, t := range l.tools {
		if refused[t.Name] != "" {
			continue
		}
		raw, hash := pin(t)
		row := byRemote[t.Name]
		delete(byRemote, t.Name)
		if row == nil {
			row = &models.UpstreamTool{UpstreamID: u.ID, Remote: t.Name, Status: models.UpstreamToolNew}
		}
		// Served acceptably again: what was refused is not any more.
		cleared := row.Refused != ""
		row.Refused = ""
		switch {
		case hash == row.AcceptedHash:
			if cleared || row.Status == models.UpstreamToolGone || row.PendingHash != "" {
				row.Status, row.Pending, row.PendingHash, row.PendingSince = models.UpstreamToolActive, "", "", nil
				if err := m.d.Store.SaveUpstreamTool(ctx, row); err != nil {
					return nil, err
				}
			}
			rep.Unchanged++
			continue
		case hash != row.PendingHash:
			row.Pending, row.PendingHash, row.PendingSince = raw, hash, &now
			if row.Status == models.UpstreamToolGone {
				row.Status = models.UpstreamToolActive
			}
			if acceptAll { // accepted below, and audited so
				break
			}
			err := m.d.Store.Audited(ctx, models.AuditUpstreamChange, func(tx *models.Store) (string, string, error) {
				what := "a changed definition"
				if row.AcceptedHash == "" {
					what = "a new tool"
				}
				return "upstream:" + u.Name, fmt.Sprintf("%s serves %s, %s; held pending (sha256 %s)", u.Name, what, t.Name, hash[:12]), tx.SaveUpstreamTool(ctx, row)
			})
			if err != nil {
				return nil, err
			}
			m.d.Log.WarnContext(ctx, "upstream tool definition changed: pending an admin", "server", u.Name, "tool", t.Name)
		case cleared && !acceptAll:
			if err := m.d.Store.SaveUpstreamTool(ctx, row); err != nil {
				return nil, err
			}
		}
		if !acceptAll {
			rep.Pending = append(rep.Pending, t.Name)
			continue
		}
		tool, err := m.accept(ctx, u, row, by)
		if err != nil {
			rep.Refused[t.Name] = err.Error()
			rep.Pending = append(rep.Pending, t.Name)
			if err := m.d.Store.SaveUpstreamTool(ctx, row); err != nil { // held pending
				return nil, err
			}
			continue
		}
		rep.Accepted = append(rep.Accepted, tool)
	}
	for _, row := range byRemote {
		if row.Status == models.UpstreamToolActive || row.Refused != "" {
			if row.Status == models.UpstreamToolActive {
				row.Status = models.UpstreamToolGone
			}
			row.Refused = ""
			if err := m.d.Store.SaveUpstreamTool(ctx, row); err != nil {
				return nil, err
			}
			m.d.Log.WarnContext(ctx, "upstream no longer serves a tool: its calls are refused", "server", u.Name, "tool", row.Remote)
		}
		rep.Gone = append(rep.Gone, row.Remote)
	}
	slices.Sort(rep.Gone)
	if len(rep.Refused) == 0 {
		rep.Refused = nil
	}
	return rep, nil
}

// refusedMax bounds a refusal as stored.
const refusedMax = 1000

// refuse adds to refused the served tools that cannot be Toolbelt tools:
// two that would have one Toolbelt name (after snake_case, or an alias),
// one whose name is another tool's, one Toolbelt's validation refuses.
// The tool that already holds a name keeps it.
func (m *Manager) refuse(ctx context.Context, u *models.Upstream, tools []*mcp.Tool, byRemote map[string]*models.UpstreamTool, refused map[string]string) error {
	row := func(remote string) *models.UpstreamTool {
		if r := byRemote[remote]; r != nil {
			return r
		}
		return &models.UpstreamTool{Remote: remote}
	}
	byName := map[string][]string{}
	for _, t := range tools {
		name := toolbeltName(u.Name, row(t.Name))
		byName[name] = append(byName[name], t.Name)
	}
	for name, remotes := range byName {
		if len(remotes) < 2 {
			continue
		}
		for _, r := range remotes {
			if row(r).Tool == name {
				continue
			}
			others := slices.DeleteFunc(slices.Clone(remotes), func(o string) bool { return o == r })
			refused[r] = fmt.Sprintf("its Toolbelt name %s would also be that of %s, which the server serves too: give one an alias", name, strings.Join(others, ", "))
		}
	}
	for _, t := range tools {
		r := row(t.Name)
		raw, hash := pin(t)
		if refused[t.Name] != "" || hash == r.AcceptedHash {
			continue
		}
		name := toolbeltName(u.Name, r)
		if r.Tool == "" {
			taken, err := m.d.Registry.Taken(ctx, name)
			if err != nil {
				return err
			}
			if taken {
				refused[t.Name] = fmt.Sprintf("its Toolbelt name %s is already another tool's: give it an alias", name)
				continue
			}
		}
		def, err := define(u, r, raw, "1.0.0")
		if err == nil {
			_, err = m.d.Registry.Check(ctx, def)
		}
		var ve *models.ValidationError
		switch {
		case errors.As(err, &ve):
			refused[t.Name] = "it cannot be a Toolbelt tool: " + ve.Error()
		case err != nil:
			return err
		}
	}
	return nil
}

// refuseList records (and audits, when it changed) what the last look
// refused that is no one tool's.
func (m *Manager) refuseList(ctx context.Context, u *models.Upstream, refused []string) error {
	for i := range refused {
		refused[i] = clip(refused[i], refusedMax)
	}
	if slices.Equal(u.Refused, refused) {
		return nil
	}
	u.Refused = refused
	if len(refused) == 0 {
		return m.d.Store.SetUpstreamRefused(ctx, u)
	}
	return m.d.Store.Audited(ctx, models.AuditUpstreamRefuse, func(tx *models.Store) (string, string, error) {
		return "upstream:" + u.Name, clip(strings.Join(refused, "; "), models.AuditDetailMax), tx.SetUpstreamRefused(ctx, u)
	})
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Accept makes a tool's pending definition the accepted one: a new
// Toolbelt tool, or a new version of it.
func (m *Manager) Accept(ctx context.Context, name, remote string, by *models.Principal) (string, error) {
	u, row, err := m.tool(ctx, name, remote)
	if err != nil {
		return "", err
	}
	if row.PendingHash == "" {
		return "", models.ErrConflict.Errorf("tool %s of %s has no pending definition", remote, name)
	}
	return m.accept(ctx, u, row, by)
}

func (m *Manager) accept(ctx context.Context, u *models.Upstream, row *models.UpstreamTool, by *models.Principal) (string, error) {
	name, version := toolbeltName(u.Name, row), "1.0.0"
	// A disabled tool stays out of the catalog: enabling it publishes
	// what was accepted meanwhile.
	if row.DisabledAt == nil {
		if row.Tool != "" {
			next, err := m.d.Registry.NextPatch(ctx, row.Tool)
			if err != nil {
				return "", err
			}
			version = next
		}
		def, err := define(u, row, row.Pending, version)
		if err != nil {
			return "", err
		}
		if row.Tool == "" {
			_, err = m.d.Registry.Register(ctx, def, by)
		} else {
			_, err = m.d.Registry.Publish(ctx, row.Tool, def, by)
		}
		var ve *models.ValidationError
		if errors.As(err, &ve) {
			return "", fmt.Errorf("%s cannot be a Toolbelt tool: %w", def.Name, err)
		}
		if err != nil {
			return "", err
		}
	}
	hash := row.PendingHash
	row.Tool, row.Status = name, models.UpstreamToolActive
	row.Accepted, row.AcceptedHash = row.Pending, row.PendingHash
	row.Pending, row.PendingHash, row.PendingSince = "", "", nil
	defer m.forgetKnown(u.Name)
	err := m.d.Store.Audited(ctx, models.AuditUpstreamAccept, func(tx *models.Store) (string, string, error) {
		what := fmt.Sprintf("accepted %s as %s %s (sha256 %s)", row.Remote, name, version, hash[:12])
		if row.DisabledAt != nil {
			what = fmt.Sprintf("accepted %s as %s, disabled: published when enabled (sha256 %s)", row.Remote, name, hash[:12])
		}
		return "upstream:" + u.Name, what, tx.SaveUpstreamTool(ctx, row)
	})
	return name, err
}

// Override is an admin's choice for one upstream tool, over what its
// annotations and its server give: empty fields keep those.
type Override struct {
	Level    string `json:"level,omitempty" enums:"safe,moderate,dangerous"`
	Category string `json:"category,omitempty"`
}

// SetOverride records an admin's level and category for a tool and
// publishes its accepted definition again with them.
func (m *Manager) SetOverride(ctx context.Context, name, remote string, o Override, by *models.Principal) (string, error) {
	var ps models.Problems
	if o.Level != "" && !slices.Contains(tooldef.Levels, o.Level) {
		ps.Add("/level", "%q is not a level; use one of %s", o.Level, strings.Join(tooldef.Levels, ", "))
	}
	if o.Category != "" && !slices.Contains(tooldef.Categories, o.Category) {
		ps.Add("/category", "%q is not a category; use one of %s", o.Category, strings.Join(tooldef.Categories, ", "))
	}
	if len(ps) > 0 {
		return "", &models.ValidationError{What: "upstream tool", Problems: ps}
	}
	u, row, err := m.tool(ctx, name, remote)
	if err != nil {
		return "", err
	}
	if row.Tool == "" {
		return "", models.ErrConflict.Errorf("tool %s of %s was never accepted; accept it first", remote, name)
	}
	row.Level, row.Category = o.Level, o.Category
	if row.DisabledAt == nil { // else published when enabled
		if err := m.republish(ctx, u, row, by); err != nil {
			return "", err
		}
	}
	return row.Tool, m.d.Store.SaveUpstreamTool(ctx, row)
}

// tool is an upstream and one of its tools' rows.
func (m *Manager) tool(ctx context.Context, name, remote string) (*models.Upstream, *models.UpstreamTool, error) {
	u, err := m.d.Store.UpstreamByName(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	rows, err := m.d.Store.UpstreamTools(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	for i := range rows {
		if rows[i].Remote == remote {
			return u, &rows[i], nil
		}
	}
	return nil, nil, models.ErrNotFound.Errorf("tool %q of upstream server %q", remote, name)
}
