package models

import (
	"bytes"
	"testing"
	"time"
)

// AppendTime writes what AppendFormat writes, for every layout it takes
// and any time, in UTC or not.
func FuzzAppendTime(f *testing.F) {
	f.Add(int64(0), int64(0), true)
	f.Add(time.Now().Unix(), int64(time.Now().Nanosecond()), true)
	f.Add(int64(1_700_000_000), int64(120_000_000), false)
	f.Add(int64(-62_135_596_800), int64(1), true) // year 1
	f.Add(int64(253_402_300_799), int64(999_999_999), true)
	f.Fuzz(func(t *testing.T, sec, nsec int64, utc bool) {
		tm := time.Unix(sec, nsec%1_000_000_000)
		if utc {
			tm = tm.UTC()
		} else {
			tm = tm.In(time.FixedZone("X", -5*3600))
		}
		for _, layout := range []string{SQLiteTimeLayout, JournalTimeLayout, time.DateTime} {
			if got, want := AppendTime(nil, tm, layout), tm.AppendFormat(nil, layout); !bytes.Equal(got, want) {
				t.Fatalf("%v in %q: %s, want %s", tm, layout, got, want)
			}
		}
	})
}
