package main

import (
	"strings"
	"testing"
)

// A run's output: ratios from two -count runs, a metric another target
// does not name, and noise around the result lines.
const sample = `goos: linux
goarch: amd64
pkg: toolbelt/web
BenchmarkCachedVsBareGin-2   	       4	 251000000 ns/op	     11000 cached-req/s	     22000 bare-req/s	         0.50 ratio
BenchmarkCachedVsBareGin-2   	       4	 251000000 ns/op	     11000 cached-req/s	     22000 bare-req/s	         0.54 ratio
BenchmarkMCPVsREST/stateless/8-2   	       4	 1 ns/op	         0.21 ratio
BenchmarkMCPVsREST/stateless/8-2   	       4	 1 ns/op	         0.95 ratio
BenchmarkMCPVsREST/stateless/8-2   	       4	 1 ns/op	         0.90 ratio
BenchmarkMCPToolsList10k/stateless-2 	      20	 1 ns/op	  8.1 p50-ms	  19.5 p99-ms
BenchmarkFederationHop/stdio/rest/50-2 	      20	 1 ns/op	  1.20 hop-ratio
PASS
ok  	toolbelt/web	12.3s
`

func TestSummarize(t *testing.T) {
	rows, missing, err := summarize(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 0 {
		t.Errorf("missing %v, want none", missing)
	}
	got := map[string]row{}
	for _, r := range rows {
		got[r.name] = r
	}
	for _, want := range []struct {
		name   string
		median float64
		runs   int
		met    bool
	}{
		{"CachedVsBareGin", 0.52, 2, true},
		{"MCPVsREST/stateless/8", 0.90, 3, true}, // the median, not the first or the mean
		{"MCPToolsList10k/stateless", 19.5, 1, true},
		{"FederationHop/stdio/rest/50", 1.20, 1, false},
	} {
		r, ok := got[want.name]
		if !ok {
			t.Errorf("%s: no row (rows %v)", want.name, rows)
			continue
		}
		if r.median != want.median || r.runs != want.runs || r.met() != want.met {
			t.Errorf("%s: median %g runs %d met %v, want %g %d %v", want.name, r.median, r.runs, r.met(), want.median, want.runs, want.met)
		}
	}
	var out strings.Builder
	if missed := print(&out, rows); missed != 1 {
		t.Errorf("missed %d, want 1 (the federation hop):\n%s", missed, out.String())
	}
	if !strings.Contains(out.String(), "FederationHop/stdio/rest/50") || !strings.Contains(out.String(), "MISSED") {
		t.Errorf("table lacks the missed row:\n%s", out.String())
	}
}

// A benchmark renamed away from its target is reported, not silently
// dropped from the table.
func TestSummarizeNamesWhatIsMissing(t *testing.T) {
	_, missing, err := summarize(strings.NewReader("BenchmarkCachedVsBareGin-2 4 1 ns/op 0.6 ratio\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != len(targets)-1 {
		t.Fatalf("missing %d targets, want %d: %v", len(missing), len(targets)-1, missing)
	}
	for _, m := range missing {
		if m.bench.MatchString("CachedVsBareGin") {
			t.Errorf("%s counted missing though reported", m.what)
		}
	}
}
