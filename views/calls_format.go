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

// Left says how long remains from now until t ("4 min 10 s left"), or
// that t has passed.
func Left(now, t time.Time) string {
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

// Millis formats a duration in milliseconds for the timing tables.
func Millis(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 2, 64) + " s"
}

// isoTime is t for a <time datetime> attribute.
func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func i64(n int64) string { return strconv.FormatInt(n, 10) }
