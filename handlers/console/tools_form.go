package console

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"golang.org/x/mod/semver"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/catalog"
	"toolbelt/services/tooldef"
	"toolbelt/views"
)

// toolFormFieldNames are the fields of the register and edit form.
var toolFormFieldNames = []string{
	"name", "version", "description", "category", "tags", "examples", "parameters",
	"level", "require_confirm", "sandbox", "network", "shell_operators", "allowed_paths", "rate_max_calls", "rate_window_ms",
	"timeout", "retryable", "max_retries", "retry_timeouts", "cacheable", "cache_ttl",
	"runner_kind", "builtin", "argv", "runs_argument_as_code", "option_arguments", "method", "url", "headers", "body", "steps",
}

// toolFieldOfPointer maps the JSON pointers of a definition's problems to the
// form field that edits them; a problem under a pointer goes to the
// longest prefix listed.
var toolFieldOfPointer = map[string]string{
	"/name": "name", "/version": "version", "/description": "description", "/category": "category",
	"/tags": "tags", "/examples": "examples", "/parameters": "parameters",
	"/security/level": "level", "/security/requireConfirm": "require_confirm", "/security/sandbox": "sandbox",
	"/security/network": "network", "/security/shellOperators": "shell_operators", "/security/allowedPaths": "allowed_paths",
	"/security/rateLimit": "rate_max_calls", "/security/rateLimit/maxCalls": "rate_max_calls", "/security/rateLimit/windowMs": "rate_window_ms",
	"/execution/timeout": "timeout", "/execution/retryable": "retryable", "/execution/maxRetries": "max_retries",
	"/execution/retryTimeouts": "retry_timeouts", "/execution/cacheable": "cacheable", "/execution/cacheTTL": "cache_ttl",
	"/runner/kind": "runner_kind", "/runner/builtin": "builtin", "/runner/argv": "argv", "/runner/method": "method",
	"/runner/runsArgumentAsCode": "runs_argument_as_code", "/runner/optionArguments": "option_arguments",
	"/runner/url": "url", "/runner/headers": "headers", "/runner/body": "body", "/runner/steps": "steps",
}

// toolListFields are the fields holding a list, one item per comma or line.
var toolListFields = map[string]bool{"tags": true, "examples": true, "allowed_paths": true, "argv": true, "option_arguments": true}

// toolFormField returns the form field a problem's pointer concerns, or "".
func toolFormField(pointer string) string {
	for p := pointer; p != ""; {
		if f, ok := toolFieldOfPointer[p]; ok {
			return f
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ""
}

// NewToolPage shows the register form with sensible defaults.
func (h *Handler) NewToolPage(c *gin.Context) error {
	vals := map[string]string{
		"version": "1.0.0", "category": "api", "level": tooldef.LevelModerate, "timeout": strconv.Itoa(tooldef.DefaultTimeoutMs),
		"max_retries": "0", "runner_kind": tooldef.RunnerHTTP, "method": "GET",
		"parameters": "{\n  \"type\": \"object\",\n  \"properties\": {},\n  \"additionalProperties\": false\n}",
	}
	return h.renderToolForm(c, http.StatusOK, h.toolForm(false, "", "", vals, nil))
}

// CreateToolForm registers the tool of the form. Problems are shown beside
// their fields with the values as sent; nothing is stored unless the whole
// definition is valid.
func (h *Handler) CreateToolForm(c *gin.Context) error {
	vals := toolFormValues(c)
	def, ps := toolFormDefinition(vals)
	if len(ps) == 0 {
		tool, err := h.Registry.Register(c.Request.Context(), def, handlers.CurrentPrincipal(c))
		if err == nil {
			return Redirect(c, "/admin/tools/"+tool.Name, fmt.Sprintf("Registered %s %s.", tool.Name, tool.Version))
		}
		status, problems, ok := toolFormProblems(err, "/name", "is already registered; publish a new version of it instead")
		if !ok {
			return err
		}
		return h.renderToolForm(c, status, h.toolForm(false, "", "", vals, problems))
	}
	return h.renderToolForm(c, handlers.StatusFor(models.CodeValidation), h.toolForm(false, "", "", vals, ps))
}

// EditToolPage shows the form prefilled from the current version, with
// the next patch version proposed.
func (h *Handler) EditToolPage(c *gin.Context) error {
	ctx := c.Request.Context()
	name := c.Param("name")
	vers, err := h.Registry.Versions(ctx, name)
	if err != nil {
		return err
	}
	current, latest := toolCurrentAndLatest(vers)
	tool, err := h.Registry.Version(ctx, name, current)
	if err != nil {
		return err
	}
	vals := toolFormValuesOf(tool.Definition)
	vals["version"] = toolNextPatch(latest)
	return h.renderToolForm(c, http.StatusOK, h.toolForm(true, name, latest, vals, nil))
}

// PublishToolForm publishes the form as a new version of the tool.
func (h *Handler) PublishToolForm(c *gin.Context) error {
	ctx := c.Request.Context()
	name := c.Param("name")
	vers, err := h.Registry.Versions(ctx, name)
	if err != nil {
		return err
	}
	_, latest := toolCurrentAndLatest(vers)
	vals := toolFormValues(c)
	vals["name"] = name
	def, ps := toolFormDefinition(vals)
	if len(ps) == 0 {
		tool, err := h.Registry.Publish(ctx, name, def, handlers.CurrentPrincipal(c))
		if err == nil {
			return Redirect(c, "/admin/tools/"+name, fmt.Sprintf("Published %s %s.", name, tool.Version))
		}
		status, problems, ok := toolFormProblems(err, "/version", "was published by someone else just now; choose a greater version")
		if !ok {
			return err
		}
		return h.renderToolForm(c, status, h.toolForm(true, name, latest, vals, problems))
	}
	return h.renderToolForm(c, handlers.StatusFor(models.CodeValidation), h.toolForm(true, name, latest, vals, ps))
}

// toolFormProblems turns a registry error the form can show into its status
// and problems: validation problems, or a conflict stated at conflictAt.
func toolFormProblems(err error, conflictAt, conflictMsg string) (int, []models.Problem, bool) {
	if ve, ok := toolsValidation(err); ok {
		return handlers.ErrorStatus(err), ve.Problems, true
	}
	if handlers.CodeOf(err) == models.CodeConflict {
		return handlers.ErrorStatus(err), []models.Problem{{Pointer: conflictAt, Message: conflictMsg}}, true
	}
	return 0, nil, false
}

func (h *Handler) renderToolForm(c *gin.Context, status int, f views.ToolForm) error {
	title := "Register a tool"
	if f.Edit {
		title = "New version of " + f.Name
	}
	return h.Render(c, status, views.ToolFormPage(h.Page(c, title), f))
}

func (h *Handler) toolForm(edit bool, name, latest string, vals map[string]string, ps []models.Problem) views.ToolForm {
	f := views.ToolForm{Edit: edit, Name: name, Latest: latest, Values: vals, Errors: map[string][]string{},
		Categories: tooldef.Categories, Levels: tooldef.Levels, Builtins: tooldef.Builtins,
		RunnerKinds: []string{tooldef.RunnerBuiltin, tooldef.RunnerCommand, tooldef.RunnerHTTP, tooldef.RunnerComposite},
		Methods:     []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"},
	}
	for _, p := range ps {
		field := toolFormField(p.Pointer)
		if edit && field == "name" {
			field = "" // the edit form has no name field
		}
		f.Problems = append(f.Problems, views.FormProblem{Field: field, Pointer: p.Pointer, Message: p.Message})
		if field != "" {
			msg := p.Message
			if rest := strings.TrimPrefix(p.Pointer, toolFieldPointer(field)); rest != "" {
				if n, err := strconv.Atoi(strings.TrimPrefix(rest, "/")); err == nil && toolListFields[field] {
					msg = fmt.Sprintf("Item %d: %s", n+1, msg)
				} else {
					msg = "At " + rest + ": " + msg
				}
			}
			f.Errors[field] = append(f.Errors[field], msg)
		}
	}
	return f
}

// toolFieldPointer is the pointer a field edits.
func toolFieldPointer(field string) string {
	best := ""
	for p, f := range toolFieldOfPointer {
		if f == field && (best == "" || len(p) > len(best)) {
			best = p
		}
	}
	return best
}

// toolFormValues reads the form's fields.
func toolFormValues(c *gin.Context) map[string]string {
	vals := make(map[string]string, len(toolFormFieldNames))
	for _, f := range toolFormFieldNames {
		vals[f] = strings.ReplaceAll(c.PostForm(f), "\r\n", "\n")
	}
	return vals
}

// toolFormDefinition builds a definition from the form. Values that cannot be
// what their field needs (a number that is not one, JSON that does not
// parse) are problems at the field's pointer; everything else is left to
// the registry's validation. Only the settings of the chosen runner kind
// are taken, so fields of other kinds left filled in do no harm.
func toolFormDefinition(v map[string]string) (tooldef.Definition, []models.Problem) {
	var ps []models.Problem
	num := func(field, ptr, what string) int {
		s := strings.TrimSpace(v[field])
		if s == "" {
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			ps = append(ps, models.Problem{Pointer: ptr, Message: fmt.Sprintf("%q is not a whole number of %s", s, what)})
		}
		return n
	}
	def := tooldef.Definition{
		Name: v["name"], Version: v["version"], Description: v["description"], Category: v["category"],
		Tags: toolsSplitList(v["tags"], ","), Examples: toolsSplitList(v["examples"], "\n"),
		Security: tooldef.Security{
			Level: v["level"], RequireConfirm: v["require_confirm"] != "", Sandbox: v["sandbox"] != "",
			Network: v["network"] != "", ShellOperators: v["shell_operators"] != "",
			AllowedPaths: toolsSplitList(v["allowed_paths"], ","),
		},
		Execution: tooldef.Execution{
			Timeout:       num("timeout", "/execution/timeout", "milliseconds"),
			Retryable:     v["retryable"] != "",
			MaxRetries:    num("max_retries", "/execution/maxRetries", "retries"),
			Cacheable:     v["cacheable"] != "",
			CacheTTL:      num("cache_ttl", "/execution/cacheTTL", "milliseconds"),
			RetryTimeouts: v["retry_timeouts"] != "",
		},
		Runner: tooldef.Runner{Kind: v["runner_kind"]},
	}
	if p := strings.TrimSpace(v["parameters"]); p != "" {
		def.Parameters = json.RawMessage(p)
	}
	if strings.TrimSpace(v["rate_max_calls"]) != "" || strings.TrimSpace(v["rate_window_ms"]) != "" {
		def.Security.RateLimit = &tooldef.RateLimit{
			MaxCalls: num("rate_max_calls", "/security/rateLimit/maxCalls", "calls"),
			WindowMs: num("rate_window_ms", "/security/rateLimit/windowMs", "milliseconds"),
		}
	}
	switch def.Runner.Kind {
	case tooldef.RunnerBuiltin:
		def.Runner.Builtin = v["builtin"]
	case tooldef.RunnerCommand:
		def.Runner.Argv = toolsSplitList(v["argv"], "\n")
		def.Runner.RunsArgumentAsCode = v["runs_argument_as_code"] != ""
		def.Runner.OptionArguments = toolsSplitList(v["option_arguments"], ",")
	case tooldef.RunnerHTTP:
		def.Runner.Method, def.Runner.URL, def.Runner.Body = v["method"], strings.TrimSpace(v["url"]), v["body"]
		for i, line := range strings.Split(v["headers"], "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				ps = append(ps, models.Problem{Pointer: "/runner/headers", Message: fmt.Sprintf("line %d, %q, is not Name: value", i+1, line)})
				continue
			}
			if def.Runner.Headers == nil {
				def.Runner.Headers = map[string]string{}
			}
			def.Runner.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	case tooldef.RunnerComposite:
		if s := strings.TrimSpace(v["steps"]); s != "" {
			if err := json.Unmarshal([]byte(s), &def.Runner.Steps); err != nil {
				ps = append(ps, models.Problem{Pointer: "/runner/steps", Message: "is not a JSON array of {\"tool\", \"arguments\"} steps: " + strings.TrimPrefix(err.Error(), "json: ")})
			}
		}
	}
	return def, ps
}

// toolFormValuesOf is the form's values for a stored definition.
func toolFormValuesOf(def tooldef.Definition) map[string]string {
	check := func(b bool) string {
		if b {
			return "on"
		}
		return ""
	}
	v := map[string]string{
		"name": def.Name, "version": def.Version, "description": def.Description, "category": def.Category,
		"tags": strings.Join(def.Tags, ", "), "examples": strings.Join(def.Examples, "\n"),
		"parameters": views.PrettyJSON(string(def.Parameters)),
		"level":      def.Security.Level, "require_confirm": check(def.Security.RequireConfirm), "sandbox": check(def.Security.Sandbox),
		"network": check(def.Security.Network), "shell_operators": check(def.Security.ShellOperators),
		"allowed_paths": strings.Join(def.Security.AllowedPaths, ", "),
		"timeout":       strconv.Itoa(def.Execution.Timeout), "retryable": check(def.Execution.Retryable),
		"max_retries": strconv.Itoa(def.Execution.MaxRetries), "cacheable": check(def.Execution.Cacheable),
		"retry_timeouts":        check(def.Execution.RetryTimeouts),
		"runs_argument_as_code": check(def.Runner.RunsArgumentAsCode), "option_arguments": strings.Join(def.Runner.OptionArguments, ", "),
		"runner_kind": def.Runner.Kind, "builtin": def.Runner.Builtin, "argv": strings.Join(def.Runner.Argv, "\n"),
		"method": def.Runner.Method, "url": def.Runner.URL, "body": def.Runner.Body,
	}
	if def.Execution.CacheTTL != 0 {
		v["cache_ttl"] = strconv.Itoa(def.Execution.CacheTTL)
	}
	if rl := def.Security.RateLimit; rl != nil {
		v["rate_max_calls"], v["rate_window_ms"] = strconv.Itoa(rl.MaxCalls), strconv.Itoa(rl.WindowMs)
	}
	var headers []string
	for _, k := range slices.Sorted(maps.Keys(def.Runner.Headers)) {
		headers = append(headers, k+": "+def.Runner.Headers[k])
	}
	v["headers"] = strings.Join(headers, "\n")
	if len(def.Runner.Steps) > 0 {
		raw, _ := json.MarshalIndent(def.Runner.Steps, "", "  ")
		v["steps"] = string(raw)
	}
	return v
}

// toolsSplitList splits a list field, trimming items and dropping empty ones.
func toolsSplitList(s, sep string) []string {
	var out []string
	for _, item := range strings.Split(s, sep) {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// toolCurrentAndLatest returns the current version and the highest published.
func toolCurrentAndLatest(vers []catalog.ToolVersion) (current, latest string) {
	for _, v := range vers {
		if v.Current {
			current = v.Version
		}
		if latest == "" || semver.Compare("v"+v.Version, "v"+latest) > 0 {
			latest = v.Version
		}
	}
	if current == "" {
		current = latest
	}
	return current, latest
}

// toolNextPatch proposes the version after latest: its patch number plus one.
func toolNextPatch(latest string) string {
	core, _, _ := strings.Cut(strings.SplitN(latest, "+", 2)[0], "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return latest
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return latest
	}
	return parts[0] + "." + parts[1] + "." + strconv.Itoa(n+1)
}
