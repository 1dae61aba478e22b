package views

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// PrettyJSON indents a JSON document for reading; text that is not JSON
// is returned as it is.
func PrettyJSON(s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return s
	}
	return b.String()
}

// TimeLeft says how long remains from now until t ("4 min 10 s left"), or
// that t has passed.
func TimeLeft(now, t time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s left"
	case d < time.Hour:
		m, s := int(d.Minutes()), int(d.Seconds())%60
		if s == 0 {
			return strconv.Itoa(m) + " min left"
		}
		return strconv.Itoa(m) + " min " + strconv.Itoa(s) + " s left"
	}
	h, m := int(d.Hours()), int(d.Minutes())%60
	return strconv.Itoa(h) + " h " + strconv.Itoa(m) + " min left"
}

// CallMillis formats a duration in milliseconds for the timing tables.
func CallMillis(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 2, 64) + " s"
}

// Micros writes a time in microseconds as µs, ms or s.
func Micros(us int64) string {
	switch {
	case us < 1000:
		return strconv.FormatInt(us, 10) + " µs"
	case us < 1_000_000:
		return strconv.FormatFloat(float64(us)/1000, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(float64(us)/1e6, 'f', 2, 64) + " s"
}

// stageLabel names a stage for a person: "attempt 2", "queue".
func stageLabel(s CallStage) string {
	if s.Stage == "attempt" {
		return "attempt " + strconv.Itoa(s.N)
	}
	return s.Stage
}

// machineTime is t for a <time datetime> attribute.
func machineTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func callCount(n int64) string { return strconv.FormatInt(n, 10) }

// timingStage is one segment of a call's timing bar, its share of the total.
type timingStage struct {
	Name  string
	Class string
	X, W  float64 // percent of the bar
	Ms    int64
}

// timingStages splits a call's total time into queue wait, run, and the rest
// (guards, waiting for approval, recording), as shares of a 100-wide bar.
// Nothing is drawn for a call with no measured time.
func timingStages(queueMs, runMs, totalMs int64) []timingStage {
	other := totalMs - queueMs - runMs
	if totalMs <= 0 || other < 0 {
		return nil
	}
	var out []timingStage
	x := 0.0
	for _, s := range []timingStage{{Name: "queue", Class: "queue", Ms: queueMs}, {Name: "run", Class: "run", Ms: runMs}, {Name: "other", Class: "other", Ms: other}} {
		if s.Ms == 0 {
			continue
		}
		s.X, s.W = x, float64(s.Ms)*100/float64(totalMs)
		x += s.W
		out = append(out, s)
	}
	return out
}

func stagePct(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
