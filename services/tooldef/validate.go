package tooldef

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agnivade/levenshtein"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"toolbelt/models"
	"toolbelt/services/redact"
)

// Bounds a definition must stay within. They keep one tool from starving
// the host (timeouts, retries, cache) or bloating every LLM prompt (sizes).
const (
	MaxDescriptionLen = 2048
	MaxTags           = 20
	MaxExamples       = 32
	MaxExampleLen     = 500
	MaxSchemaBytes    = 64 << 10
	MaxSchemaDepth    = 32
	MinTimeoutMs      = 100
	MaxTimeoutMs      = 600_000
	DefaultTimeoutMs  = 30_000
	MaxRetries        = 10
	MaxCacheTTLMs     = 86_400_000
	MaxRateCalls      = 100_000
	MinRateWindowMs   = 1_000
	MaxRateWindowMs   = 86_400_000
	MaxCompositeSteps = 20
	MaxArgv           = 64
)

// The draft every parameters schema is compiled as.
const schemaDraft2020 = "https://json-schema.org/draft/2020-12/schema"

var (
	// NamePattern is the rule for tool names: snake_case ASCII, so the name
	// fits every LLM format and cannot hide a look-alike character or a path.
	NamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	// ServerNamePattern is the rule for upstream MCP server names: the
	// prefix of their tools' names (everything__get_sum), so short and
	// without '_' ('-' becomes '_' in the prefix).
	ServerNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	// semverPattern is the official semver.org regular expression.
	semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	TagPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,31}$`)
	Placeholder   = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}`)
	envRefPattern = regexp.MustCompile(`^env\.[A-Z_][A-Z0-9_]*$`)
	// userSecretRef is {{user.secret.NAME}}: the value the person a call
	// acts for stored as NAME (services/vault's SecretNamePattern).
	userSecretRef = regexp.MustCompile(`^user\.secret\.([A-Z][A-Z0-9_]{0,63})$`)
	HTTPMethods   = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
	SecretHeader  = regexp.MustCompile(`(?i)(authorization|cookie|token|secret|api[-_]?key|password|credential)`)
)

// Normalize trims text fields and fills the defaults a definition may omit,
// so the stored version states every setting explicitly.
func Normalize(def *Definition) {
	def.Name = strings.TrimSpace(def.Name)
	def.Version = strings.TrimSpace(def.Version)
	def.Description = strings.TrimSpace(def.Description)
	def.Category = strings.TrimSpace(def.Category)
	if def.Security.Level == "" {
		def.Security.Level = LevelModerate
	}
	if def.Execution.Timeout == 0 {
		def.Execution.Timeout = DefaultTimeoutMs
	}
	if def.Runner.Kind == RunnerHTTP {
		def.Runner.Method = strings.ToUpper(def.Runner.Method)
		if def.Runner.Method == "" {
			def.Runner.Method = "GET"
		}
	}
	if len(def.Parameters) == 0 || bytes.Equal(bytes.TrimSpace(def.Parameters), []byte("null")) {
		def.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
}

// ReservedToolNames are the tools the MCP server adds to every catalog,
// with what they do: no registered tool may take their names.
var ReservedToolNames = map[string]string{
	MCPSearchTools: "MCP clients call it to search the catalog",
	MCPCallResult:  "MCP clients call it to read an earlier call's result",
}

// The MCP server's own tools.
const (
	MCPSearchTools = "search_tools"
	MCPCallResult  = "call_result"
)

// Validate checks everything about a definition that does not
// need the database, and returns the compiled parameters schema when it
// compiles. known tells whether a tool name is registered (for composite
// steps).
func Validate(def *Definition, known func(string) bool) (*jsonschema.Schema, models.Problems) {
	var ps models.Problems
	switch {
	case def.Name == "":
		ps.Add("/name", "is required")
	case !utf8.ValidString(def.Name) || !NamePattern.MatchString(def.Name):
		ps.Add("/name", "%q must be snake_case ASCII: a lowercase letter, then up to 63 lowercase letters, digits or underscores", def.Name)
	case ReservedToolNames[def.Name] != "":
		ps.Add("/name", "%q is reserved: %s; choose another name", def.Name, ReservedToolNames[def.Name])
	}
	switch {
	case def.Version == "":
		ps.Add("/version", "is required (semantic version such as 1.0.0)")
	case !semverPattern.MatchString(def.Version):
		ps.Add("/version", "%q is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.0.0)", def.Version)
	}
	switch n := utf8.RuneCountInString(def.Description); {
	case n == 0:
		ps.Add("/description", "is required: say what the tool does, its input and its output")
	case n > MaxDescriptionLen:
		ps.Add("/description", "is %d characters long; at most %d are allowed", n, MaxDescriptionLen)
	}
	ps.CheckText("/description", def.Description, true)
	if !slices.Contains(Categories, def.Category) {
		ps.Add("/category", "%q is not a category; use one of %s", def.Category, strings.Join(Categories, ", "))
	}
	if len(def.Tags) > MaxTags {
		ps.Add("/tags", "has %d tags; at most %d are allowed", len(def.Tags), MaxTags)
	}
	seen := map[string]bool{}
	for i, t := range def.Tags {
		p := "/tags/" + strconv.Itoa(i)
		if !TagPattern.MatchString(t) {
			ps.Add(p, "%q must be lowercase letters, digits, '_', '-' or '.', at most 32 characters", t)
		} else if seen[t] {
			ps.Add(p, "duplicate tag %q", t)
		}
		seen[t] = true
	}
	if len(def.Examples) > MaxExamples {
		ps.Add("/examples", "has %d examples; at most %d are allowed", len(def.Examples), MaxExamples)
	}
	for i, e := range def.Examples {
		if n := utf8.RuneCountInString(strings.TrimSpace(e)); n == 0 || n > MaxExampleLen {
			ps.Add("/examples/"+strconv.Itoa(i), "must be 1 to %d characters long", MaxExampleLen)
		}
		ps.CheckText("/examples/"+strconv.Itoa(i), e, false)
	}
	schema, props := validateParameters(def.Parameters, &ps)
	validateSecurity(def, &ps)
	validateExecution(def.Execution, &ps)
	validateRunner(def, props, known, &ps)
	return schema, ps
}

// validateParameters compiles the parameters as JSON Schema 2020-12 and
// checks what the compiler does not: a root object type, required names
// that exist, and size and depth bounds. It returns the compiled schema and
// the root property names.
func validateParameters(raw json.RawMessage, ps *models.Problems) (*jsonschema.Schema, map[string]bool) {
	if len(raw) > MaxSchemaBytes {
		ps.Add("/parameters", "is %d bytes; at most %d are allowed", len(raw), MaxSchemaBytes)
		return nil, nil
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		ps.Add("/parameters", "is not valid JSON: %s", jsonErrorAt(raw, err))
		return nil, nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		line, col := lineColumn(raw, int(dec.InputOffset()))
		ps.Add("/parameters", "is not valid JSON: more follows the schema's closing brace at line %d, column %d", line, col)
		return nil, nil
	}
	if d := depth(doc); d > MaxSchemaDepth {
		ps.Add("/parameters", "nests %d levels deep; at most %d are allowed", d, MaxSchemaDepth)
		return nil, nil
	}
	root, ok := doc.(map[string]any)
	if !ok {
		ps.Add("/parameters", "must be a JSON Schema object with \"type\": \"object\"")
		return nil, nil
	}
	if s, ok := root["$schema"]; ok && s != schemaDraft2020 && s != schemaDraft2020+"#" {
		ps.Add("/parameters/$schema", "must be %q or absent: parameters are JSON Schema draft 2020-12", schemaDraft2020)
	}
	if root["type"] != "object" {
		ps.Add("/parameters/type", "must be \"object\": tool arguments are a JSON object")
	}
	before := len(*ps)
	checkSchemaText(root, "/parameters", ps)
	checkRequired(root, "/parameters", ps)
	checkTypeNames(root, "/parameters", ps)
	if len(*ps) > before {
		return nil, nil
	}
	schema, err := CompileSchema(doc)
	if err != nil {
		schemaProblems(err, ps)
		return nil, nil
	}
	if len(*ps) > before {
		return nil, nil
	}
	props := map[string]bool{}
	if m, ok := root["properties"].(map[string]any); ok {
		for k := range m {
			props[k] = true
		}
	}
	return schema, props
}

// CompileSchema compiles doc as draft 2020-12. The loader refuses every
// URL, so a $ref can never make the server read a file or fetch a page.
func CompileSchema(doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "urn:toolbelt:parameters"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed; define it under $defs", url)
}

// checkSchemaText refuses hidden characters (models.HiddenRune) where the
// console and an agent's LLM read the schema as text: property names and
// other keys, titles and descriptions. Values an argument is checked
// against (enum, const, default, examples) are data and left alone.
func checkSchemaText(v any, ptr string, ps *models.Problems) {
	switch n := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(n)) {
			at := ptr + "/" + EscapePointer(k)
			ps.CheckText(at, k, false)
			s, isString := n[k].(string)
			named, isMap := n[k].(map[string]any)
			switch {
			case k == "enum" || k == "const" || k == "default" || k == "examples":
			case (k == "title" || k == "description") && isString:
				ps.CheckText(at, s, true)
			case isMap && (k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions" || k == "dependentSchemas"):
				// Names, not keywords: a property may be called "enum".
				for _, name := range slices.Sorted(maps.Keys(named)) {
					ps.CheckText(at+"/"+EscapePointer(name), name, false)
					checkSchemaText(named[name], at+"/"+EscapePointer(name), ps)
				}
			default:
				checkSchemaText(n[k], at, ps)
			}
		}
	case []any:
		for i, child := range n {
			checkSchemaText(child, fmt.Sprintf("%s/%d", ptr, i), ps)
		}
	}
}

// checkRequired walks every subschema with "properties" and reports required
// names that are not among them.
func checkRequired(v any, ptr string, ps *models.Problems) {
	switch n := v.(type) {
	case map[string]any:
		// An object schema's required names must be among its properties.
		// A bare "required" without "properties" or "type": "object" is a
		// constraint used inside anyOf and the like, and is left alone.
		if req, ok := n["required"].([]any); ok {
			props, hasProps := n["properties"].(map[string]any)
			if hasProps || n["type"] == "object" {
				for i, r := range req {
					name, _ := r.(string)
					if _, ok := props[name]; !ok {
						ps.Add(fmt.Sprintf("%s/required/%d", ptr, i), "required property %q is not defined in properties", name)
					}
				}
			}
		}
		for k, child := range n {
			if k == "enum" || k == "const" || k == "default" || k == "examples" {
				continue
			}
			checkRequired(child, ptr+"/"+EscapePointer(k), ps)
		}
	case []any:
		for i, child := range n {
			checkRequired(child, ptr+"/"+strconv.Itoa(i), ps)
		}
	}
}

// schemaProblems turns a compiler error into problems located under
// /parameters.
func schemaProblems(err error, ps *models.Problems) {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			// Alternatives (anyOf in the metaschema) fail as several leaves
			// at one place: report them as one problem.
			printer := message.NewPrinter(language.English)
			var order []string
			msgs := map[string][]string{}
			for _, leaf := range Leaves(ve) {
				ptr := "/parameters"
				for _, seg := range leaf.InstanceLocation {
					ptr += "/" + EscapePointer(seg)
				}
				if _, ok := msgs[ptr]; !ok {
					order = append(order, ptr)
				}
				msgs[ptr] = append(msgs[ptr], leaf.ErrorKind.LocalizedString(printer))
			}
			for _, ptr := range order {
				ps.Add(ptr, "%s", strings.Join(msgs[ptr], "; or "))
			}
			return
		}
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "urn:toolbelt:parameters", "parameters")
	ps.Add("/parameters", "does not compile as JSON Schema 2020-12: %s", msg)
}

func Leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, Leaves(c)...)
	}
	return out
}

func depth(v any) int {
	switch n := v.(type) {
	case map[string]any:
		d := 0
		for _, c := range n {
			d = max(d, depth(c))
		}
		return d + 1
	case []any:
		d := 0
		for _, c := range n {
			d = max(d, depth(c))
		}
		return d + 1
	}
	return 0
}

// EscapePointer escapes s as one JSON Pointer token.
func EscapePointer(s string) string { return pointerEscapes.Replace(s) }

// pointerEscapes is JSON Pointer's escaping (RFC 6901), built once: a
// Replacer is immutable and safe for concurrent use, and building one per
// call cost a tenth of a large import's CPU.
var pointerEscapes = strings.NewReplacer("~", "~0", "/", "~1")

func validateSecurity(def *Definition, ps *models.Problems) {
	s := def.Security
	if !slices.Contains(Levels, s.Level) {
		ps.Add("/security/level", "%q is not a security level; use safe, moderate or dangerous", s.Level)
	}
	for i, p := range s.AllowedPaths {
		ptr := "/security/allowedPaths/" + strconv.Itoa(i)
		clean := strings.TrimSpace(p)
		switch {
		case clean == "":
			ps.Add(ptr, "must not be empty (use \".\" for the whole work directory)")
		case strings.HasPrefix(clean, "/") || strings.HasPrefix(clean, `\`):
			ps.Add(ptr, "%q must be relative to the session work directory", p)
		case slices.Contains(strings.Split(strings.ReplaceAll(clean, `\`, "/"), "/"), ".."):
			ps.Add(ptr, "%q must not contain \"..\"", p)
		case strings.ContainsRune(clean, 0):
			ps.Add(ptr, "must not contain NUL")
		}
	}
	if len(s.AllowedPaths) > 0 && def.Category != "filesystem" {
		ps.Add("/security/allowedPaths", "only filesystem tools take allowedPaths")
	}
	if rl := s.RateLimit; rl != nil {
		if rl.MaxCalls < 1 || rl.MaxCalls > MaxRateCalls {
			ps.Add("/security/rateLimit/maxCalls", "must be between 1 and %d", MaxRateCalls)
		}
		if rl.WindowMs < MinRateWindowMs || rl.WindowMs > MaxRateWindowMs {
			ps.Add("/security/rateLimit/windowMs", "must be between %d (1 s) and %d (24 h)", MinRateWindowMs, MaxRateWindowMs)
		}
	}
}

func validateExecution(e Execution, ps *models.Problems) {
	if e.Timeout < MinTimeoutMs || e.Timeout > MaxTimeoutMs {
		ps.Add("/execution/timeout", "%d ms is out of range; use %d to %d ms", e.Timeout, MinTimeoutMs, MaxTimeoutMs)
	}
	if e.MaxRetries < 0 || e.MaxRetries > MaxRetries {
		ps.Add("/execution/maxRetries", "must be between 0 and %d", MaxRetries)
	} else if e.MaxRetries > 0 && !e.Retryable {
		ps.Add("/execution/maxRetries", "is %d but retryable is false; set retryable to true or maxRetries to 0", e.MaxRetries)
	}
	if e.RetryTimeouts && e.MaxRetries == 0 {
		ps.Add("/execution/retryTimeouts", "is true but maxRetries is 0; set maxRetries above 0 (and retryable to true) or retryTimeouts to false")
	}
	if e.CacheTTL < 0 || e.CacheTTL > MaxCacheTTLMs {
		ps.Add("/execution/cacheTTL", "must be between 0 and %d ms (24 h)", MaxCacheTTLMs)
	} else if e.CacheTTL > 0 && !e.Cacheable {
		ps.Add("/execution/cacheTTL", "is set but cacheable is false")
	}
	if e.Cacheable && e.CacheTTL == 0 {
		ps.Add("/execution/cacheTTL", "must be positive when cacheable is true")
	}
}

// runnerFields lists the runner fields each kind uses.
var runnerFields = map[string][]string{
	RunnerBuiltin:   {"builtin"},
	RunnerCommand:   {"argv", "optionArguments"},
	RunnerHTTP:      {"method", "url", "headers", "body"},
	RunnerComposite: {"steps"},
	RunnerMCP:       {"server", "tool"},
}

// validateRunner checks that the runner's fields fit its kind, and that
// every placeholder names a root parameter.
func validateRunner(def *Definition, props map[string]bool, known func(string) bool, ps *models.Problems) {
	r := def.Runner
	// Fields set that the kind does not use are mistakes worth reporting:
	// the admin believes they do something.
	set := map[string]bool{
		"builtin": r.Builtin != "", "argv": len(r.Argv) > 0, "method": r.Method != "", "url": r.URL != "",
		"headers": len(r.Headers) > 0, "body": r.Body != "", "steps": len(r.Steps) > 0,
		"server": r.Server != "", "tool": r.Tool != "", "optionArguments": len(r.OptionArguments) > 0,
	}
	if uses, ok := runnerFields[r.Kind]; ok {
		for _, field := range []string{"builtin", "argv", "optionArguments", "method", "url", "headers", "body", "steps", "server", "tool"} {
			if set[field] && !slices.Contains(uses, field) {
				ps.Add("/runner/"+field, "does not apply to runner kind %q", r.Kind)
			}
		}
	}
	checkPlaceholders := func(ptr, s string) {
		for _, m := range Placeholder.FindAllStringSubmatch(s, -1) {
			if strings.HasPrefix(m[1], "user.") {
				ps.Add(ptr, "{{%s}}: a person's secret fills a header only (a URL or a body may be logged or echoed back)", m[1])
			} else if props != nil && !props[m[1]] {
				ps.Add(ptr, "placeholder {{%s}} names no property of parameters", m[1])
			}
		}
	}
	switch r.Kind {
	case RunnerBuiltin:
		if !slices.Contains(Builtins, r.Builtin) {
			ps.Add("/runner/builtin", "%q is not a built-in tool; use one of %s", r.Builtin, strings.Join(Builtins, ", "))
		}
	case RunnerCommand:
		switch {
		case len(r.Argv) == 0:
			ps.Add("/runner/argv", "is required: the program and its arguments, e.g. [\"grep\", \"-rn\", \"{{pattern}}\", \".\"]")
		case len(r.Argv) > MaxArgv:
			ps.Add("/runner/argv", "has %d elements; at most %d are allowed", len(r.Argv), MaxArgv)
		default:
			if strings.TrimSpace(r.Argv[0]) == "" || Placeholder.MatchString(r.Argv[0]) {
				ps.Add("/runner/argv/0", "must name a fixed program, not a placeholder")
			}
			for i, a := range r.Argv {
				ptr := "/runner/argv/" + strconv.Itoa(i)
				if strings.ContainsRune(a, 0) {
					ps.Add(ptr, "must not contain NUL")
				}
				if m := Placeholder.FindAllStringIndex(a, -1); len(m) > 0 && !(len(m) == 1 && m[0][0] == 0 && m[0][1] == len(a)) {
					ps.Add(ptr, "%q: a placeholder must be a whole argv element, so it becomes exactly one argument", a)
				}
				checkPlaceholders(ptr, a)
			}
			checkCodeArgument(def, ps)
			checkOptionArguments(r, def.Parameters, ps)
		}
		if !def.Security.Sandbox {
			ps.Add("/security/sandbox", "must be true: command tools always run in the sandbox")
		}
	case RunnerHTTP:
		if !slices.Contains(HTTPMethods, r.Method) {
			ps.Add("/runner/method", "%q is not supported; use one of %s", r.Method, strings.Join(HTTPMethods, ", "))
		}
		validateURLTemplate(r.URL, ps)
		checkPlaceholders("/runner/url", r.URL)
		checkPlaceholders("/runner/body", r.Body)
		for name, val := range r.Headers {
			ptr := "/runner/headers/" + EscapePointer(name)
			if !validHeaderName(name) {
				ps.Add(ptr, "%q is not a valid HTTP header name", name)
			}
			hasEnv := false
			for _, m := range Placeholder.FindAllStringSubmatch(val, -1) {
				if strings.HasPrefix(m[1], "env.") {
					hasEnv = true
					if !envRefPattern.MatchString(m[1]) {
						ps.Add(ptr, "{{%s}}: environment references look like {{env.NAME}} with NAME in upper case", m[1])
					}
				} else if strings.HasPrefix(m[1], "user.") {
					hasEnv = true
					if !userSecretRef.MatchString(m[1]) {
						ps.Add(ptr, "{{%s}}: a person's own secret is {{user.secret.NAME}}, NAME an upper-case letter then up to 63 of A-Z, 0-9 and _", m[1])
					}
				} else if props != nil && !props[m[1]] {
					ps.Add(ptr, "placeholder {{%s}} names no property of parameters", m[1])
				}
			}
			if rule := redact.Credential(val); rule != "" {
				ps.Add(ptr, "holds a credential (%s): reference it from the environment as {{env.NAME}}; secrets are never stored", rule)
			} else if SecretHeader.MatchString(name) && !hasEnv {
				ps.Add(ptr, "carries a credential: reference it from the environment as {{env.NAME}}, or the caller's own as {{user.secret.NAME}}; secrets are never stored in a tool")
			}
		}
	case RunnerComposite:
		switch {
		case len(r.Steps) == 0:
			ps.Add("/runner/steps", "is required: at least one step naming a tool")
		case len(r.Steps) > MaxCompositeSteps:
			ps.Add("/runner/steps", "has %d steps; at most %d are allowed", len(r.Steps), MaxCompositeSteps)
		}
		for i, st := range r.Steps {
			ptr := "/runner/steps/" + strconv.Itoa(i)
			switch {
			case st.Tool == def.Name:
				ps.Add(ptr+"/tool", "a composite tool cannot call itself")
			case !NamePattern.MatchString(st.Tool):
				ps.Add(ptr+"/tool", "%q is not a valid tool name", st.Tool)
			case known != nil && !known(st.Tool):
				ps.Add(ptr+"/tool", "tool %q is not registered", st.Tool)
			}
			if len(st.Arguments) > 0 {
				var obj map[string]any
				if json.Unmarshal(st.Arguments, &obj) != nil {
					ps.Add(ptr+"/arguments", "must be a JSON object")
				}
			}
		}
	case RunnerMCP:
		if !ServerNamePattern.MatchString(r.Server) {
			ps.Add("/runner/server", "%q is not an upstream server name (lower-case letters, digits and '-', at most 32)", r.Server)
		}
		if r.Tool == "" || len(r.Tool) > 128 || strings.ContainsFunc(r.Tool, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
			ps.Add("/runner/tool", "%q is not the name of an upstream tool (1 to 128 printable ASCII characters)", r.Tool)
		}
	case "":
		ps.Add("/runner/kind", "is required: builtin, command, http, composite or mcp")
	default:
		ps.Add("/runner/kind", "%q is not a runner kind; use builtin, command, http, composite or mcp", r.Kind)
	}
}

func validateURLTemplate(u string, ps *models.Problems) {
	if u == "" {
		ps.Add("/runner/url", "is required for http runners")
		return
	}
	// Placeholders may only fill the path and query, never choose the
	// scheme or host: check the template with each placeholder as a
	// harmless value.
	probe := Placeholder.ReplaceAllString(u, "x")
	scheme, rest, ok := strings.Cut(probe, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		ps.Add("/runner/url", "%q must be an absolute http or https URL", u)
		return
	}
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host = rest[:i]
	}
	hostTmpl := u[len(scheme)+3:]
	if i := strings.IndexAny(hostTmpl, "/?#"); i >= 0 {
		hostTmpl = hostTmpl[:i]
	}
	switch {
	case host == "" || strings.Contains(host, "@"):
		ps.Add("/runner/url", "%q must name a host and carry no credentials", u)
	case Placeholder.MatchString(hostTmpl):
		ps.Add("/runner/url", "placeholders may not choose the host of %q", u)
	}
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 127 || !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// Pointer finds the value at a JSON Pointer (RFC 6901) in doc.
func Pointer(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer (it starts with /)", ptr)
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, fmt.Errorf("%s: no %q", ptr, tok)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("%s: no item %q", ptr, tok)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("%s: %q is inside a value that is neither an object nor an array", ptr, tok)
		}
	}
	return cur, nil
}

// AcceptsNull reports whether a property schema states that null is one
// of its values (a "null" type, a null in its enum or const, or a null
// branch of its anyOf or oneOf).
func AcceptsNull(s map[string]any) bool {
	switch t := s["type"].(type) {
	case string:
		if t == "null" {
			return true
		}
	case []any:
		if slices.Contains(t, any("null")) {
			return true
		}
	}
	if e, ok := s["enum"].([]any); ok && slices.Contains(e, nil) {
		return true
	}
	if c, ok := s["const"]; ok && c == nil {
		return true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if branches, ok := s[k].([]any); ok {
			for _, b := range branches {
				if bm, ok := b.(map[string]any); ok && AcceptsNull(bm) {
					return true
				}
			}
		}
	}
	return false
}

// ArgsPlan says how a call's arguments, as a model writes them from one of
// the renderings, become the arguments the tool's schema describes. Two
// things are undone:
//   - a null for an optional property whose schema does not accept null is
//     the property left out: an LLM in OpenAI's strict mode sends null for
//     every optional field it leaves out (formats renders them nullable);
//   - a string holding a JSON object where the schema takes an object and
//     no string is that object: Gemini refuses an OBJECT without
//     properties, so formats renders a free-form object as JSON text.
//
// The plan follows properties, items and local $refs (a recursive schema
// gives a plan with a cycle), not combinators, which the strict renderings
// leave as written. Nil when nothing applies.
type ArgsPlan struct {
	drop  map[string]bool      // optional properties that do not accept null
	props map[string]*ArgsPlan // plans of properties
	items *ArgsPlan            // plan of an array's items
	text  bool                 // a string here holding a JSON object is decoded
}

// PlanArgs makes the plan of a parameters schema (decoded JSON).
func PlanArgs(v any) *ArgsPlan {
	root, _ := v.(map[string]any)
	pl := planner{root: root, refs: map[string]*ArgsPlan{}}
	// The renderings that refuse combinators at the root merge the
	// properties of its branches into it (formats' plainRoot), each
	// optional unless the root requires it: the plan takes them too.
	if root != nil {
		merged := maps.Clone(root)
		props := map[string]any{}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			branches, _ := root[k].([]any)
			for _, b := range branches {
				bm, _ := b.(map[string]any)
				if bp, ok := bm["properties"].(map[string]any); ok {
					maps.Copy(props, bp)
				}
			}
		}
		if own, ok := root["properties"].(map[string]any); ok {
			maps.Copy(props, own)
		}
		merged["properties"] = props
		v = merged
	}
	p := pl.plan(v)
	if p == nil {
		return nil
	}
	p.text = false // the arguments are an object, never text
	if p.drop == nil && p.props == nil && p.items == nil {
		return nil
	}
	return p
}

type planner struct {
	root map[string]any
	refs map[string]*ArgsPlan // plans of the $refs met, made or being made
}

func (pl *planner) plan(v any) *ArgsPlan {
	s, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
		if p, seen := pl.refs[ref]; seen {
			return p // made, or being made: a cycle
		}
		target, err := Pointer(pl.root, strings.TrimPrefix(ref, "#"))
		if err != nil {
			return nil
		}
		p := &ArgsPlan{}
		pl.refs[ref] = p
		if made := pl.plan(target); made != nil {
			*p = *made
		}
		return p
	}
	p := &ArgsPlan{text: takesObjectNotString(s)}
	p.items = pl.plan(s["items"])
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if list, ok := s["required"].([]any); ok {
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	for name, sub := range props {
		sm, ok := sub.(map[string]any)
		if !ok {
			continue
		}
		if !required[name] && !AcceptsNull(sm) {
			if p.drop == nil {
				p.drop = map[string]bool{}
			}
			p.drop[name] = true
		}
		if child := pl.plan(sm); child != nil {
			if p.props == nil {
				p.props = map[string]*ArgsPlan{}
			}
			p.props[name] = child
		}
	}
	if p.drop == nil && p.props == nil && p.items == nil && !p.text {
		return nil
	}
	return p
}

// takesObjectNotString: the schema's type says object (and perhaps null),
// never string.
func takesObjectNotString(s map[string]any) bool {
	switch t := s["type"].(type) {
	case string:
		return t == "object"
	case []any:
		object := false
		for _, x := range t {
			switch x {
			case "object":
				object = true
			case "null":
			default:
				return false
			}
		}
		return object
	}
	return false
}

// Apply undoes, in place, what the renderings ask a model to write
// differently (see ArgsPlan).
func (p *ArgsPlan) Apply(args any) {
	if p == nil {
		return
	}
	switch a := args.(type) {
	case map[string]any:
		for name, v := range a {
			if v == nil && p.drop[name] {
				delete(a, name)
				continue
			}
			if child := p.props[name]; child != nil {
				a[name] = child.value(v)
			}
		}
	case []any:
		if p.items != nil {
			for i, v := range a {
				a[i] = p.items.value(v)
			}
		}
	}
}

// value is v with the plan applied: a JSON text decoded where an object
// is expected.
func (p *ArgsPlan) value(v any) any {
	if str, ok := v.(string); ok && p.text {
		if obj, err := jsonschema.UnmarshalJSON(strings.NewReader(str)); err == nil {
			if m, ok := obj.(map[string]any); ok {
				v = m
			}
		}
	}
	p.Apply(v)
	return v
}

// jsonErrorAt says what is wrong with raw and where, by line and column
// (counted in characters from 1), for a person fixing it in a text box:
// "invalid character '}' looking for beginning of object key string at
// line 4, column 1".
func jsonErrorAt(raw []byte, err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		line, col := lineColumn(raw, int(syn.Offset)-1)
		return fmt.Sprintf("%s at line %d, column %d", syn.Error(), line, col)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		line, col := lineColumn(raw, len(raw))
		return fmt.Sprintf("it ends at line %d, column %d before the JSON does (a brace, bracket or string is not closed)", line, col)
	}
	return err.Error()
}

// lineColumn is the 1-based line and column (in characters) of byte
// offset off in raw.
func lineColumn(raw []byte, off int) (line, col int) {
	off = max(0, min(off, len(raw)))
	before := raw[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, utf8.RuneCount(before) + 1
}

// simpleTypes are JSON Schema's type names.
var simpleTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// subschemaKeywords are the keywords whose value is a schema, a list of
// schemas or a map of them: where checkTypeNames looks for more types.
var subschemaKeywords = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
	"items", "prefixItems", "additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems",
	"contains", "propertyNames", "not", "if", "then", "else", "allOf", "anyOf", "oneOf"}

// checkTypeNames reports each "type" of the schema at ptr, and of its
// subschemas, that names no JSON Schema type, with the nearest type name
// when one is close ("strng": did you mean "string"?). The metaschema
// refuses them too, but only as "must be one of …".
func checkTypeNames(schema map[string]any, ptr string, ps *models.Problems) {
	check := func(at string, v any) {
		name, ok := v.(string)
		if !ok || slices.Contains(simpleTypes, name) {
			return
		}
		best, dist := "", 3 // at most two edits away
		for _, t := range simpleTypes {
			if d := levenshtein.ComputeDistance(strings.ToLower(name), t); d < dist {
				best, dist = t, d
			}
		}
		if best != "" {
			ps.Add(at, "%q is not a JSON Schema type: did you mean %q? (types: %s)", name, best, strings.Join(simpleTypes, ", "))
		} else {
			ps.Add(at, "%q is not a JSON Schema type (types: %s)", name, strings.Join(simpleTypes, ", "))
		}
	}
	switch t := schema["type"].(type) {
	case string:
		check(ptr+"/type", t)
	case []any:
		for i, v := range t {
			check(fmt.Sprintf("%s/type/%d", ptr, i), v)
		}
	}
	sub := func(at string, v any) {
		if m, ok := v.(map[string]any); ok {
			checkTypeNames(m, at, ps)
		}
	}
	for _, kw := range subschemaKeywords {
		at := ptr + "/" + EscapePointer(kw)
		switch v := schema[kw].(type) {
		case map[string]any:
			switch kw {
			case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
				for _, name := range slices.Sorted(maps.Keys(v)) {
					sub(at+"/"+EscapePointer(name), v[name])
				}
			default:
				checkTypeNames(v, at, ps)
			}
		case []any:
			for i, s := range v {
				sub(fmt.Sprintf("%s/%d", at, i), s)
			}
		}
	}
}
