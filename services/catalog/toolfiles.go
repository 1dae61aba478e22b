package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.yaml.in/yaml/v4"
	"golang.org/x/mod/semver"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// ToolFiles keeps the tools defined by files in a directory (YAML or JSON,
// one tool per file) registered while the server runs: a new file
// registers its tool, a changed one publishes a new version, a removed one
// retires the tool. Changes apply within a second of being written. An
// invalid file is reported (log, Problems, /readyz) and the tool's
// previous version stays in service. Calls already running keep the
// version they started with.
//
// A file that leaves out "version" gets one: 1.0.0 for a new tool, the
// next patch version on each change. A file that states one must raise it
// to change the tool: versions are immutable.
//
// A file holding "mcp_server" alone defines an upstream MCP server
// instead (Servers applies it): registered when the file appears, its
// registration changed with the file, deleted when the file goes.
type ToolFiles struct {
	dir string
	// key is dir made absolute: the tools each file registered are
	// recorded under it, so a file removed while the server was stopped
	// retires its tool at the next start.
	key string
	reg *Registry
	// servers applies the files that define MCP servers (nil: such files
	// are refused).
	servers ServerFiles
	log     *slog.Logger

	mu    sync.Mutex
	files map[string]*toolFile // file name → what it last defined
}

// ServerFiles keeps the upstream MCP servers that tool files define
// (upstream.Manager).
type ServerFiles interface {
	// ApplyServer registers the server spec (a registration as the REST
	// API takes it) describes, or changes its registration to spec.
	ApplyServer(ctx context.Context, spec json.RawMessage) error
	// RemoveServer deletes a server whose file is gone.
	RemoveServer(ctx context.Context, name string) error
}

// serverKey is what a file that defines server name records in place of a
// tool's name: no tool name holds a colon.
func serverKey(name string) string { return "server:" + name }

// defines names what a file's record key stands for, for messages.
func defines(key string) string {
	if name, ok := strings.CutPrefix(key, "server:"); ok {
		return "the MCP server " + name
	}
	return key
}

type toolFile struct {
	tool string // the tool's name, or serverKey of the server's
	sum  [32]byte
	err  string
}

// FileProblem is a tool file that could not be applied.
type FileProblem struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// toolFileDebounce lets an editor finish writing before a file is read.
const toolFileDebounce = 150 * time.Millisecond

// maxToolFileBytes bounds a tool file.
const maxToolFileBytes = 1 << 20

// NewToolFiles watches dir for tool files; reg applies them, and servers
// the files that define MCP servers (nil: refused).
func NewToolFiles(dir string, reg *Registry, servers ServerFiles, log *slog.Logger) *ToolFiles {
	key, err := filepath.Abs(dir)
	if err != nil {
		key = filepath.Clean(dir)
	}
	return &ToolFiles{dir: dir, key: key, reg: reg, servers: servers, log: log, files: map[string]*toolFile{}}
}

// Dir is the watched directory.
func (t *ToolFiles) Dir() string { return t.dir }

func isToolFile(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return !strings.HasPrefix(filepath.Base(name), ".") && (ext == ".yaml" || ext == ".yml" || ext == ".json")
}

// Load applies every file of the directory (at start).
func (t *ToolFiles) Load(ctx context.Context) error {
	entries, err := os.ReadDir(t.dir)
	if errors.Is(err, os.ErrNotExist) {
		t.log.Info("no tool files directory", "dir", t.dir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read tool files: %w", err)
	}
	present := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() && isToolFile(e.Name()) {
			present[e.Name()] = true
			t.apply(ctx, e.Name())
		}
	}
	// Files removed while the server was stopped: their tools retire now
	// (unless another file defines them).
	records, err := t.reg.store.ToolFileRecords(ctx, t.key)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range records {
		if !present[r.File] {
			t.forget(ctx, r.File, r.Tool)
		}
	}
	return nil
}

// Watch applies changes until ctx ends. The directory must exist.
func (t *ToolFiles) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch tool files: %w", err)
	}
	defer w.Close()
	if err := w.Add(t.dir); err != nil {
		return fmt.Errorf("watch tool files in %s: %w", t.dir, err)
	}
	// Files written or removed before the watch began (after the Load at
	// start, say) are applied now; unchanged ones cost a read.
	if err := t.Load(ctx); err != nil {
		t.log.Error("apply tool files", "err", err)
	}
	timers := map[string]*time.Timer{}
	due := make(chan string, 64)
	for {
		select {
		case <-ctx.Done():
			for _, tm := range timers {
				tm.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Base(ev.Name)
			if !isToolFile(name) || ev.Op == fsnotify.Chmod {
				continue
			}
			if tm, ok := timers[name]; ok {
				tm.Reset(toolFileDebounce)
				continue
			}
			timers[name] = time.AfterFunc(toolFileDebounce, func() { due <- name })
		case name := <-due:
			delete(timers, name)
			t.apply(ctx, name)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			t.log.Error("watch tool files", "err", err)
		}
	}
}

// Problems lists the files that could not be applied, by name.
func (t *ToolFiles) Problems() []FileProblem {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []FileProblem
	for name, f := range t.files {
		if f.err != "" {
			out = append(out, FileProblem{File: name, Error: f.err})
		}
	}
	slices.SortFunc(out, func(a, b FileProblem) int { return strings.Compare(a.File, b.File) })
	return out
}

// Count is how many files define a tool now, and how many an MCP
// server.
func (t *ToolFiles) Count() (tools, servers int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range t.files {
		switch {
		case strings.HasPrefix(f.tool, "server:"):
			servers++
		case f.tool != "":
			tools++
		}
	}
	return tools, servers
}

// apply brings the registry in line with one file.
func (t *ToolFiles) apply(ctx context.Context, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.files[name]
	raw, err := os.ReadFile(filepath.Join(t.dir, name))
	if errors.Is(err, os.ErrNotExist) {
		delete(t.files, name)
		tool := ""
		if prev != nil {
			tool = prev.tool
		}
		t.forget(ctx, name, tool)
		return
	}
	if prev == nil {
		prev = &toolFile{}
		t.files[name] = prev
	}
	fail := func(err error) {
		prev.err = err.Error()
		t.log.Warn("tool file not applied; the previous version stays", "file", name, "err", err)
	}
	if err != nil {
		fail(err)
		return
	}
	if len(raw) > maxToolFileBytes {
		fail(fmt.Errorf("larger than %d bytes", maxToolFileBytes))
		return
	}
	sum := sha256.Sum256(raw)
	if sum == prev.sum && prev.err == "" {
		return // unchanged
	}
	def, server, err := parseToolFile(name, raw)
	if err != nil {
		fail(err)
		return
	}
	key := def.Name
	if server != nil {
		key = serverKey(def.Name)
	}
	if prev.tool != "" && key != prev.tool {
		fail(fmt.Errorf("the file defined %s and now %s: what a file defines cannot be renamed; remove the file and add a new one", defines(prev.tool), defines(key)))
		return
	}
	if other := t.definer(key, name); other != "" {
		fail(fmt.Errorf("%s is already defined by %s", defines(key), other))
		return
	}
	switch {
	case server != nil && t.servers == nil:
		err = errors.New("MCP servers cannot be defined here: this server runs no upstream servers")
	case server != nil:
		err = t.servers.ApplyServer(ctx, server)
	default:
		err = t.register(ctx, def)
	}
	if err != nil {
		fail(err)
		return
	}
	prev.tool, prev.sum, prev.err = key, sum, ""
	if err := t.reg.store.SaveToolFileRecord(ctx, models.ToolFileRecord{Dir: t.key, File: name, Tool: key}); err != nil {
		t.log.Error("record a tool file", "file", name, "err", err)
	}
}

// forget retires the tool a removed file defined (tool, or else the one
// recorded for the file) unless another file defines it, and drops the
// file's record. t.mu is held.
func (t *ToolFiles) forget(ctx context.Context, name, tool string) {
	if tool == "" {
		records, err := t.reg.store.ToolFileRecords(ctx, t.key)
		if err != nil {
			t.log.Error("read tool file records", "err", err)
			return
		}
		for _, r := range records {
			if r.File == name {
				tool = r.Tool
			}
		}
	}
	if server, ok := strings.CutPrefix(tool, "server:"); ok && t.servers != nil && !t.definedElsewhere(tool) {
		if err := t.servers.RemoveServer(ctx, server); err != nil && !errors.Is(err, models.ErrNotFound) {
			t.log.Error("delete the MCP server of a removed file", "file", name, "server", server, "err", err)
			return
		}
		t.log.Info("tool file removed: MCP server deleted", "file", name, "server", server)
	} else if !ok && tool != "" && !t.definedElsewhere(tool) {
		if err := t.reg.Retire(ctx, tool, nil); err != nil && !errors.Is(err, models.ErrNotFound) {
			t.log.Error("retire the tool of a removed file", "file", name, "tool", tool, "err", err)
			return
		}
		t.log.Info("tool file removed: tool retired", "file", name, "tool", tool)
	}
	if err := t.reg.store.DeleteToolFileRecord(ctx, t.key, name); err != nil {
		t.log.Error("forget a tool file", "file", name, "err", err)
	}
}

// register registers def, or publishes it as a new version when it
// differs from the tool's current one.
func (t *ToolFiles) register(ctx context.Context, def tooldef.Definition) error {
	cur, err := t.reg.Get(ctx, def.Name)
	if errors.Is(err, models.ErrNotFound) {
		if def.Version == "" {
			def.Version = "1.0.0"
		}
		if _, err := t.reg.Register(ctx, def, nil); err != nil {
			return err
		}
		t.log.Info("tool file applied: tool registered", "tool", def.Name, "version", def.Version)
		return nil
	}
	if err != nil {
		return err
	}
	if !cur.Retired && (def.Version == "" || def.Version == cur.Version) && sameDefinition(cur.Definition, def) {
		return nil // already in service (a restart, or a change of layout only)
	}
	if def.Version == "" {
		if def.Version, err = t.reg.NextPatch(ctx, def.Name); err != nil {
			return fmt.Errorf("%w; state a version in the file", err)
		}
	}
	if _, err := t.reg.Publish(ctx, def.Name, def, nil); err != nil {
		return err
	}
	t.log.Info("tool file applied: new version", "tool", def.Name, "version", def.Version)
	return nil
}

// sameDefinition reports whether def, completed with the defaults, is
// what cur holds (versions aside).
func sameDefinition(cur, def tooldef.Definition) bool {
	def.Version = cur.Version
	tooldef.Normalize(&def)
	a, errA := json.Marshal(cur)
	b, errB := json.Marshal(def)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// nextPatch is the version after v with its patch number raised.
func nextPatch(v string) (string, error) {
	c := semver.Canonical("v" + v)
	if c == "" {
		return "", fmt.Errorf("the current version %q is not semver", v)
	}
	c = strings.TrimPrefix(c, "v")
	if i := strings.IndexAny(c, "-+"); i >= 0 {
		c = c[:i]
	}
	parts := strings.Split(c, ".")
	patch, _ := strconv.Atoi(parts[2])
	return fmt.Sprintf("%s.%s.%d", parts[0], parts[1], patch+1), nil
}

// definer is the other file that defines tool, if any.
func (t *ToolFiles) definer(tool, except string) string {
	for name, f := range t.files {
		if name != except && f.tool == tool {
			return name
		}
	}
	return ""
}

func (t *ToolFiles) definedElsewhere(tool string) bool { return t.definer(tool, "") != "" }

// parseToolFile reads one tool definition, strictly: unknown fields are
// errors. A file holding "mcp_server" alone defines an MCP server: its
// registration is returned as server (as JSON, for ServerFiles to read
// strictly), and def holds only its name.
func parseToolFile(name string, raw []byte) (def tooldef.Definition, server json.RawMessage, err error) {
	if !strings.HasSuffix(strings.ToLower(name), ".json") {
		var tree any
		if err := yaml.Unmarshal(raw, &tree); err != nil {
			return def, nil, fmt.Errorf("not valid YAML: %w", err)
		}
		j, err := json.Marshal(jsonValue(tree))
		if err != nil {
			return def, nil, fmt.Errorf("not valid YAML: %w", err)
		}
		raw = j
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) == nil && top["mcp_server"] != nil {
		if len(top) > 1 {
			return def, nil, errors.New("a file with \"mcp_server\" defines that server alone: move the other fields to a file of their own")
		}
		var head struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(top["mcp_server"], &head); err != nil {
			return def, nil, fmt.Errorf("mcp_server is not an MCP server's registration: %w", err)
		}
		if head.Name == "" {
			return def, nil, errors.New("no name: an MCP server needs \"name\"")
		}
		def.Name = head.Name
		return def, top["mcp_server"], nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return def, nil, fmt.Errorf("not a tool definition: %w", err)
	}
	if def.Name == "" {
		return def, nil, fmt.Errorf("no name: a tool file needs \"name\"")
	}
	return def, nil, nil
}

// jsonValue is a decoded YAML value as JSON can hold it: mapping keys that
// are not strings (200, true, 1.5) become their text, and timestamps,
// which YAML reads as times, the text they were (a date alone stays a
// date), so a YAML tool file reads as its JSON twin would.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonValue(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(jsonValue(k))] = jsonValue(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonValue(e)
		}
		return v
	case time.Time:
		if v.Equal(v.Truncate(24*time.Hour)) && v.Location() == time.UTC {
			return v.Format(time.DateOnly)
		}
		return v.Format(time.RFC3339Nano)
	default:
		return v
	}
}
