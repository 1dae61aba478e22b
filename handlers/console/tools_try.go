package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/invoke"
	"toolbelt/views"
)

// TryToolForm runs a real call from the try-it form: the form's values are
// converted to arguments by the types of the tool's parameters schema, and
// the call goes through the whole guard chain as the signed-in principal.
// A value that does not convert is reported beside its field and no call
// is made.
func (h *Handler) TryToolForm(c *gin.Context) error {
	d, err := h.toolDetail(c)
	if err != nil {
		return err
	}
	if d.Retired {
		return models.ErrInvalid.Errorf("%s is retired; roll back or publish a version before trying it", d.Name)
	}
	if err := c.Request.ParseForm(); err != nil {
		return models.ErrInvalid.Errorf("read the form: %v", err)
	}
	fields := tryFields(json.RawMessage(d.Parameters), c.Request.PostForm)
	d.Try = views.TryForm{Fields: fields, SessionID: strings.TrimSpace(c.PostForm("session_id"))}
	page := h.Page(c, d.Name)
	args, ok := tryArguments(d.Try.Fields)
	if !ok {
		d.Try.Error = "No call was made: fix the fields marked below."
		return h.Render(c, handlers.StatusFor(models.CodeValidation), views.ToolPage(page, *d))
	}
	res, err := h.Invoker.CallAcknowledged(c.Request.Context(), handlers.CurrentPrincipal(c), invoke.CallRequest{
		Tool: d.Name, Version: d.Version, Arguments: args, SessionID: d.Try.SessionID,
	})
	if err != nil {
		return err
	}
	d.Try.Result = tryResult(res, handlers.CurrentPrincipal(c).Role != access.RoleAgent)
	if e := res.Error; e != nil && e.Code == models.CodeValidation {
		markTryProblems(&d.Try, e)
	}
	return h.Render(c, handlers.StatusOf(res), views.ToolPage(page, *d))
}

// trySession is the session the try-it form proposes: one per
// principal, so its calls share a work directory.
func trySession(c *gin.Context) string {
	return fmt.Sprintf("console-%d", handlers.CurrentPrincipal(c).ID)
}

// tryParamSchema is what the try-it form reads of one parameter's schema.
type tryParamSchema struct {
	Type             json.RawMessage   `json:"type"`
	Enum             []json.RawMessage `json:"enum"`
	Description      string            `json:"description"`
	Default          json.RawMessage   `json:"default"`
	Minimum          *json.Number      `json:"minimum"`
	Maximum          *json.Number      `json:"maximum"`
	ExclusiveMinimum *json.Number      `json:"exclusiveMinimum"`
	ExclusiveMaximum *json.Number      `json:"exclusiveMaximum"`
	MaxLength        *int              `json:"maxLength"`
	ContentMediaType string            `json:"contentMediaType"`
}

// longTextNames are parameter names that hold text of many lines (a
// file's content, a program): their field is multi-line, where Enter is
// a new line, not a submission.
var longTextNames = []string{"content", "code", "body", "text", "stdin", "script", "source", "markdown", "html", "prompt"}

// multiline reports whether a string parameter takes text of many lines:
// by its name, its media type, or a length no single line would need.
func (p tryParamSchema) multiline(name string) bool {
	return slices.Contains(longTextNames, strings.ToLower(name)) || p.ContentMediaType != "" || p.MaxLength != nil && *p.MaxLength > 4096
}

// tryFields generates the try-it form from a parameters schema: one field
// per root property, in the schema's order, holding the value sent in form
// (nil for an empty form).
func tryFields(schema json.RawMessage, form url.Values) []views.TryField {
	var root struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &root) != nil {
		return nil
	}
	var props map[string]tryParamSchema
	if json.Unmarshal(root.Properties, &props) != nil {
		return nil
	}
	var fields []views.TryField
	for _, name := range jsonObjectKeys(root.Properties) {
		p, ok := props[name]
		if !ok {
			continue
		}
		f := views.TryField{Name: name, Required: slices.Contains(root.Required, name), Hint: p.Description}
		f.Type = paramType(p.Type)
		switch {
		case len(p.Enum) > 0 && enumScalars(p.Enum):
			f.Control = views.ControlSelect
			for _, e := range p.Enum {
				f.Options = append(f.Options, tryEnumLabel(e))
				f.OptionJSON = append(f.OptionJSON, string(bytes.TrimSpace(e)))
			}
		case f.Type == "string":
			f.Control, f.Multiline = views.ControlText, p.multiline(name)
		case f.Type == "integer" || f.Type == "number":
			f.Control = views.ControlNumber
			f.Step = "any"
			if f.Type == "integer" {
				f.Step = "1"
			}
			f.Min, f.Max = schemaBound(p.Minimum, p.ExclusiveMinimum), schemaBound(p.Maximum, p.ExclusiveMaximum)
		case f.Type == "boolean":
			f.Control = views.ControlCheckbox
		default:
			f.Control = views.ControlJSON
		}
		if len(p.Default) > 0 {
			f.Hint = strings.TrimSpace(f.Hint + " Default: " + string(p.Default) + ".")
		}
		if form != nil {
			f.Value = form.Get("arg." + name)
			f.Checked = f.Value != ""
		}
		fields = append(fields, f)
	}
	return fields
}

// tryArguments converts the form's values to a JSON arguments object by
// each field's schema type. An empty optional field is left out (the
// tool's default applies); an empty required text field is sent as "".
func tryArguments(fields []views.TryField) (json.RawMessage, bool) {
	args := map[string]json.RawMessage{}
	ok := true
	for i := range fields {
		f := &fields[i]
		raw, err := tryValue(f)
		if err != "" {
			f.Error, ok = err, false
			continue
		}
		if raw != nil {
			args[f.Name] = raw
		}
	}
	out, _ := json.Marshal(args)
	return out, ok
}

// tryValue converts one field; nil means "not sent".
func tryValue(f *views.TryField) (json.RawMessage, string) {
	v := f.Value
	switch f.Control {
	case views.ControlCheckbox:
		if f.Checked {
			return json.RawMessage("true"), ""
		}
		if f.Required {
			return json.RawMessage("false"), ""
		}
		return nil, ""
	case views.ControlSelect:
		if v == "" {
			if f.Required {
				return nil, "Choose one of the values."
			}
			return nil, ""
		}
		return tryEnumValue(f, v)
	}
	if f.Control != views.ControlText {
		v = strings.TrimSpace(v)
	}
	if v == "" {
		if f.Required && f.Control == views.ControlText {
			return json.RawMessage(`""`), ""
		}
		if f.Required {
			return nil, "This field is required."
		}
		return nil, ""
	}
	switch f.Control {
	case views.ControlText:
		if f.Multiline { // a form sends a text area's new lines as CRLF
			v = strings.ReplaceAll(v, "\r\n", "\n")
		}
		raw, _ := json.Marshal(v)
		return raw, ""
	case views.ControlNumber:
		if f.Type == "integer" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Sprintf("%q is not a whole number; enter digits such as 42.", v)
			}
			return json.RawMessage(strconv.FormatInt(n, 10)), ""
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Sprintf("%q is not a number; enter one such as 2.5.", v)
		}
		return json.RawMessage(strconv.FormatFloat(x, 'g', -1, 64)), ""
	}
	// JSON: arrays, objects and parameters of no single type.
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var val any
	if err := dec.Decode(&val); err != nil {
		return nil, "Not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ") + "."
	}
	if dec.More() {
		return nil, "Enter one JSON value."
	}
	switch f.Type {
	case "array":
		if _, isArr := val.([]any); !isArr {
			return nil, `Must be a JSON array, such as ["a", "b"].`
		}
	case "object":
		if _, isObj := val.(map[string]any); !isObj {
			return nil, `Must be a JSON object, such as {"key": "value"}.`
		}
	}
	raw, _ := json.Marshal(val)
	return raw, ""
}

// tryEnumValue maps a chosen option back to the schema's enum value.
func tryEnumValue(f *views.TryField, v string) (json.RawMessage, string) {
	if i := slices.Index(f.Options, v); i >= 0 {
		return json.RawMessage(f.OptionJSON[i]), ""
	}
	return nil, fmt.Sprintf("%q is not one of the choices.", v)
}

// tryMissingProps reads the names out of a schema validator's "missing
// property" message.
var tryMissingProps = regexp.MustCompile(`missing propert(?:y|ies) (.+)`)

// markTryProblems puts the problems of a refused call beside the fields
// they concern.
func markTryProblems(t *views.TryForm, e *invoke.ToolError) {
	byName := map[string]*views.TryField{}
	for i := range t.Fields {
		byName[t.Fields[i].Name] = &t.Fields[i]
	}
	note := func(name, msg string) {
		if f, ok := byName[name]; ok && f.Error == "" {
			f.Error = msg
		}
	}
	if len(e.Problems) == 0 && strings.HasPrefix(e.Message, "session_id") {
		t.SessionError = e.Message
	}
	for _, p := range e.Problems {
		if field := pointerField(p.Pointer); field != "" {
			note(field, p.Message)
			continue
		}
		if m := tryMissingProps.FindStringSubmatch(p.Message); m != nil {
			for _, n := range strings.Split(m[1], ",") {
				note(strings.Trim(strings.TrimSpace(n), `'"`), "This field is required.")
			}
		}
	}
}

// tryResult is a ToolResult as the page shows it.
// reviewer says the viewer may open the approval queue.
func tryResult(res invoke.ToolResult, reviewer bool) *views.TryResult {
	r := &views.TryResult{CallID: res.CallID, Reviewer: reviewer, Status: res.Status, Success: res.Success,
		Duration: res.Metadata.Duration, Attempts: res.Metadata.Attempts, Cached: res.Metadata.Cached, Version: res.Metadata.ToolVersion}
	if len(res.Data) > 0 && !bytes.Equal(res.Data, []byte("null")) {
		r.Data = views.PrettyJSON(string(res.Data))
		var ran struct {
			ExitCode *int `json:"exit_code"`
		}
		if json.Unmarshal(res.Data, &ran) == nil && ran.ExitCode != nil {
			r.ExitCode, r.HasExit = *ran.ExitCode, true
		}
	}
	if e := res.Error; e != nil {
		r.Code, r.Message, r.Suggestion = e.Code, e.Message, e.Suggestion
		for _, p := range e.Problems {
			r.Problems = append(r.Problems, views.TryProblem{Pointer: p.Pointer, Message: p.Message})
		}
	}
	return r
}

// jsonObjectKeys returns the keys of a JSON object in document order (maps
// lose it, and the form should follow the schema's order).
func jsonObjectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
		keys = append(keys, k)
	}
	return keys
}

// paramType is a parameter's JSON type: its "type", or the first non-null
// one of a list; "" when it has none.
func paramType(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		for _, t := range list {
			if t != "null" {
				return t
			}
		}
	}
	return ""
}

func enumScalars(vs []json.RawMessage) bool {
	for _, v := range vs {
		if t := bytes.TrimSpace(v); len(t) == 0 || t[0] == '{' || t[0] == '[' || string(t) == "null" {
			return false
		}
	}
	return true
}

// tryEnumLabel is how an enum value reads in a select: strings without
// quotes, other scalars as JSON.
func tryEnumLabel(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

func schemaBound(inclusive, exclusive *json.Number) string {
	if inclusive != nil {
		return inclusive.String()
	}
	if exclusive != nil {
		return exclusive.String()
	}
	return ""
}
