package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/models/modelstest"
)

func toolFilesFixture(t *testing.T) (*Registry, string, *ToolFiles) {
	t.Helper()
	store, _ := modelstest.Store(t)
	reg := NewRegistry(store, quiet)
	dir := t.TempDir()
	return reg, dir, NewToolFiles(dir, reg, nil, quiet)
}

const noteTool = `name: note_words
description: Count the words of a note in the work directory, as the wc command does.
category: shell
parameters:
  type: object
  properties:
    path: {type: string, description: The note}
  required: [path]
security: {level: safe, sandbox: true}
runner: {kind: command, argv: [wc, -w, "{{path}}"]}
`

// Files added, changed, broken, fixed and removed while watched: each
// change reaches the registry within a second; a broken file is reported
// and the previous version stays in service.
func TestToolFilesWatched(t *testing.T) {
	reg, dir, tf := toolFilesFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := tf.Load(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _ = tf.Watch(ctx) }() // what is written before it watches, it applies as it starts
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Changes apply within a second (debounce 150 ms); the deadline here
	// is generous for loaded CI machines, and the time taken is logged.
	within := func(what string, ok func() bool) {
		t.Helper()
		start := time.Now()
		poll.Until(t, 10*time.Second, what+" applied", func() (bool, string) {
			return ok(), fmt.Sprintf("problems %v", tf.Problems())
		})
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	}
	version := func() string {
		tool, err := reg.Get(ctx, "note_words")
		if err != nil || tool.Retired {
			return ""
		}
		return tool.Version
	}

	write("note.yaml", noteTool)
	within("a new file registers its tool", func() bool { return version() == "1.0.0" })
	write("note.yaml", strings.Replace(noteTool, "Count the words", "Count all the words", 1))
	within("a change publishes the next version", func() bool { return version() == "1.0.1" })
	tool, _ := reg.Get(ctx, "note_words")
	if !strings.HasPrefix(tool.Description, "Count all the words") {
		t.Fatalf("description %q", tool.Description)
	}

	write("note.yaml", "name: note_words\nparameters: [not, a, schema\n")
	within("a broken file is reported", func() bool { return len(tf.Problems()) == 1 })
	if p := tf.Problems()[0]; p.File != "note.yaml" || !strings.Contains(p.Error, "YAML") {
		t.Errorf("problem %+v", p)
	}
	if version() != "1.0.1" {
		t.Fatalf("the previous version left service: %q", version())
	}
	write("note.yaml", strings.Replace(noteTool, "security: {level: safe", "security: {level: unknown", 1))
	within("an invalid definition is reported", func() bool {
		ps := tf.Problems()
		return len(ps) == 1 && strings.Contains(ps[0].Error, "level")
	})
	write("note.yaml", strings.Replace(noteTool, "Count the words", "Count every word", 1))
	within("a fixed file applies", func() bool { return version() == "1.0.2" && len(tf.Problems()) == 0 })

	// JSON works too, with a stated version; a second file cannot claim the
	// same tool.
	write("clock.json", `{"name":"clock_time","version":"2.0.0","description":"Tell the time of the server in UTC, as the date command prints it.","category":"shell","security":{"level":"safe","sandbox":true},"parameters":{"type":"object","properties":{}},"runner":{"kind":"command","argv":["date","-u"]}}`)
	within("a JSON file registers", func() bool { tool, err := reg.Get(ctx, "clock_time"); return err == nil && tool.Version == "2.0.0" })
	write("again.yml", noteTool)
	within("a duplicate is reported", func() bool {
		ps := tf.Problems()
		return len(ps) == 1 && ps[0].File == "again.yml" && strings.Contains(ps[0].Error, "already defined by note.yaml")
	})
	if err := os.Remove(filepath.Join(dir, "again.yml")); err != nil {
		t.Fatal(err)
	}
	within("removing the duplicate clears its problem", func() bool { return len(tf.Problems()) == 0 })
	if version() != "1.0.2" {
		t.Fatal("removing a duplicate retired the tool its twin defines")
	}

	if err := os.Remove(filepath.Join(dir, "note.yaml")); err != nil {
		t.Fatal(err)
	}
	within("a removed file retires its tool", func() bool { return version() == "" })
	if tools, servers := tf.Count(); tools != 1 || servers != 0 {
		t.Errorf("files defining a tool: %d, a server: %d; want 1 and 0", tools, servers)
	}
}

// A restart applies the same files again without new versions.
func TestToolFilesRestart(t *testing.T) {
	reg, dir, tf := toolFilesFixture(t)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(dir, "note.yaml"), []byte(noteTool), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := tf.Load(ctx); err != nil {
			t.Fatal(err)
		}
		tf = NewToolFiles(dir, reg, nil, tf.log) // the next start
	}
	versions, err := reg.Versions(ctx, "note_words")
	if err != nil || len(versions) != 1 {
		t.Fatalf("versions after a restart: %v %v", versions, err)
	}

	// While the server is stopped, one file is renamed and another, which
	// defined a second tool, is removed; a third, still there, is broken.
	second := strings.Replace(noteTool, "name: note_words", "name: note_lines", 1)
	third := strings.Replace(noteTool, "name: note_words", "name: note_chars", 1)
	for name, body := range map[string]string{"lines.yaml": second, "chars.yaml": third} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := tf.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "note.yaml"), filepath.Join(dir, "renamed.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "lines.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chars.yaml"), []byte("name: [broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	tf = NewToolFiles(dir, reg, nil, tf.log)
	if err := tf.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for name, retired := range map[string]bool{"note_words": false, "note_lines": true, "note_chars": false} {
		// Get finds only tools in service.
		if _, err := reg.Get(ctx, name); errors.Is(err, models.ErrNotFound) != retired {
			t.Errorf("%s after the restart: %v, want retired %v", name, err, retired)
		}
	}
	// Another start changes nothing more.
	tf = NewToolFiles(dir, reg, nil, tf.log)
	if err := tf.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get(ctx, "note_words"); err != nil {
		t.Fatalf("note_words retired on a later start: %v", err)
	}
}

// The examples shipped in tools.d are valid.
func TestShippedToolFiles(t *testing.T) {
	reg, _, _ := toolFilesFixture(t)
	tf := NewToolFiles(filepath.Join("..", "..", "tools.d"), reg, nil, quiet)
	if err := tf.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tools, _ := tf.Count(); len(tf.Problems()) > 0 || tools < 2 {
		t.Fatalf("shipped tool files: %d applied, problems %v", tools, tf.Problems())
	}
}

// A changed file without a version gets the patch version after the
// tool's highest, also after a rollback made a lower one current.
func TestToolFilesVersionAfterRollback(t *testing.T) {
	reg, dir, tf := toolFilesFixture(t)
	ctx := context.Background()
	apply := func(body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "note.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		tf = NewToolFiles(dir, reg, nil, tf.log) // applied at a start
		if err := tf.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if ps := tf.Problems(); len(ps) > 0 {
			t.Fatalf("not applied: %v", ps)
		}
	}
	apply(noteTool)
	apply(strings.Replace(noteTool, "Count the words", "Count all the words", 1))
	if _, err := reg.Rollback(ctx, "note_words", "1.0.0", nil); err != nil {
		t.Fatal(err)
	}
	apply(strings.Replace(noteTool, "Count the words", "Count every word", 1))
	if tool, err := reg.Get(ctx, "note_words"); err != nil || tool.Version != "1.0.2" {
		t.Fatalf("after a rollback and a change: %+v %v, want version 1.0.2", tool, err)
	}
}

// A file written after the start's Load and before the watch began is
// applied when the watch begins.
func TestToolFilesWrittenBeforeWatch(t *testing.T) {
	reg, dir, tf := toolFilesFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := tf.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "note.yaml"), []byte(noteTool), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() { _ = tf.Watch(ctx) }()
	poll.Until(t, 10*time.Second, "a file written before the watch began applied", func() (bool, string) {
		_, err := reg.Get(ctx, "note_words")
		return err == nil, fmt.Sprintf("%v (problems %v)", err, tf.Problems())
	})
}

// quiet discards the logs of the services under test.
var quiet = slog.New(slog.DiscardHandler)

// A YAML tool file reads as its JSON twin: mapping keys that are not
// strings become their text and a date stays the text it was; invalid YAML
// and unknown fields are refused.
func TestParseToolFileYAML(t *testing.T) {
	def, _, err := parseToolFile("t.yaml", []byte(`name: dated
version: 1.0.0
examples: [2024-01-01, 2024-01-01T10:00:00Z]
parameters:
  type: object
  properties: {200: {type: string}, true: {type: boolean}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(def.Parameters), `{"properties":{"200":{"type":"string"},"true":{"type":"boolean"}},"type":"object"}`; got != want {
		t.Errorf("parameters %s, want %s", got, want)
	}
	if got := strings.Join(def.Examples, " "); got != "2024-01-01 2024-01-01T10:00:00Z" {
		t.Errorf("examples %q", got)
	}
	for body, want := range map[string]string{
		"name: [broken":         "not valid YAML: ",
		"name: x\nfield: 1\n":   `not a tool definition: json: unknown field "field"`,
		"description: nameless": "no name",
	} {
		if _, _, err := parseToolFile("t.yml", []byte(body)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want %q…", body, err, want)
		}
	}
}
