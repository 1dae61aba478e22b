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

// CallMillis formats a duration counted in whole milliseconds (Duration):
// 0 is "< 1 ms", not "0 µs", since the count is cut, not measured, there.
func CallMillis(ms int64) string {
	if ms == 0 {
		return "< 1 ms"
	}
	return Duration(time.Duration(ms) * time.Millisecond)
}

// Micros formats a duration in microseconds (Duration).
func Micros(us int64) string { return Duration(time.Duration(us) * time.Microsecond) }

// Duration writes d for a person, the same way on every page, with at
// most three significant figures and the unit that keeps them short:
// "840 µs", "2.4 ms", "628 ms", "12.5 s", "10 min 28 s", "2 h 5 min".
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Duration(-d)
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + " µs"
	// Each bound is where rounding would carry into the next unit.
	case d < 10*time.Millisecond-50*time.Microsecond:
		return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
	case d < time.Second-500*time.Microsecond:
		return strconv.FormatInt(d.Round(time.Millisecond).Milliseconds(), 10) + " ms"
	case d < 10*time.Second-5*time.Millisecond:
		return strconv.FormatFloat(float64(d.Milliseconds())/1000, 'f', 2, 64) + " s"
	case d < time.Minute-50*time.Millisecond:
		return strconv.FormatFloat(float64(d.Round(100*time.Millisecond).Milliseconds())/1000, 'f', 1, 64) + " s"
	case d < time.Hour:
		d = d.Round(time.Second)
		return strconv.Itoa(int(d.Minutes())) + " min " + strconv.Itoa(int(d.Seconds())%60) + " s"
	}
	d = d.Round(time.Minute)
	return strconv.Itoa(int(d.Hours())) + " h " + strconv.Itoa(int(d.Minutes())%60) + " min"
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
