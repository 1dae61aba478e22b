package views

import (
	"testing"
	"time"
)

// TestDuration: every page writes durations the same way, short and with
// a unit a person reads at once (628.38 s was one).
func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 µs"},
		{840 * time.Microsecond, "840 µs"},
		{999 * time.Microsecond, "999 µs"},
		{time.Millisecond, "1.0 ms"},
		{2449 * time.Microsecond, "2.4 ms"},
		{9999 * time.Microsecond, "10 ms"},
		{10 * time.Millisecond, "10 ms"},
		{628*time.Millisecond + 400*time.Microsecond, "628 ms"},
		{999*time.Millisecond + 600*time.Microsecond, "1.00 s"},
		{time.Second, "1.00 s"},
		{1250 * time.Millisecond, "1.25 s"},
		{9996 * time.Millisecond, "10.0 s"},
		{12460 * time.Millisecond, "12.5 s"},
		{59940 * time.Millisecond, "59.9 s"},
		{59960 * time.Millisecond, "1 min 0 s"},
		{time.Minute, "1 min 0 s"},
		{628380 * time.Millisecond, "10 min 28 s"},
		{time.Hour + 5*time.Minute + 20*time.Second, "1 h 5 min"},
		{50 * time.Hour, "50 h 0 min"},
		{-1500 * time.Millisecond, "-1.50 s"},
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	if CallMillis(628380) != "10 min 28 s" || CallMillis(0) != "< 1 ms" || Micros(2400) != "2.4 ms" || dashMs(12_000) != "12.0 s" {
		t.Errorf("the callers: %q %q %q %q", CallMillis(628380), CallMillis(0), Micros(2400), dashMs(12_000))
	}
}
