package runners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"toolbelt/models"
	"toolbelt/services/redact"
)

// PersonalSecrets are the values people store for themselves
// ({{user.secret.NAME}}), implemented by services/vault's Secrets.
type PersonalSecrets interface {
	// PersonalSecret returns the value the principal stored as name; an
	// error wrapping models.ErrNotFound when they stored none.
	PersonalSecret(ctx context.Context, principal uint, name string) (string, error)
}

// personalSecret is the value of {{user.secret.NAME}} for the person c
// acts for: never another's. Not stored: UPSTREAM_NOT_CONNECTED with the
// console page where they store it.
func (t *Table) personalSecret(ctx context.Context, c *Call, name string) (string, error) {
	connect := SecretURL(t.publicURL, name)
	if c.Principal == nil || t.personal == nil {
		return "", NotConnected("the secret "+name, connect)
	}
	v, err := t.personal.PersonalSecret(ctx, c.Principal.ID, name)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return "", NotConnected("the secret "+name, connect)
	case err != nil:
		// A value the vault does not open (or a database failure): the
		// message names the secret, never a value.
		c.Log.ErrorContext(ctx, "personal secret unreadable", "secret", name, "error", err.Error())
		return "", &Error{Code: models.CodeExecutionFailed, Message: fmt.Sprintf("the secret %s could not be read on this server", name),
			Suggestion: "Do not retry; ask the person you act for to store it again at " + connect + ", or tell an administrator."}
	}
	return v, nil
}

// personalMark replaces a person's secret in a tool's output.
const personalMark = "[REDACTED:personal-secret]"

// HideValues removes values (the personal secrets a call sent) from
// data, in every string of it, as written and as the redactor finds them
// spelled otherwise (escaped, in hex or base64): an upstream that echoes
// a header back would otherwise hand the person's token to the agent,
// the history and the cache. Values shorter than the redactor's minimum
// are replaced as written.
func HideValues(data any, values []string) (any, error) {
	if len(values) == 0 {
		return data, nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	r, err := redact.New(values)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(r.RedactJSON(raw), &out); err != nil {
		return nil, err
	}
	return replaceIn(out, values), nil
}

// replaceIn replaces each value as written in every string of v.
func replaceIn(v any, values []string) any {
	switch x := v.(type) {
	case string:
		for _, s := range values {
			x = strings.ReplaceAll(x, s, personalMark)
		}
		return x
	case []any:
		for i := range x {
			x[i] = replaceIn(x[i], values)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[replaceIn(k, values).(string)] = replaceIn(val, values)
		}
		return out
	}
	return v
}
