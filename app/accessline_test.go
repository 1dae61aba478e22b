package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"toolbelt/web"
)

// slogLine is the access line as the JSON log handler writes it: the
// logger newApp makes, with the instance.
func slogLine(t testing.TB, instance string, l web.RequestLine) string {
	var b bytes.Buffer
	log, err := newLogger(Config{LogLevel: "info"}, "json", &b)
	if err != nil {
		t.Fatal(err)
	}
	if err := log.With("instance", instance).Handler().Handle(context.Background(), l.Record()); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func handLine(instance string, l web.RequestLine) (string, bool) {
	var b bytes.Buffer
	ok := newAccessLine(&b, instance).write(l)
	return b.String(), ok
}

func checkAccessLine(t *testing.T, instance string, l web.RequestLine) {
	t.Helper()
	got, ok := handLine(instance, l)
	if y := l.End.Year(); y < 0 || y >= 10000 {
		if ok || got != "" {
			t.Fatalf("year %d: wrote %q, want it left to the handler", y, got)
		}
		return
	}
	if want := slogLine(t, instance, l); !ok || got != want {
		t.Fatalf("hand-written line differs from the handler's:\n got %q\nwant %q", got, want)
	}
}

func TestAccessLineMatchesSlog(t *testing.T) {
	end := time.Date(2026, 12, 3, 10, 11, 12, 345678000, time.UTC)
	for _, c := range []struct {
		instance string
		l        web.RequestLine
	}{
		{"vm-1", web.RequestLine{End: end, RequestID: "0123456789abcdef", Method: "POST", Path: "/api/v1/calls",
			Route: "/api/v1/calls", Actor: "admin", Status: 200, Took: 23815 * time.Nanosecond}},
		{"", web.RequestLine{End: end.Truncate(time.Second), Method: "GET", Path: "/nope", Status: 404}},
		{"a\"b\\c", web.RequestLine{End: end.In(time.FixedZone("x", -5*3600-1800)), RequestID: "id",
			Method: "GET", Path: "/a b/\x00\x1f\t\r\n<&>", Route: "/a/:b", Actor: "名前\u2028\u2029\xff\xfe",
			Status: 599, Took: -time.Hour}},
		{"i", web.RequestLine{End: end, Took: 90 * time.Minute, Status: 0}},
		{"i", web.RequestLine{End: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"i", web.RequestLine{End: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		checkAccessLine(t, c.instance, c.l)
	}
}

func FuzzAccessLine(f *testing.F) {
	f.Add("vm-1", "0123456789abcdef", "POST", "/api/v1/calls", "/api/v1/calls", "admin", 200, int64(23815), int64(1796292672345678000), 0)
	f.Add("a\"b", "\x00", "G\tET", "/\u2028\xff", "", "名前", -1, int64(-5), int64(-62135596800000000000/1000), -19800)
	f.Fuzz(func(t *testing.T, instance, id, method, path, route, actor string, status int, took, unixNano int64, offset int) {
		end := time.Unix(0, unixNano).In(time.FixedZone("z", offset%(24*3600)))
		checkAccessLine(t, instance, web.RequestLine{End: end, RequestID: id, Method: method, Path: path,
			Route: route, Actor: actor, Status: status, Took: time.Duration(took)})
	})
}

// BenchmarkAccessLine is the access line of a cached call written by the
// JSON log handler and by accessLine.
func BenchmarkAccessLine(b *testing.B) {
	l := web.RequestLine{End: time.Now(), RequestID: "0123456789abcdef", Method: "POST", Path: "/api/v1/calls",
		Route: "/api/v1/calls", Actor: "admin", Status: 200, Took: 23815 * time.Nanosecond}
	b.Run("slog", func(b *testing.B) {
		log, err := newLogger(Config{LogLevel: "info"}, "json", io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		h := log.With("instance", "vm-1").Handler()
		b.ReportAllocs()
		for b.Loop() {
			if h.Enabled(context.Background(), slog.LevelInfo) {
				_ = h.Handle(context.Background(), l.Record())
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		a := newAccessLine(io.Discard, "vm-1")
		b.ReportAllocs()
		for b.Loop() {
			a.write(l)
		}
	})
}
