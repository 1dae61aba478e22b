package main

import (
	"encoding/json"
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

// TestCatalogNames: an identical definition is one tool; a different one
// under the same name is a second tool with a suffix, and a suffixed name
// already taken is skipped.
func TestCatalogNames(t *testing.T) {
	c := newCatalog()
	fn := func(name, desc string) function {
		return function{Name: name, Description: desc, Parameters: map[string]any{"type": "dict", "properties": map[string]any{}}}
	}
	for _, step := range []struct {
		f    function
		want string
	}{
		{fn("get.weather", "Weather now."), "get_weather"},
		{fn("get_weather_2", "Something else."), "get_weather_2"},
		{fn("get.weather", "Weather now."), "get_weather"},
		{fn("getWeather", "Weather tomorrow."), "get_weather_3"},
		{fn("search_tools", "Search."), "search_tools_2"},
	} {
		got, err := c.add(step.f)
		if err != nil || got != step.want {
			t.Errorf("add(%s, %q) = %q, %v; want %q", step.f.Name, step.f.Description, got, err, step.want)
		}
	}
	if len(c.tools) != 4 {
		t.Errorf("%d tools, want 4", len(c.tools))
	}
}
