package models

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSaveCalls writes the history as the call recorder does under
// load: batches of 40 finished calls in one statement. ns/op is per row.
func BenchmarkSaveCalls(b *testing.B) {
	store, err := Open(context.Background(), b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	const batch = 40
	now := time.Now().UTC()
	rows := make([]*Call, batch)
	b.ReportAllocs()
	cpu := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/row") }()
	n := 0
	for i := 0; i < b.N; i += batch {
		for j := range rows {
			n++
			rows[j] = &Call{ID: fmt.Sprintf("%012x%012x", now.UnixMilli()+int64(n), n), PrincipalID: 1, SessionID: "bench", Tool: "file_read", Version: "1.0.0",
				Arguments: `{"path":"hello.txt"}`, Status: "succeeded", Result: `{"content":"hello"}`, Attempts: 1, Cached: true, CreatedAt: now, FinishedAt: &now}
		}
		if err := store.SaveCalls(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
