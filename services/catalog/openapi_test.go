package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"

	"toolbelt/models"
)

// TestSnakeCase makes tool names of operationIds and of method and path.
func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"findPetsByStatus": "find_pets_by_status",
		"getHTTPServer":    "get_http_server",
		"find pet by id":   "find_pet_by_id",
		"pets.list-all":    "pets_list_all",
		"v2GetItem":        "v2_get_item",
		"GET /pets/by id":  "get_pets_by_id",
		"Ünïcode":          "n_code",
		"":                 "",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRefResolver expands $refs and turns OpenAPI 3.0 keywords into JSON
// Schema 2020-12.
func TestRefResolver(t *testing.T) {
	root := map[string]any{"components": map[string]any{"schemas": map[string]any{
		"Node": map[string]any{"type": "object", "properties": map[string]any{
			"next": map[string]any{"$ref": "#/components/schemas/Node"}, "x-internal": map[string]any{"type": "string"}}},
		"Id": map[string]any{"type": "integer", "nullable": true, "minimum": 0, "exclusiveMinimum": true, "example": 7, "x-go-type": "int"},
	}}}
	cases := []struct{ name, in, want string }{
		{"openapi 3.0 keywords", `{"$ref": "#/components/schemas/Id"}`, `{"examples":[7],"exclusiveMinimum":0,"type":["integer","null"]}`},
		{"sibling description kept", `{"$ref": "#/components/schemas/Id", "description": "the id"}`, `{"description":"the id","examples":[7],"exclusiveMinimum":0,"type":["integer","null"]}`},
		{"recursion stops", `{"$ref": "#/components/schemas/Node"}`, `{"properties":{"next":{"description":"refers back to #/components/schemas/Node (not expanded)"},"x-internal":{"type":"string"}},"type":"object"}`},
		{"unknown reference", `{"$ref": "#/components/schemas/Nope"}`, `{"description":"unresolved reference #/components/schemas/Nope"}`},
		{"exclusiveMaximum false dropped", `{"type": "number", "maximum": 5, "exclusiveMaximum": false}`, `{"maximum":5,"type":"number"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in any
			_ = json.Unmarshal([]byte(tc.in), &in)
			r := &refResolver{root: root}
			got, _ := json.Marshal(r.convert(in))
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRefResolverFanOut bounds the expansion of schemas that refer to each
// other many times over: ten levels of ten references each would be 10^10
// objects.
func TestRefResolverFanOut(t *testing.T) {
	schemas := map[string]any{}
	for i := 0; i < 10; i++ {
		props := map[string]any{}
		for j := 0; j < 10; j++ {
			props[fmt.Sprintf("p%d", j)] = map[string]any{"$ref": fmt.Sprintf("#/components/schemas/S%d", i+1)}
		}
		schemas[fmt.Sprintf("S%d", i)] = map[string]any{"type": "object", "properties": props}
	}
	schemas["S10"] = map[string]any{"type": "string"}
	r := &refResolver{root: map[string]any{"components": map[string]any{"schemas": schemas}}}
	out, _ := json.Marshal(r.convert(map[string]any{"$ref": "#/components/schemas/S0"}))
	if r.nodes > 2*maxSchemaNodes || !strings.Contains(string(out), "too large") {
		t.Errorf("expanded %d nodes (%d bytes)", r.nodes, len(out))
	}
}

// TestParseOpenAPIExternalRef refuses a reference to another document
// without fetching it.
func TestParseOpenAPIExternalRef(t *testing.T) {
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte(`{"Pet": {"type": "object"}}`))
	}))
	defer srv.Close()
	doc := `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/p": {"post": {
		"requestBody": {"content": {"application/json": {"schema": {"$ref": "` + srv.URL + `/defs.json#/Pet"}}}},
		"responses": {"200": {"description": "ok"}}}}}}`
	_, err := parseOpenAPI(context.Background(), []byte(doc), "/document", nil, nil)
	var ve *models.ValidationError
	if !errors.As(err, &ve) || ve.Problems[0].Pointer != "/document" {
		t.Fatalf("err = %v", err)
	}
	if fetched.Load() != 0 {
		t.Errorf("the external reference was fetched")
	}
}

// TestBuildJSONVariantBody imports an OpenAPI 3.1 operation whose body is
// a JSON variant: the tool sends it with that content type.
func TestBuildJSONVariantBody(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "x", "version": "1"}, "servers": [{"url": "https://x.example.com"}],
	"paths": {"/items/{id}": {"patch": {"operationId": "patch-item", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
	"requestBody": {"required": true, "content": {"application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/Item"}}}},
	"responses": {"200": {"description": "ok"}}}}},
	"components": {"schemas": {"Item": {"type": "object", "properties": {"name": {"type": ["string", "null"]}}}}}}`
	d, err := parseOpenAPI(context.Background(), []byte(doc), "/document", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := documentTree(d)
	if err != nil {
		t.Fatal(err)
	}
	b := &toolBuilder{base: "https://x.example.com", refs: &refResolver{root: root}, names: map[string]bool{}}
	out := b.build(operationsOf(d)[0])
	r := out.Tool.Runner
	if out.Tool.Name != "patch_item" || r.Method != "PATCH" || r.URL != "https://x.example.com/items/{{id}}" || r.Body != "{{body}}" ||
		r.Headers["Content-Type"] != "application/merge-patch+json" {
		t.Errorf("tool: %+v", out.Tool)
	}
	if want := `"required":["id","body"]`; !strings.Contains(string(out.Tool.Parameters), want) {
		t.Errorf("parameters %s lack %s", out.Tool.Parameters, want)
	}
}

// A YAML document as people write them: response codes unquoted (YAML
// reads 200 as a number) and a date in an example; it loads as its JSON
// twin would.
func TestParseOpenAPIYAMLNumericKeys(t *testing.T) {
	doc := `openapi: 3.0.3
info: {title: Pets, version: "1"}
paths:
  /pets/{id}:
    get:
      operationId: getPet
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        200:
          description: the pet
          content:
            application/json:
              schema: {type: object, properties: {born: {type: string, example: 2024-01-02}}}
        404: {description: none}
`
	d, err := parseOpenAPI(context.Background(), []byte(doc), "/document", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	op := d.Paths.Find("/pets/{id}").Get
	if op == nil || op.Responses.Status(200) == nil || op.Responses.Status(404) == nil {
		t.Fatalf("responses 200 and 404 not read: %+v", op)
	}
}

// countOperations, on the decoded document, keeps what wanted keeps on
// the loaded one, for each filter, in OpenAPI 3 and Swagger 2.
func TestCountOperationsAgreesWithTheLoadedDocument(t *testing.T) {
	for _, name := range []string{"petstore.yaml", "petstore-swagger2.json"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "web", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := parseOpenAPI(context.Background(), data, "/document", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct{ tags, ids []string }{
			{}, {tags: []string{"pets"}}, {tags: []string{"store", "nope"}}, {ids: []string{"listPets", "addPet"}},
			{tags: []string{"pets"}, ids: []string{"listPets"}}, {ids: []string{"none"}},
		} {
			want := 0
			for _, op := range operationsOf(doc) {
				if wanted(op.op, f.tags, f.ids) {
					want++
				}
			}
			var top map[string]any
			if err := yaml.Unmarshal(data, &top); err != nil {
				t.Fatal(err)
			}
			var root yaml.Node
			if err := yaml.Unmarshal(data, &root); err != nil {
				t.Fatal(err)
			}
			if got, nodes := countOperations(top, f.tags, f.ids), countNodeOperations(&root, f.tags, f.ids); got != want || nodes != want {
				t.Errorf("%s %+v: counted %d (on nodes %d), the loaded document has %d", name, f, got, nodes, want)
			}
			// What is left of the document holds them all.
			filtered, err := parseOpenAPI(context.Background(), data, "/document", f.tags, f.ids)
			if want == 0 {
				continue
			}
			if err != nil {
				t.Fatalf("%s %+v: %v", name, f, err)
			}
			left := 0
			for _, op := range operationsOf(filtered) {
				if wanted(op.op, f.tags, f.ids) {
					left++
				}
			}
			if left != want {
				t.Errorf("%s %+v: %d operations left after pruning, want %d", name, f, left, want)
			}
		}
	}
}

// A document of 35,000 operations, as JSON or YAML, is refused on its
// count before the OpenAPI library loads it (it then cost half a minute
// and most of a gigabyte), and the same document filtered down to two
// operations imports them without loading the rest. What each costs in
// allocations stays within a few dozen times the document's size.
func TestHugeDocumentRefusedBeforeLoading(t *testing.T) {
	var js, ym strings.Builder
	js.WriteString(`{"openapi":"3.0.3","info":{"title":"Huge","version":"1"},"servers":[{"url":"https://huge.example.com"}],"paths":{`)
	ym.WriteString("openapi: 3.0.3\ninfo:\n  title: Huge\n  version: '1'\nservers:\n  - url: https://huge.example.com\npaths:\n")
	for i := range 35_000 {
		if i > 0 {
			js.WriteByte(',')
		}
		fmt.Fprintf(&js, `"/p%d":{"get":{"operationId":"op%d","responses":{"200":{"description":"ok"}}}}`, i, i)
		fmt.Fprintf(&ym, "  /p%d:\n    get:\n      operationId: op%d\n      responses:\n        '200':\n          description: ok\n", i, i)
	}
	js.WriteString(`}}`)
	for format, data := range map[string][]byte{"JSON": []byte(js.String()), "YAML": []byte(ym.String())} {
		allocated := func(f func()) uint64 {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			f()
			runtime.ReadMemStats(&after)
			return after.TotalAlloc - before.TotalAlloc
		}
		var err error
		alloc := allocated(func() { _, err = parseOpenAPI(context.Background(), data, "/url", nil, nil) })
		var ve *models.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Error(), "holds 35000 operations; import at most 500") {
			t.Fatalf("%s refusal: %v", format, err)
		}
		if alloc > 40*uint64(len(data)) {
			t.Errorf("refusing a %d-byte %s document allocated %d bytes", len(data), format, alloc)
		}
		var doc *openapi3.T
		alloc = allocated(func() { doc, err = parseOpenAPI(context.Background(), data, "/url", nil, []string{"op7", "op34999"}) })
		if err != nil || doc.Paths.Len() != 2 {
			t.Fatalf("%s filtered to two: %v", format, err)
		}
		if alloc > 40*uint64(len(data)) {
			t.Errorf("two operations of a %d-byte %s document allocated %d bytes", len(data), format, alloc)
		}
		t.Logf("%s, %d bytes: the filtered import allocated %d MiB", format, len(data), alloc>>20)
	}
}
