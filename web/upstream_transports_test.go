package web_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"toolbelt/services/upstream"
)

// TestTransportsAgree holds what names the upstream transports to the one
// table that declares them (upstream.Transports): the OpenAPI enums of a
// registration's transport (swag's document and the OpenAPI 3 one), the
// console's list of transports and the transport row of
// docs/upstreams.md say the same names in the same order.
func TestTransportsAgree(t *testing.T) {
	t.Parallel()
	want := upstream.TransportNames()
	for doc, path := range map[string][]string{"../docs/swagger.json": {"definitions"}, "../docs/openapi3.json": {"components", "schemas"}} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var tree map[string]any
		if err := json.Unmarshal(raw, &tree); err != nil {
			t.Fatal(err)
		}
		for _, key := range path {
			tree, _ = tree[key].(map[string]any)
		}
		for _, schema := range []string{"upstream.Spec", "upstream.Server"} {
			props, _ := tree[schema].(map[string]any)["properties"].(map[string]any)
			transport, _ := props["transport"].(map[string]any)
			var enum []string
			for _, v := range transport["enum"].([]any) {
				enum = append(enum, v.(string))
			}
			if !slices.Equal(enum, want) {
				t.Errorf("%s: %s's transport enum is %v, the table's %v", doc, schema, enum, want)
			}
		}
	}

	app := newTestApp(t)
	p := signedIn(t, app, "admin").get("/admin/servers")
	var offered []string
	p.Doc.Find("#server-transport option").Each(func(_ int, o *goquery.Selection) {
		v, _ := o.Attr("value")
		offered = append(offered, v)
	})
	if !slices.Equal(offered, want) {
		t.Errorf("the console offers %v, the table has %v", offered, want)
	}

	guide, err := os.ReadFile("../docs/upstreams.md")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, line := range strings.Split(string(guide), "\n") {
		if strings.HasPrefix(line, "| `transport` |") {
			for _, m := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(strings.TrimPrefix(line, "| `transport` |"), -1) {
				named = append(named, m[1])
			}
		}
	}
	if !slices.Equal(named, want) {
		t.Errorf("docs/upstreams.md's transport row names %v, the table %v", named, want)
	}
}
