package main

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestRegistryName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"calculate_triangle_area", "calculate_triangle_area"},
		{"math.factorial", "math_factorial"},
		{"ChaDri.change_drink", "cha_dri_change_drink"},
		{"fetch_DNA_sequence", "fetch_dna_sequence"},
		{"Flights_4_SearchRoundtripFlights", "flights_4_search_roundtrip_flights"},
		{"version_api.VersionApi.get_version", "version_api_version_api_get_version"},
		{"getDNASequence", "get_dna_sequence"},
		{"3d.render", "f_3d_render"},
		{"a__b..c_", "a_b_c"},
	} {
		if got := registryName(c.in); got != c.want {
			t.Errorf("registryName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestConvertParameters: BFCL's type names become JSON Schema's in every
// subschema but not in data, and property names the formats refuse are
// renamed in properties and required alike.
func TestConvertParameters(t *testing.T) {
	in := `{"type":"dict","required":["año","coord"],"properties":{
		"año":{"type":"integer"},
		"coord":{"type":"tuple","items":{"type":"float"}},
		"headers":{"type":"dict","properties":{"Content-Type":{"type":"string","default":"text/plain"}}},
		"value":{"type":"any","description":"anything"},
		"rows":{"type":"array","items":{"type":"dict","properties":{"n":{"type":"float"}}}},
		"kind":{"type":"string","enum":["dict","float"],"default":{"type":"dict"}}}}`
	want := `{"properties":{"ano":{"type":"integer"},"coord":{"items":{"type":"number"},"type":"array"},` +
		`"headers":{"properties":{"Content_Type":{"default":"text/plain","type":"string"}},"type":"object"},` +
		`"kind":{"default":{"type":"dict"},"enum":["dict","float"],"type":"string"},` +
		`"rows":{"items":{"properties":{"n":{"type":"number"}},"type":"object"},"type":"array"},` +
		`"value":{"description":"anything"}},"required":["ano","coord"],"type":"object"}`
	var p map[string]any
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	got, err := convertParameters(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	if string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	if _, err := convertParameters(map[string]any{"type": "dict", "properties": map[string]any{"x": map[string]any{"type": "complex"}}}); err == nil {
		t.Error("an unknown type converted without error")
	}
}

// TestCatalogMerge: a registry name is one tool, its definition the one
// the most questions offer, the first to appear among equals, a question
// offering one twice counting once; names that map alike share it, and a
// reserved name takes a suffix no other name has.
func TestCatalogMerge(t *testing.T) {
	fn := func(name, desc string) function {
		return function{Name: name, Description: desc, Parameters: map[string]any{"type": "dict", "properties": map[string]any{}}}
	}
	type named struct{ name, desc string }
	type offer struct {
		id string
		f  function
	}
	for _, c := range []struct {
		name   string
		offers []offer
		want   []named
		merged int
		drop   int
	}{
		{"one definition", []offer{{"q1", fn("get.weather", "Now.")}, {"q2", fn("get.weather", "Now.")}},
			[]named{{"get_weather", "Now."}}, 0, 0},
		{"most offered wins", []offer{{"q1", fn("get_weather", "Now.")}, {"q2", fn("get_weather", "Today.")}, {"q3", fn("get_weather", "Today.")}},
			[]named{{"get_weather", "Today."}}, 1, 1},
		{"a tie goes to the first", []offer{{"q1", fn("get_weather", "Now.")}, {"q2", fn("get_weather", "Today.")}, {"q3", fn("get_weather", "Later.")}},
			[]named{{"get_weather", "Now."}}, 1, 2},
		{"a question counts once", []offer{{"q1", fn("get_weather", "Now.")}, {"q1", fn("get_weather", "Now.")}, {"q2", fn("get_weather", "Today.")}, {"q3", fn("get_weather", "Today.")}},
			[]named{{"get_weather", "Today."}}, 1, 1},
		{"names that map alike are one", []offer{{"q1", fn("get.weather", "Now.")}, {"q2", fn("getWeather", "Today.")}, {"q3", fn("get_weather", "Today.")}},
			[]named{{"get_weather", "Today."}}, 1, 1},
		{"order of first appearance", []offer{{"q1", fn("b", "B.")}, {"q1", fn("a", "A.")}, {"q2", fn("a", "A2.")}, {"q3", fn("a", "A2.")}},
			[]named{{"b", "B."}, {"a", "A2."}}, 1, 1},
		{"reserved names take a free suffix", []offer{{"q1", fn("search_tools_2", "Other.")}, {"q2", fn("search.tools", "Search.")}, {"q3", fn("search_tools", "Search again.")}},
			[]named{{"search_tools_2", "Other."}, {"search_tools_3", "Search."}}, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cat := newCatalog()
			var defs []*definition
			for _, o := range c.offers {
				d, err := cat.offer(o.id, o.f)
				if err != nil {
					t.Fatal(err)
				}
				defs = append(defs, d)
			}
			tools, st := cat.tools()
			var got []named
			for _, tl := range tools {
				got = append(got, named{tl.Name, tl.Description})
			}
			if !slices.Equal(got, c.want) || st.merged != c.merged || st.dropped != c.drop {
				t.Errorf("tools %v, %d merged, %d dropped; want %v, %d, %d", got, st.merged, st.dropped, c.want, c.merged, c.drop)
			}
			// Every offer, kept or not, is golded by its name's one tool.
			for i, d := range defs {
				if !slices.ContainsFunc(tools, func(tl tool) bool { return tl.Name == d.name }) {
					t.Errorf("offer %d is named %q, not a tool", i, d.name)
				}
			}
		})
	}
}
