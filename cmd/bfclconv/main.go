// Command bfclconv writes testdata/bench/bfcl, the retrieval benchmark's
// set of tools with parameters, from the Berkeley Function Calling
// Leaderboard (BFCL): the functions the chosen categories' questions offer
// become one catalog of one tool a name, and every question a query
// labelled with the function its ground truth calls. It reads one pinned
// commit of the gorilla repository through git, so a run writes the same
// bytes until the pin moves; testdata/bench/bfcl/SOURCE.md says how to run
// it.
//
//	go run ./cmd/bfclconv --repo PATH/TO/gorilla [--commit SHA] [--out testdata/bench/bfcl]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"toolbelt/services/tooldef"
)

// pinnedCommit is the gorilla commit the committed files were made from.
const pinnedCommit = "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8"

// dataDir is where BFCL keeps its questions; possible_answer/ beside them
// holds the ground truth under the same file names.
const dataDir = "berkeley-function-call-leaderboard/bfcl_eval/data"

// categories are the BFCL categories whose every question has one known
// function to call, in the order their records are written. Irrelevance
// (no function fits), parallel (several calls) and multi-turn categories
// are left out: they do not label a question with the tool that answers it.
var categories = []string{"simple_python", "multiple", "live_simple", "live_multiple"}

func main() {
	repo := flag.String("repo", "", "the gorilla git repository (bare or not)")
	commit := flag.String("commit", pinnedCommit, "the commit to read")
	out := flag.String("out", filepath.Join("testdata", "bench", "bfcl"), "the directory to write")
	flag.Parse()
	if *repo == "" {
		fmt.Fprintln(os.Stderr, "bfclconv: --repo is required")
		os.Exit(2)
	}
	if err := run(gitReader(*repo, *commit), *out); err != nil {
		fmt.Fprintln(os.Stderr, "bfclconv:", err)
		os.Exit(1)
	}
}

// gitReader reads files of one commit of repo.
func gitReader(repo, commit string) func(path string) ([]byte, error) {
	return func(path string) ([]byte, error) {
		var stderr bytes.Buffer
		cmd := exec.Command("git", "-C", repo, "show", commit+":"+path)
		cmd.Stderr = &stderr
		data, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git show %s:%s: %v: %s", commit, path, err, strings.TrimSpace(stderr.String()))
		}
		return data, nil
	}
}

// A question is one BFCL record: the conversation and the functions offered.
type question struct {
	ID       string `json:"id"`
	Question [][]struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"question"`
	Function []function `json:"function"`
}

type function struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// An answer is a question's ground truth: the calls, each a map from the
// function's name to its accepted arguments.
type answer struct {
	ID          string                       `json:"id"`
	GroundTruth []map[string]json.RawMessage `json:"ground_truth"`
}

// tool and query are the records `bench retrieval` reads.
type tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	SourceName  string         `json:"source_name"`
}

type query struct {
	Query    string    `json:"query,omitempty"`
	Messages []message `json:"messages,omitempty"`
	Gold     []string  `json:"gold"`
	ID       string    `json:"id"`
	Subset   string    `json:"subset"`

	offered []*definition // the definitions of its gold the question offered
}

// message is one message of a conversation, in the chat format.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// run converts the categories read through read and writes tools.jsonl,
// queries.jsonl and the repository's LICENSE into out, and says on stdout
// what the catalog merged.
func run(read func(path string) ([]byte, error), out string) error {
	cat := newCatalog()
	var queries []query
	for _, c := range categories {
		file := "BFCL_v4_" + c + ".json"
		qs, err := readLines[question](read, dataDir+"/"+file)
		if err != nil {
			return err
		}
		as, err := readLines[answer](read, dataDir+"/possible_answer/"+file)
		if err != nil {
			return err
		}
		gold := map[string][]map[string]json.RawMessage{}
		for _, a := range as {
			gold[a.ID] = a.GroundTruth
		}
		for _, q := range qs {
			rec, err := convertQuestion(cat, q, gold[q.ID])
			if err != nil {
				return fmt.Errorf("%s: %s: %w", file, q.ID, err)
			}
			rec.Subset = c
			queries = append(queries, rec)
		}
	}
	license, err := read("LICENSE")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tools, st := cat.tools()
	if err := writeLines(filepath.Join(out, "tools.jsonl"), tools); err != nil {
		return err
	}
	if err := writeLines(filepath.Join(out, "queries.jsonl"), queries); err != nil {
		return err
	}
	regolded := 0
	for _, q := range queries {
		if slices.ContainsFunc(q.offered, func(d *definition) bool { return !d.kept }) {
			regolded++
		}
	}
	fmt.Printf("%d tools from %d definitions: %d names had several, %d definitions dropped; "+
		"%d of %d queries offered their gold a dropped definition\n",
		len(tools), st.definitions, st.merged, st.dropped, regolded, len(queries))
	return os.WriteFile(filepath.Join(out, "LICENSE"), license, 0o644)
}

// convertQuestion adds the question's functions to the catalog and labels
// its text with the catalog names of the functions its ground truth calls.
func convertQuestion(cat *catalog, q question, calls []map[string]json.RawMessage) (query, error) {
	names := map[string]*definition{} // BFCL name → the definition this question offers
	for _, f := range q.Function {
		d, err := cat.offer(q.ID, f)
		if err != nil {
			return query{}, fmt.Errorf("function %s: %w", f.Name, err)
		}
		names[f.Name] = d
	}
	rec := query{ID: q.ID}
	for _, call := range calls {
		for src := range call {
			d, ok := names[src]
			if !ok {
				return query{}, fmt.Errorf("the ground truth calls %s, which the question does not offer", src)
			}
			if !slices.Contains(rec.Gold, d.name) {
				rec.Gold = append(rec.Gold, d.name)
				rec.offered = append(rec.offered, d)
			}
		}
	}
	if len(rec.Gold) == 0 {
		return query{}, errors.New("no ground truth")
	}
	slices.Sort(rec.Gold)
	// The conversation as an agent sends it: the user's request as the
	// query, or, when there is more (a system message), the messages, so
	// the request is ranked as the task and the rest as its context.
	var msgs []message
	for _, turn := range q.Question {
		for _, m := range turn {
			if s := strings.TrimSpace(m.Content); s != "" {
				msgs = append(msgs, message{m.Role, s})
			}
		}
	}
	if len(msgs) == 1 && msgs[0].Role == "user" {
		rec.Query = msgs[0].Content
	} else {
		rec.Messages = msgs
	}
	return rec, nil
}

// A catalog is the one set of tools every question's functions join, one
// tool a name, as a real catalog has. BFCL defines one name differently in
// different questions (32 get_current_weather, mostly rewordings, in the
// live categories), and a query rarely tells such copies apart, so distinct
// tools for them would measure a catalog no one has: a name keeps the
// definition the most questions offer, the first to appear among equals,
// and every gold of that name names it.
type catalog struct {
	byName map[string][]*definition // distinct definitions of each registry name, in order of appearance
	order  []string                 // registry names in order of first appearance
	taken  map[string]bool          // catalog names given out, and the reserved ones
}

// A definition is one distinct converted function and the questions that
// offer it.
type definition struct {
	name   string // the catalog name of its registry name
	key    string // description and parameters, as written
	tool   tool
	offers int    // questions offering it
	last   string // the last of them, so a question counts once
	kept   bool   // whether it is its name's tool
}

func newCatalog() *catalog {
	c := &catalog{byName: map[string][]*definition{}, taken: map[string]bool{}}
	for name := range tooldef.ReservedToolNames {
		c.taken[name] = true
	}
	return c
}

// offer converts f, offered by question id, and returns its definition.
func (c *catalog) offer(id string, f function) (*definition, error) {
	params, err := convertParameters(f.Parameters)
	if err != nil {
		return nil, err
	}
	base := registryName(f.Name)
	desc := strings.TrimSpace(f.Description)
	raw, err := json.Marshal(params) // maps marshal with sorted keys
	if err != nil {
		return nil, err
	}
	key := desc + "\x00" + string(raw)
	defs := c.byName[base]
	i := slices.IndexFunc(defs, func(d *definition) bool { return d.key == key })
	if i < 0 {
		name := base
		if len(defs) > 0 {
			name = defs[0].name
		} else {
			// A reserved name, or one a suffixed reserved name took,
			// takes a suffix of its own.
			for n := 2; c.taken[name]; n++ {
				suffix := "_" + strconv.Itoa(n)
				name = strings.TrimRight(base[:min(len(base), maxName-len(suffix))], "_") + suffix
			}
			c.taken[name] = true
			c.order = append(c.order, base)
		}
		defs = append(defs, &definition{name: name, key: key,
			tool: tool{Name: name, Description: desc, Parameters: params, SourceName: f.Name}})
		c.byName[base] = defs
		i = len(defs) - 1
	}
	d := defs[i]
	if d.last != id {
		d.offers++
		d.last = id
	}
	return d, nil
}

// catalogStats counts what tools merged.
type catalogStats struct {
	definitions int // distinct definitions offered
	merged      int // names with more than one
	dropped     int // definitions not kept
}

// tools returns the catalog, a tool a name in order of first appearance,
// each its name's most offered definition, and marks the ones kept.
func (c *catalog) tools() ([]tool, catalogStats) {
	var out []tool
	var st catalogStats
	for _, base := range c.order {
		defs := c.byName[base]
		keep := defs[0]
		for _, d := range defs[1:] {
			if d.offers > keep.offers {
				keep = d
			}
		}
		keep.kept = true
		out = append(out, keep.tool)
		st.definitions += len(defs)
		if len(defs) > 1 {
			st.merged++
			st.dropped += len(defs) - 1
		}
	}
	return out, st
}

// maxName is the longest name tooldef.NamePattern accepts.
const maxName = 64

// registryName maps a BFCL function name ("ChaDri.change_drink",
// "fetch_DNA_sequence") to the registry's snake_case
// ("cha_dri_change_drink", "fetch_dna_sequence"): camelCase words split,
// every other character an underscore, at most 64 characters, starting with
// a letter.
func registryName(src string) string {
	rs := []rune(src)
	var b strings.Builder
	lowerOrDigit := func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }
	upper := func(r rune) bool { return r >= 'A' && r <= 'Z' }
	for i, r := range rs {
		switch {
		case upper(r):
			// A word starts at an upper-case letter after a lower-case one
			// or a digit ("changeDrink"), and at the last capital of an
			// acronym followed by lower case ("DNASequence").
			if i > 0 && (lowerOrDigit(rs[i-1]) || upper(rs[i-1]) && i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z') {
				b.WriteByte('_')
			}
			b.WriteRune(r + ('a' - 'A'))
		case lowerOrDigit(r):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	words := strings.FieldsFunc(b.String(), func(r rune) bool { return r == '_' })
	name := strings.Join(words, "_")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "f_" + name
	}
	return strings.TrimRight(name[:min(len(name), maxName)], "_")
}

// jsonTypes maps BFCL's parameter types, Python's names among them, to JSON
// Schema's; "any" maps to no type constraint.
var jsonTypes = map[string]string{
	"dict": "object", "float": "number", "tuple": "array", "any": "",
	"object": "object", "number": "number", "array": "array",
	"string": "string", "integer": "integer", "boolean": "boolean", "null": "null",
}

// convertParameters turns a BFCL parameters schema into JSON Schema
// 2020-12 the registry accepts: type names converted in every subschema,
// and the root an object.
func convertParameters(p map[string]any) (map[string]any, error) {
	if p == nil {
		p = map[string]any{"type": "dict", "properties": map[string]any{}}
	}
	if err := convertSchema(p, ""); err != nil {
		return nil, err
	}
	if p["type"] != "object" {
		return nil, fmt.Errorf("parameters are of type %v, not an object", p["type"])
	}
	return p, nil
}

// convertSchema converts s in place, at ptr, and the subschemas under it.
// It walks only the keywords that hold schemas, never values such as enum
// or default, which may hold a "type" key of their own.
func convertSchema(s map[string]any, ptr string) error {
	conv := func(v any) (string, bool, error) {
		name, ok := v.(string)
		if !ok {
			return "", false, fmt.Errorf("%s/type: %v is not a type name", ptr, v)
		}
		t, ok := jsonTypes[name]
		if !ok {
			return "", false, fmt.Errorf("%s/type: unknown type %q", ptr, name)
		}
		return t, t != "", nil
	}
	switch t := s["type"].(type) {
	case nil:
	case []any:
		var types []any
		for _, v := range t {
			jt, ok, err := conv(v)
			if err != nil {
				return err
			}
			if !ok { // any of the types, or anything: no constraint
				types = nil
				break
			}
			types = append(types, jt)
		}
		if types == nil {
			delete(s, "type")
		} else {
			s["type"] = types
		}
	default:
		jt, ok, err := conv(t)
		if err != nil {
			return err
		}
		if ok {
			s["type"] = jt
		} else {
			delete(s, "type")
		}
	}
	sub := func(v any, at string) error {
		if m, ok := v.(map[string]any); ok {
			return convertSchema(m, at)
		}
		return nil
	}
	if props, ok := s["properties"].(map[string]any); ok {
		if err := renameProperties(s, props, ptr); err != nil {
			return err
		}
		for name, v := range props {
			if err := sub(v, ptr+"/properties/"+name); err != nil {
				return err
			}
		}
	}
	for _, kw := range []string{"items", "additionalProperties"} {
		if err := sub(s[kw], ptr+"/"+kw); err != nil {
			return err
		}
	}
	for _, kw := range []string{"items", "prefixItems", "anyOf", "oneOf", "allOf"} {
		if list, ok := s[kw].([]any); ok {
			for i, v := range list {
				if err := sub(v, fmt.Sprintf("%s/%s/%d", ptr, kw, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// renameProperties renames, in s's properties and required, the property
// names that some LLM API refuses (the registry refuses them too): accents
// dropped ("año" → "ano"), any other character outside letters, digits and
// "_" an underscore ("Content-Type" → "Content_Type").
func renameProperties(s, props map[string]any, ptr string) error {
	renamed := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if to := propertyName(name); to != name {
			if _, clash := props[to]; clash {
				return fmt.Errorf("%s/properties: %q and %q would both be %q", ptr, name, to, to)
			}
			props[to] = props[name]
			delete(props, name)
			renamed[name] = to
		}
	}
	if req, ok := s["required"].([]any); ok {
		for i, r := range req {
			if to, ok := renamed[fmt.Sprint(r)]; ok {
				req[i] = to
			}
		}
	}
	return nil
}

// propertyName is name within ^[A-Za-z0-9_]{1,64}$, the property names
// every format the registry renders accepts.
func propertyName(name string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(name) {
		switch {
		case unicode.Is(unicode.Mn, r): // a combining accent
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" {
		out = "_"
	}
	return out[:min(len(out), maxName)]
}

// readLines reads a JSON-lines file, keeping numbers as written.
func readLines[T any](read func(string) ([]byte, error), path string) ([]T, error) {
	data, err := read(path)
	if err != nil {
		return nil, err
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var v T
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// writeLines writes one JSON record a line, without HTML escapes.
func writeLines[T any](path string, recs []T) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
