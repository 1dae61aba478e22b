package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DashHour is the calls created in one clock hour.
type DashHour struct {
	Start     time.Time
	Succeeded int64
	Failed    int64
	Refused   int64
}

// ended is the hour's calls that ended.
func (h DashHour) ended() int64 { return h.Succeeded + h.Failed + h.Refused }

// DashChart is the calls-per-hour bar chart laid out for SVG: each hour a
// stacked bar, succeeded below, failed on it and refused on top.
type DashChart struct {
	Width, Height int
	Bars          []DashBar
	Max           int64
	Succeeded     int64
	Failed        int64
	Refused       int64
	// Busiest is the hour with the most calls (zero time with none).
	Busiest      time.Time
	BusiestCalls int64
}

// DashBar is one hour's bar, in SVG user units.
type DashBar struct {
	Hour       DashHour
	X, W       float64
	OkY, OkH   float64
	BadY, BadH float64
	RefY, RefH float64
	// LabelX is where the hour label sits; Label is empty for hours not
	// labelled (about eight are).
	LabelX float64
	Label  string
}

// Chart geometry: a plot area above a row of hour labels.
const (
	chartWidth  = 720
	chartHeight = 180
	chartPlot   = 160 // height of the bars' area
	chartLeft   = 36  // room for the scale
)

// NewDashChart lays out hours as bars scaled to the busiest hour.
func NewDashChart(hours []DashHour) DashChart {
	ch := DashChart{Width: chartWidth, Height: chartHeight}
	for _, h := range hours {
		ch.Succeeded += h.Succeeded
		ch.Failed += h.Failed
		ch.Refused += h.Refused
		if t := h.ended(); t > ch.Max {
			ch.Max, ch.Busiest, ch.BusiestCalls = t, h.Start, t
		}
	}
	if len(hours) == 0 {
		return ch
	}
	slot := float64(chartWidth-chartLeft) / float64(len(hours))
	scale := 0.0
	if ch.Max > 0 {
		scale = float64(chartPlot-4) / float64(ch.Max)
	}
	// About eight labels whatever the window: every third hour of a day,
	// and a day's midnight or noon over a week (days named).
	every, layout := max(1, (len(hours)+7)/8), "15h"
	if len(hours) > 48 {
		every, layout = 12*((len(hours)+12*8-1)/(12*8)), "Jan 2 15h"
	}
	for i, h := range hours {
		b := DashBar{Hour: h, X: chartLeft + float64(i)*slot + slot*0.15, W: slot * 0.7}
		b.OkH = float64(h.Succeeded) * scale
		b.BadH = float64(h.Failed) * scale
		b.RefH = float64(h.Refused) * scale
		b.OkY = chartPlot - b.OkH
		b.BadY = b.OkY - b.BadH
		b.RefY = b.BadY - b.RefH
		b.LabelX = b.X + b.W/2
		if i%every == 0 || i == len(hours)-1 {
			b.Label = h.Start.UTC().Format(layout)
		}
		ch.Bars = append(ch.Bars, b)
	}
	return ch
}

// Summary is the chart in one sentence, for its <desc> and for readers
// who do not see it.
func (ch DashChart) Summary() string {
	total := ch.Succeeded + ch.Failed + ch.Refused
	since := "in the last 24 hours"
	if len(ch.Bars) > 0 {
		since = "since " + ch.Bars[0].Hour.Start.UTC().Format("Jan 2 15:04") + " UTC"
	}
	if total == 0 {
		return "No calls finished " + since + "."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s finished %s: %d succeeded, %d failed and %d refused.",
		dashCount(total, "call", "calls"), since, ch.Succeeded, ch.Failed, ch.Refused)
	fmt.Fprintf(&b, " The busiest hour began at %s UTC with %s.", ch.Busiest.UTC().Format("15:04"), dashCount(ch.BusiestCalls, "call", "calls"))
	return b.String()
}

// svgNum formats a coordinate.
func svgNum(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func dashCount(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// dashPct formats a rate between 0 and 1 as a percentage.
func dashPct(r float64) string { return strconv.FormatFloat(r*100, 'f', 1, 64) + "%" }

// dashMs formats a duration in milliseconds (Duration).
func dashMs(ms int64) string { return CallMillis(ms) }

func dashInt(n int64) string { return strconv.FormatInt(n, 10) }

// dashBarTitle is the tooltip of one hour's bar.
func dashBarTitle(b DashBar) string {
	return fmt.Sprintf("%s UTC: %d succeeded, %d failed, %d refused", b.Hour.Start.UTC().Format("Jan 2 15:04"), b.Hour.Succeeded, b.Hour.Failed, b.Hour.Refused)
}
