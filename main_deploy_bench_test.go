package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
)

// BenchmarkDeployments measures calls through the real binary in three
// deployments, in the same run: one instance on SQLite, one on Postgres
// and Redis, three on Postgres and Redis behind round robin. Each sends
// b.N calls from 16 concurrent clients, cached (one file read again and
// again) and uncached (the same read with a new max_bytes each time, so
// the guard chain, the tool and the history record all run). Besides
// ns/op it reports p50 and p99 latency, and CPU per call: the Toolbelt
// processes' (server-cpu-µs/call) and the machine's postgres and
// redis-server processes' (shared-cpu-µs/call; run it alone).
//
//	go test -run '^$' -bench Deployments -benchtime 4000x .
func BenchmarkDeployments(b *testing.B) {
	bin := buildBinary(b)
	for _, d := range []struct {
		name      string
		instances int
		shared    bool
	}{{"sqlite", 1, false}, {"postgres+redis", 1, true}, {"3×postgres+redis", 3, true}} {
		b.Run(d.name, func(b *testing.B) {
			servers, key := deployment(b, bin, d.instances, d.shared)
			for _, kind := range []string{"cached", "uncached"} {
				b.Run(kind, func(b *testing.B) { benchCalls(b, servers, key, kind == "cached") })
			}
		})
	}
}

// deployment starts n instances (on SQLite when not shared, n must then
// be 1) and registers the benchmark's read tools; it returns the
// instances and the admin key.
func deployment(b *testing.B, bin string, n int, shared bool) ([]*server, string) {
	const key = testAdminKey
	tmp := sandboxTraversable(b)
	env := []string{"TOOLBELT_ADMIN_KEY=" + key, "TOOLBELT_LOG_LEVEL=warn"}
	if shared {
		env = append(env, "TOOLBELT_DATABASE_URL="+dbtest.Postgres(b), "TOOLBELT_REDIS_URL="+dbtest.Redis(b))
	}
	var servers []*server
	for i := range n {
		servers = append(servers, start(b, bin, filepath.Join(tmp, strconv.Itoa(i)), append(env, "TOOLBELT_INSTANCE=i"+strconv.Itoa(i))...))
	}
	for name, cacheable := range map[string]bool{"bench_read": true, "bench_read_fresh": false} {
		ttl := 0
		if cacheable {
			ttl = 600000
		}
		def := map[string]any{
			"name": name, "version": "1.0.0", "category": "filesystem",
			"description": "Read a text file of the session's work directory. Input: path. Output: content.",
			"parameters": map[string]any{"type": "object", "required": []any{"path"}, "properties": map[string]any{
				"path": map[string]any{"type": "string"}, "max_bytes": map[string]any{"type": "integer", "minimum": 1}}},
			"security":  map[string]any{"level": "safe", "allowedPaths": []any{"."}},
			"execution": map[string]any{"timeout": 10000, "cacheable": cacheable, "cacheTTL": ttl},
			"runner":    map[string]any{"kind": "builtin", "builtin": "file_read"},
		}
		if code, res := servers[0].post(b, "/api/v1/tools", key, def); code != http.StatusCreated {
			b.Fatalf("register %s: %d %v", name, code, res)
		}
	}
	// Every instance has the file: sessions are per data directory here.
	for _, s := range servers {
		code, res := s.post(b, "/api/v1/calls", key, map[string]any{"tool": "file_write", "session_id": "bench",
			"arguments": map[string]any{"path": "hello.txt", "content": strings.Repeat("Hello from the benchmark.\n", 40)}})
		if code != http.StatusOK || res["success"] != true {
			b.Fatalf("file_write: %d %v", code, res)
		}
	}
	// The other instances see the new tools within a second.
	for _, s := range servers {
		for deadline := time.Now().Add(5 * time.Second); ; {
			code, _ := s.get(b, "/api/v1/tools/bench_read_fresh", key)
			if code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("instance %s does not see the benchmark's tools", s.base)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return servers, key
}

// benchCalls sends b.N calls from 16 clients, round robin over servers.
func benchCalls(b *testing.B, servers []*server, key string, cached bool) {
	const clients = 16
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next, failed atomic.Int64
	lat := make([][]time.Duration, clients)
	pids := make([]int, len(servers))
	for i, s := range servers {
		pids[i] = s.cmd.Process.Pid
	}
	if cached { // warm: the first read computes the result
		body, _ := json.Marshal(map[string]any{"tool": "bench_read", "session_id": "bench", "arguments": map[string]any{"path": "hello.txt"}})
		for _, s := range servers {
			call(client, s.base, key, body)
		}
	}
	serverCPU, sharedCPU := cpuOf(pids...), cpuOf(sharedPIDs()...)
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for {
				k := next.Add(1)
				if k > int64(b.N) {
					return
				}
				args := map[string]any{"path": "hello.txt"}
				tool := "bench_read"
				if !cached {
					tool, args["max_bytes"] = "bench_read_fresh", 100000+k
				}
				body, _ := json.Marshal(map[string]any{"tool": tool, "session_id": "bench", "arguments": args})
				began := time.Now()
				code, hit := call(client, servers[int(k)%len(servers)].base, key, body)
				lat[c] = append(lat[c], time.Since(began))
				if code != http.StatusOK || hit != cached {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(cpuOf(pids...)-serverCPU)/n/1e3, "server-cpu-µs/call")
	b.ReportMetric(float64(cpuOf(sharedPIDs()...)-sharedCPU)/n/1e3, "shared-cpu-µs/call")
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1e3, "p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1e3, "p99-ms")
	}
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d calls did not answer 200 %s", f, b.N, map[bool]string{true: "from the cache", false: "by running"}[cached])
	}
}

// call posts one call and says its status and whether it was a cache hit.
func call(client *http.Client, base, key string, body []byte) (int, bool) {
	req, _ := http.NewRequest("POST", base+"/api/v1/calls", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var res struct {
		Success  bool
		Metadata struct{ Cached bool }
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || !res.Success {
		return -resp.StatusCode, false
	}
	return resp.StatusCode, res.Metadata.Cached
}

// cpuOf is the CPU time, user and system, the processes used so far (with
// the children they waited for), in nanoseconds.
func cpuOf(pids ...int) int64 {
	var total int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime is the
		// 14th field of the line, stime the 15th, cutime and cstime next.
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			total += v
		}
	}
	return total * int64(time.Second) / 100 // USER_HZ is 100 on Linux
}

// sharedPIDs are the machine's postgres and redis-server processes.
func sharedPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if c := strings.TrimSpace(string(comm)); c == "postgres" || c == "redis-server" {
			out = append(out, pid)
		}
	}
	return out
}
