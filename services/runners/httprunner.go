package runners

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// httpRunner runs a registered http tool: placeholders in the URL fill
// its path and query (escaped), header values may name a configured
// secret as {{env.NAME}} or the caller's own as {{user.secret.NAME}}
// (removed from the result again), and body placeholders become the JSON of the
// argument; with no body template, POST, PUT and PATCH send the arguments
// as JSON.
func (t *Table) httpRunner(ctx context.Context, c *Call) (any, error) {
	r := c.Def.Runner
	target, err := expandURL(r.URL, c.Args)
	if err != nil {
		return nil, err
	}
	if msg := t.net.CheckURL(target); msg != "" {
		return nil, &Error{Code: models.CodeURLNotAllowed, Message: msg, Suggestion: "This tool's address is not allowed here; tell an administrator."}
	}
	var body io.Reader
	switch {
	case r.Body != "" && absentPlaceholder(r.Body, c.Args):
		// The template is just an optional argument the caller left out
		// (an OpenAPI operation's optional request body): send no body
		// rather than "null".
	case r.Body != "":
		body = strings.NewReader(expandBody(r.Body, c.Args))
	case r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch:
		raw, _ := json.Marshal(c.Args)
		body = strings.NewReader(string(raw))
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, target, body)
	if err != nil {
		return nil, &Error{Code: models.CodeExecutionFailed, Message: err.Error(), Suggestion: "Check the arguments."}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	var personal []string
	for name, tmpl := range r.Headers {
		if absentPlaceholder(tmpl, c.Args) {
			continue // an optional header argument left out: no header
		}
		v, err := t.expandHeader(ctx, c, tmpl, &personal)
		if err != nil {
			return nil, err
		}
		req.Header.Set(name, v)
	}
	req.Header.Set("User-Agent", "Toolbelt/1 (+"+c.Def.Name+")")
	out, err := t.doHTTP(ctx, c, req)
	if err != nil {
		return nil, err
	}
	return HideValues(out, personal)
}

// expandURL fills URL placeholders: escaped as a path segment before the
// query, as a query value after it. An absent argument fills nothing; in
// the query see fillQuery.
func expandURL(tmpl string, args map[string]any) (string, error) {
	path, query, hasQuery := strings.Cut(tmpl, "?")
	out, err := fillTemplate(path, args, url.PathEscape)
	if err != nil || !hasQuery {
		return out, err
	}
	q, err := fillQuery(query, args)
	if err != nil || q == "" {
		return out, err
	}
	return out + "?" + q, nil
}

// fillQuery fills a query template pair by pair. A pair whose value is a
// single placeholder (name={{arg}}) follows its argument: it is left out
// when the argument is absent, so an optional query parameter is not sent
// as an empty value that an API would read as "filter by nothing", and it
// is repeated for each element of an array (name=a&name=b, OpenAPI's
// default form style). Other pairs are filled like the path.
func fillQuery(tmpl string, args map[string]any) (string, error) {
	var parts []string
	for _, pair := range strings.Split(tmpl, "&") {
		key, val, hasVal := strings.Cut(pair, "=")
		if m := tooldef.Placeholder.FindStringSubmatch(val); hasVal && m != nil && m[0] == val && !tooldef.Placeholder.MatchString(key) {
			switch v := args[m[1]].(type) {
			case nil:
				continue
			case []any:
				for _, e := range v {
					s, err := tooldef.ScalarString(e)
					if err != nil {
						return "", &Error{Code: models.CodeValidation, Message: fmt.Sprintf("argument %q: each element %v", m[1], err), Suggestion: "Pass an array of strings, numbers or booleans."}
					}
					parts = append(parts, key+"="+url.QueryEscape(s))
				}
				continue
			}
		}
		filled, err := fillTemplate(pair, args, url.QueryEscape)
		if err != nil {
			return "", err
		}
		parts = append(parts, filled)
	}
	return strings.Join(parts, "&"), nil
}

// absentPlaceholder reports whether tmpl is exactly one argument
// placeholder whose argument was not given.
func absentPlaceholder(tmpl string, args map[string]any) bool {
	m := tooldef.Placeholder.FindStringSubmatch(strings.TrimSpace(tmpl))
	if m == nil || m[0] != strings.TrimSpace(tmpl) || strings.HasPrefix(m[1], "env.") || strings.HasPrefix(m[1], "user.") {
		return false
	}
	return args[m[1]] == nil
}

// fillTemplate replaces each {{name}} with the escaped text of a scalar
// argument.
func fillTemplate(tmpl string, args map[string]any, escape func(string) string) (string, error) {
	var bad error
	out := tooldef.Placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := tooldef.Placeholder.FindStringSubmatch(m)[1]
		if args[name] == nil {
			return ""
		}
		s, err := tooldef.ScalarString(args[name])
		if err != nil {
			bad = &Error{Code: models.CodeValidation, Message: fmt.Sprintf("argument %q: %v", name, err), Suggestion: "Pass a string, number or boolean."}
		}
		return escape(s)
	})
	return out, bad
}

// expandBody fills body placeholders with the JSON of each argument.
func expandBody(tmpl string, args map[string]any) string {
	return tooldef.Placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		raw, _ := json.Marshal(args[tooldef.Placeholder.FindStringSubmatch(m)[1]])
		return string(raw)
	})
}

// expandHeader fills a header value: {{env.NAME}} with a configured
// secret, {{user.secret.NAME}} with the caller's own (added to personal),
// {{name}} with an argument (no line breaks).
func (t *Table) expandHeader(ctx context.Context, c *Call, tmpl string, personal *[]string) (string, error) {
	var bad error
	out := tooldef.Placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := tooldef.Placeholder.FindStringSubmatch(m)[1]
		if secret, ok := tooldef.UserSecret(name); ok {
			v, err := t.personalSecret(ctx, c, secret)
			if err != nil {
				bad = err
			}
			if v != "" {
				*personal = append(*personal, v)
			}
			return v
		}
		if env, ok := strings.CutPrefix(name, "env."); ok {
			v := t.secrets[env]
			if v == "" {
				bad = &Error{Code: models.CodeExecutionFailed,
					Message:    fmt.Sprintf("the tool's header needs the secret %s, which is not configured on this server", env),
					Suggestion: "Do not retry; tell an administrator to set it and list it in TOOLBELT_SECRETS."}
			}
			return v
		}
		s, err := tooldef.ScalarString(c.Args[name])
		if err != nil || strings.ContainsAny(s, "\r\n") {
			bad = &Error{Code: models.CodeValidation, Message: fmt.Sprintf("argument %q cannot fill a header", name), Suggestion: "Pass a single-line string."}
		}
		return s
	})
	return out, bad
}
