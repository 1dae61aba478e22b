package views

import (
	"strconv"
	"time"
)

func itoa(n int) string { return strconv.Itoa(n) }

// Ago says how long ago t was, in the largest fitting unit.
func Ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + " days ago"
}

// Stamp formats a time for tables (UTC, to the second).
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }
