package web_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/docs"
	"toolbelt/services/formats"
)

// TestFormatsAgree checks that every list of export formats written or
// generated apart from services/formats' table says what it says, in its
// order: the OpenAPI enums of format (Swagger 2.0 and OpenAPI 3, written
// as swag annotations), the renderings of GET /tools/{name} in OpenAPI 3,
// the console's exports and playground, and the docs' tables.
func TestFormatsAgree(t *testing.T) {
	t.Parallel()
	want := formats.Formats

	for name, raw := range map[string][]byte{"docs/swagger.json": docs.JSON, "docs/openapi3.json": docs.OpenAPI3JSON} {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		enums := formatEnums(doc, "")
		// GET /tools and GET /tools/{name} take ?format=; SelectRequest
		// has a format field.
		if len(enums) != 3 {
			t.Errorf("%s: %d enums of format found, want 3: %v", name, len(enums), enums)
		}
		for at, got := range enums {
			if !slices.Equal(got, want) {
				t.Errorf("%s: the enum of format at %s is %v, the table has %v; change the annotation", name, at, got, want)
			}
		}
	}
	var doc3 struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						AnyOf []struct {
							AnyOf []struct{ Title, Description string } `json:"anyOf"`
						} `json:"anyOf"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(docs.OpenAPI3JSON, &doc3); err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, branch := range doc3.Paths["/api/v1/tools/{name}"]["get"].Responses["200"].Content["application/json"].Schema.AnyOf {
		for i, s := range branch.AnyOf {
			titles = append(titles, s.Title)
			if f, _ := formats.Lookup(s.Title); i < len(want) && s.Description != f.Renders {
				t.Errorf("docs/openapi3.json: the %s rendering says %q, the table %q", s.Title, s.Description, f.Renders)
			}
		}
	}
	if !slices.Equal(titles, want) {
		t.Errorf("docs/openapi3.json: the renderings of GET /tools/{name} are %v, the table has %v; run make generate", titles, want)
	}

	b := signedIn(t, newTestApp(t), "admin")
	p := b.get("/admin/tools/file_read")
	var exports, labels []string
	p.Doc.Find("details.export").Each(func(_ int, s *goquery.Selection) {
		id, _ := s.Attr("data-testid")
		exports = append(exports, strings.TrimPrefix(id, "export-"))
		labels = append(labels, strings.TrimSpace(s.Find("summary").Contents().First().Text()))
	})
	if !slices.Equal(exports, want) {
		t.Errorf("the tool page exports %v, the table has %v", exports, want)
	}
	for i, f := range formats.All() {
		if i < len(labels) && labels[i] != f.Label {
			t.Errorf("the tool page labels %s %q, the table %q", f.Name, labels[i], f.Label)
		}
	}
	p = b.get("/admin/playground")
	options := p.TestID("playground-format").Find("option").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("value", "") })
	if !slices.Equal(options, want) {
		t.Errorf("the playground offers %v, the table has %v", options, want)
	}

	// docs/formats.md has a row per format; docs/selection.md's row of the
	// format field names each.
	formatsMD := readDoc(t, "formats.md")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| .* \\| .* \\|$")
	var rows []string
	for _, m := range row.FindAllStringSubmatch(formatsMD, -1) {
		rows = append(rows, m[1])
	}
	if !slices.Equal(rows, want) {
		t.Errorf("docs/formats.md's table has rows %v, the table %v", rows, want)
	}
	field := regexp.MustCompile("(?m)^\\| `format` \\| (.*) \\|$").FindStringSubmatch(readDoc(t, "selection.md"))
	if field == nil {
		t.Fatal("docs/selection.md has no row for the format field")
	}
	var named []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(field[1], -1) {
		named = append(named, m[1])
	}
	if !slices.Equal(named, want) {
		t.Errorf("docs/selection.md's format row names %v, the table %v", named, want)
	}
}

// formatEnums finds, in a decoded OpenAPI document, the enum of every
// query parameter named format of the tools' operations (its own in
// Swagger 2.0, its schema's in OpenAPI 3) and of every request schema's
// property named format, by where it is.
func formatEnums(node any, at string) map[string][]string {
	out := map[string][]string{}
	enumOf := func(v any) []string {
		m, _ := v.(map[string]any)
		if s, ok := m["schema"].(map[string]any); ok && m["enum"] == nil {
			m = s
		}
		list, _ := m["enum"].([]any)
		var names []string
		for _, e := range list {
			s, _ := e.(string)
			names = append(names, s)
		}
		return names
	}
	switch n := node.(type) {
	case map[string]any:
		// The audit's format (json, ndjson, csv) is another list.
		if n["name"] == "format" && n["in"] == "query" && strings.Contains(at, "/tools") {
			out[at] = enumOf(n)
		}
		// Answers echo the format asked for; requests take one.
		if props, ok := n["properties"].(map[string]any); ok && strings.HasSuffix(at, "Request") {
			if f, ok := props["format"].(map[string]any); ok {
				out[at+"/properties/format"] = enumOf(f)
			}
		}
		for k, v := range n {
			for where, e := range formatEnums(v, at+"/"+k) {
				out[where] = e
			}
		}
	case []any:
		for i, v := range n {
			for where, e := range formatEnums(v, at+"/"+strconv.Itoa(i)) {
				out[where] = e
			}
		}
	}
	return out
}

// readDoc reads a guide under docs/.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
