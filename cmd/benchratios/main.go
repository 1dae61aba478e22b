// Command benchratios reads `go test -bench` output and prints the ratios
// issue 42's targets are stated in, each against its target: the cached
// REST call against a bare Gin handler, MCP against REST per protocol
// version and catalog size, the MCP tools/list of 10,000 tools, and a
// federated call against a built-in call plus the direct upstream call.
// Each ratio is measured inside one benchmark run (both sides interleaved
// on the same machine at the same moments), so it holds on a loaded
// machine where absolute figures do not. `make bench` pipes the
// benchmarks through it.
//
// It exits 1 when a benchmark a target names reported nothing (a renamed
// benchmark or metric must be renamed here too), and with -strict also
// when a ratio misses its target.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
)

// A target is one figure the benchmarks keep: the metric unit of the
// benchmarks whose names match, and the bound it must stay within.
type target struct {
	what   string
	bench  *regexp.Regexp
	unit   string
	atMost bool // the figure must stay at or below bound (else at or above)
	bound  float64
}

// targets are issue 42's figures, in the order they are printed.
var targets = []target{
	{"cached REST call / bare Gin handler", regexp.MustCompile(`^CachedVsBareGin$`), "ratio", false, 0.5},
	{"MCP call / REST call", regexp.MustCompile(`^MCPVsREST/`), "ratio", false, 0.8},
	{"MCP tools/list of 10,000 tools, p99 ms", regexp.MustCompile(`^MCPToolsList10k`), "p99-ms", true, 20},
	{"federated call / (built-in call + direct call)", regexp.MustCompile(`^FederationHop/`), "hop-ratio", true, 1.0},
}

func main() {
	strict := flag.Bool("strict", false, "exit 1 when a figure misses its target")
	flag.Parse()
	rows, missing, err := summarize(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratios:", err)
		os.Exit(2)
	}
	missed := print(os.Stdout, rows)
	for _, m := range missing {
		fmt.Fprintf(os.Stderr, "benchratios: no benchmark reported %q for %s (renamed? update cmd/benchratios)\n", m.unit, m.what)
	}
	if len(missing) > 0 || (*strict && missed > 0) {
		os.Exit(1)
	}
}

// row is one benchmark's figure for a target: the median over its runs
// (-count).
type row struct {
	target target
	name   string
	median float64
	runs   int
}

func (r row) met() bool {
	if r.target.atMost {
		return r.median <= r.target.bound
	}
	return r.median >= r.target.bound
}

// summarize reads benchmark output and returns a row per benchmark a
// target names, and the targets no benchmark reported.
func summarize(in io.Reader) (rows []row, missing []target, err error) {
	values := map[string][]float64{} // target index + name → values
	var order []string
	br := benchfmt.NewReader(in, "stdin")
	for br.Scan() {
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue // a syntax error or unit metadata: not a result
		}
		name := strings.TrimPrefix(string(trimProcs(res.Name.Full())), "Benchmark")
		for i, t := range targets {
			if !t.bench.MatchString(name) {
				continue
			}
			v, ok := res.Value(t.unit)
			if !ok {
				continue
			}
			key := fmt.Sprintf("%d\x00%s", i, name)
			if _, seen := values[key]; !seen {
				order = append(order, key)
			}
			values[key] = append(values[key], v)
		}
	}
	if err := br.Err(); err != nil {
		return nil, nil, err
	}
	reported := map[int]bool{}
	for _, key := range order {
		var i int
		idx, name, _ := strings.Cut(key, "\x00")
		fmt.Sscan(idx, &i)
		reported[i] = true
		vs := values[key]
		rows = append(rows, row{target: targets[i], name: name, median: median(vs), runs: len(vs)})
	}
	slices.SortStableFunc(rows, func(a, b row) int { return indexOf(a.target) - indexOf(b.target) })
	for i, t := range targets {
		if !reported[i] {
			missing = append(missing, t)
		}
	}
	return rows, missing, nil
}

func indexOf(t target) int {
	return slices.IndexFunc(targets, func(u target) bool { return u.what == t.what })
}

// trimProcs drops the -GOMAXPROCS suffix go test adds to a name.
func trimProcs(name []byte) []byte {
	if i := strings.LastIndexByte(string(name), '-'); i > 0 && strings.Trim(string(name[i+1:]), "0123456789") == "" {
		return name[:i]
	}
	return name
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// print writes the table and returns how many figures missed their
// target.
func print(w io.Writer, rows []row) (missed int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tbenchmark\tmedian\truns\ttarget\t")
	for _, r := range rows {
		op, verdict := "≥", "ok"
		if r.target.atMost {
			op = "≤"
		}
		if !r.met() {
			verdict = "MISSED"
			missed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3g\t%d\t%s %g\t%s\n", r.target.what, r.name, r.median, r.runs, op, r.target.bound, verdict)
	}
	_ = tw.Flush()
	return missed
}
