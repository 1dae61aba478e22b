package catalog

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

//go:embed builtin/*.json
var builtinFS embed.FS

// BuiltinDefinitions returns the definitions of the built-in tools shipped
// with Toolbelt, in file name order.
func BuiltinDefinitions() ([]tooldef.Definition, error) {
	files, err := fs.Glob(builtinFS, "builtin/*.json")
	if err != nil {
		return nil, err
	}
	defs := make([]tooldef.Definition, 0, len(files))
	for _, f := range files {
		raw, err := builtinFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var def tooldef.Definition
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&def); err != nil {
			return nil, fmt.Errorf("decode %s: %w", f, err)
		}
		defs = append(defs, def)
	}
	return defs, nil
}

// SeedBuiltins registers every built-in tool that is not registered yet. A
// tool an admin has edited, rolled back or retired is left as it is. It
// returns the names it registered.
func (r *Registry) SeedBuiltins(ctx context.Context) ([]string, error) {
	defs, err := BuiltinDefinitions()
	if err != nil {
		return nil, fmt.Errorf("load built-in tools: %w", err)
	}
	var seeded []string
	for _, def := range defs {
		if _, _, err := r.store.ToolByName(ctx, def.Name, true); err == nil {
			continue
		}
		_, err := r.Register(ctx, def, nil)
		if errors.Is(err, models.ErrConflict) {
			continue
		}
		if err != nil {
			return seeded, fmt.Errorf("seed built-in tool %s: %w", def.Name, err)
		}
		seeded = append(seeded, def.Name)
	}
	return seeded, nil
}
