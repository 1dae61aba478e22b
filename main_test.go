package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"toolbelt/internal/dbtest"
	"toolbelt/internal/testlog"
)

// server is the real binary running on a free loopback port.
type server struct {
	cmd *exec.Cmd
	mu  sync.Mutex // guards out, which the reader goroutine appends to
	out strings.Builder
	// log is what the server logged (its stderr).
	log    *testlog.Buffer
	base   string
	key    string
	exited chan error
}

var (
	baseRE = regexp.MustCompile(`running on (http://\S+)`)
	keyRE  = regexp.MustCompile(`^    (tb_[0-9a-f]{64})$`)
)

// output is what the server printed so far.
func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// built is the binary the tests run, built once for the test process
// (each test building its own cost a link of the whole server each).
var built struct {
	once sync.Once
	dir  string // removed by TestMain
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := dbtest.Run(m)
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// testAdminKey is the admin key the tests configure: made by openssl rand
// -hex 32, as the server asks (it refuses a guessable one).
const testAdminKey = "865b43a719263cf63c51fb21bbdf7264e681e9f5255b01e11b0d537e66f2225a"

// testOAuthKey is the TOOLBELT_OAUTH_KEY every server a test starts
// shares unless the test sets its own: the instances of a cluster must
// (the deploy manifests set one), or the second cannot read the signing
// key the first stored.
const testOAuthKey = "0f6a2c5e9b1d4f7a8c3e6b9d2f5a8c1e4b7d0a3f6c9e2b5d8a1c4f7e0b3d6a9c"

// testVaultKey is the TOOLBELT_VAULT_KEY every server a test starts
// shares, for the same reason: an instance whose key does not open what
// the first sealed refuses to start.
const testVaultKey = "b565aea2f129689bca35e875ab15b3799448fc5f04459a345ab4bc179fab5b9e"

// buildBinary returns the path of the server binary, built on the first
// call. The tests only run it: each gives it data directories of its own.
func buildBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "toolbelt-bin-")
		if built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "toolbelt")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// start runs the binary and waits until it prints its URLs.
func start(t testing.TB, bin, dataDir string, env ...string) *server {
	t.Helper()
	return startWithTools(t, bin, dataDir, "", env...)
}

// startWithTools is start with toolsDir as the tool files directory.
func startWithTools(t testing.TB, bin, dataDir, toolsDir string, env ...string) *server {
	t.Helper()
	s := &server{exited: make(chan error, 1)}
	// No tool files unless a test brings its own (the repository's
	// tools.d holds examples).
	s.cmd = exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--tools-dir", toolsDir)
	s.cmd.Env = append(append(os.Environ(), "TOOLBELT_OAUTH_KEY="+testOAuthKey, "TOOLBELT_VAULT_KEY="+testVaultKey), env...)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.log = &testlog.Buffer{}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); <-s.exited })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.out.WriteString(line + "\n")
			s.mu.Unlock()
			if m := baseRE.FindStringSubmatch(line); m != nil {
				s.base = m[1]
			}
			if m := keyRE.FindStringSubmatch(line); m != nil {
				s.key = m[1]
			}
			if strings.Contains(line, "Readiness") && !signalled {
				signalled = true
				close(ready)
			}
		}
		s.exited <- s.cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-s.exited:
		s.exited <- err
		t.Fatalf("server exited before it was ready: %v\n%s", err, s.output())
	case <-time.After(30 * time.Second):
		t.Fatalf("server not ready after 30 s:\n%s", s.output())
	}
	return s
}

func (s *server) get(t testing.TB, path, key string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func (s *server) stop(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		s.exited <- err
		if err != nil {
			t.Fatalf("server did not exit cleanly on SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop within 20 s of SIGTERM")
	}
}

// TestServeFirstStartAndRestart runs the binary as `make run` does: the
// first start creates the database, seeds the built-in tools and prints an
// admin key once; a restart keeps everything and prints no key.
func TestServeFirstStartAndRestart(t *testing.T) {
	t.Parallel() // its own server, data directory and database
	bin := buildBinary(t)
	tmp := t.TempDir()
	// As root, sandboxed commands run as uid 65534, which must traverse
	// the directories above the data directory (t.TempDir's are private).
	for _, p := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(tmp, "data")

	s := start(t, bin, data)
	if s.key == "" || !strings.HasPrefix(s.key, "tb_") {
		t.Fatalf("no admin key printed:\n%s", s.output())
	}
	for _, want := range []string{"/swagger/index.html", "/healthz", "/readyz", "/api/v1"} {
		if !strings.Contains(s.output(), want) {
			t.Errorf("start-up output lacks %s:\n%s", want, s.output())
		}
	}
	if _, err := os.Stat(filepath.Join(data, "toolbelt.db")); err != nil {
		t.Fatalf("database not created: %v", err)
	}
	if code, body := s.get(t, "/healthz", ""); code != 200 || body["status"] != "ok" {
		t.Fatalf("healthz: %d %v", code, body)
	}
	if code, body := s.get(t, "/api/v1/me", s.key); code != 200 || body["role"] != "admin" {
		t.Fatalf("admin key: %d %v", code, body)
	}
	// The probed sandbox is reported and runs code end to end.
	_, ready := s.get(t, "/readyz", "")
	box := ready["components"].(map[string]any)["sandbox"].(map[string]any)
	if box["status"] == "ok" || os.Getenv("CI") == "true" {
		if box["status"] != "ok" {
			t.Fatalf("no sandbox in CI: %v", box)
		}
		req, _ := http.NewRequest("POST", s.base+"/api/v1/calls", strings.NewReader(`{"tool":"code_execute","arguments":{"language":"python","code":"print(6 * 7)"}}`))
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), `"stdout":"42\n"`) {
			t.Errorf("code_execute through the server: %s", raw)
		}
	}
	// The data directory and the database are the server's alone.
	if box["status"] == "ok" && strings.HasPrefix(box["detail"].(string), "bubblewrap") {
		if !strings.Contains(box["detail"].(string), "seccomp: deny") {
			t.Errorf("/readyz does not state the seccomp filter: %v", box)
		}
		dataMode := os.FileMode(0o700)
		if os.Geteuid() == 0 {
			dataMode = 0o710 // root:65534, for the sandbox's group to traverse
		}
		for p, want := range map[string]os.FileMode{data: dataMode, filepath.Join(data, "toolbelt.db"): 0o600} {
			if info, err := os.Stat(p); err != nil || info.Mode().Perm() != want {
				t.Errorf("%s: %v %v, want %v", p, info.Mode().Perm(), err, want)
			}
		}
	}
	code, body := s.get(t, "/api/v1/tools", s.key)
	if code != 200 || body["total"] != float64(8) {
		t.Fatalf("built-in tools: %d %v", code, body["total"])
	}
	key := s.key
	s.stop(t)

	s = start(t, bin, data)
	if strings.Contains(s.output(), "Admin API key") {
		t.Errorf("restart printed a new admin key:\n%s", s.output())
	}
	if code, _ := s.get(t, "/api/v1/me", key); code != 200 {
		t.Errorf("admin key after restart: %d", code)
	}
	if _, body := s.get(t, "/api/v1/tools", key); body["total"] != float64(8) {
		t.Errorf("tools after restart: %v (seeded twice?)", body["total"])
	}
	s.stop(t)
}

// TestServeAdminKeyFromEnvironment uses TOOLBELT_ADMIN_KEY, and refuses a
// short or guessable one, or the Kubernetes example's placeholder, before
// touching anything, saying why.
func TestServeAdminKeyFromEnvironment(t *testing.T) {
	t.Parallel() // its own server, data directory and database
	bin := buildBinary(t)
	chosen := testAdminKey
	s := start(t, bin, filepath.Join(t.TempDir(), "data"), "TOOLBELT_ADMIN_KEY="+chosen)
	if code, body := s.get(t, "/api/v1/me", chosen); code != 200 || body["role"] != "admin" {
		t.Fatalf("TOOLBELT_ADMIN_KEY: %d %v", code, body)
	}
	if strings.Contains(s.output(), chosen) || s.key != "" {
		t.Errorf("the operator's key was printed:\n%s", s.output())
	}
	s.stop(t)

	for key, want := range map[string]string{
		"short":                                "TOOLBELT_ADMIN_KEY is too easy to guess",
		"operator-chosen-admin-key-0123456789": "TOOLBELT_ADMIN_KEY is too easy to guess",
		"CHANGE-ME-TO-A-LONG-RANDOM-ADMIN-KEY": `TOOLBELT_ADMIN_KEY is a placeholder (it contains "changeme"), not a key`,
	} {
		data := filepath.Join(t.TempDir(), "d")
		cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", data)
		cmd.Env = append(os.Environ(), "TOOLBELT_ADMIN_KEY="+key)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "openssl rand -hex 32") {
			t.Errorf("TOOLBELT_ADMIN_KEY=%s was not refused saying %q: %v\n%s", key, want, err, out)
		}
		if strings.Contains(string(out), key) {
			t.Errorf("the refusal repeats the key:\n%s", out)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("TOOLBELT_ADMIN_KEY=%s: the data directory was made before the refusal (%v)", key, err)
		}
	}
}

// fakeOllama speaks Ollama's /api/embed with deterministic vectors and
// counts the documents it embedded.
func fakeOllama(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var docs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/embed" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		if req.Model != "nomic-embed-text" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":"model %q not found, try pulling it first"}`, req.Model)
			return
		}
		out := make([][]float32, len(req.Input))
		for i, text := range req.Input {
			if strings.HasPrefix(text, "search_document: ") {
				docs.Add(1)
			}
			v := make([]float32, 16)
			for _, w := range strings.Fields(strings.ToLower(text)) {
				h := fnv.New32a()
				h.Write([]byte(w))
				v[h.Sum32()%16] += 1
			}
			out[i] = v
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "embeddings": out})
	}))
	t.Cleanup(srv.Close)
	return srv, &docs
}

func (s *server) post(t testing.TB, path, key string, body any) (int, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(string(raw)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // Error, not Fatal: posts also run in goroutines
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func embedderComponent(t *testing.T, s *server) map[string]any {
	t.Helper()
	_, ready := s.get(t, "/readyz", "")
	return ready["components"].(map[string]any)["embedder"].(map[string]any)
}

// TestServeWithOllama runs the binary against an Ollama-speaking server:
// the catalog is embedded once, a restart embeds nothing again, and
// selection uses the model.
func TestServeWithOllama(t *testing.T) {
	t.Parallel() // its own server, data directory and database
	bin := buildBinary(t)
	ollama, docs := fakeOllama(t)
	data := filepath.Join(t.TempDir(), "data")
	chosen := testAdminKey
	env := []string{"TOOLBELT_OLLAMA_URL=" + ollama.URL, "TOOLBELT_ADMIN_KEY=" + chosen}

	s := start(t, bin, data, env...)
	emb := embedderComponent(t, s)
	if emb["status"] != "ok" || !strings.Contains(emb["detail"].(string), "ollama/nomic-embed-text") {
		t.Fatalf("embedder: %v", emb)
	}
	if got := docs.Load(); got != 8 {
		t.Fatalf("first start embedded %d documents, want the 8 built-in tools", got)
	}
	code, res := s.post(t, "/api/v1/tools/select", chosen, map[string]any{"query": "read a file", "limit": 3})
	if code != 200 || res["embedder"] != "ollama/nomic-embed-text" || len(res["tools"].([]any)) != 3 {
		t.Fatalf("select: %d %v", code, res)
	}
	s.stop(t)

	s = start(t, bin, data, env...)
	if got := docs.Load(); got != 8 {
		t.Errorf("restart embedded %d documents in all, want still 8", got)
	}
	s.stop(t)
}

// TestServeOllamaDown falls back to the built-in embedder and says so.
func TestServeOllamaDown(t *testing.T) {
	t.Parallel() // its own server, data directory and database
	bin := buildBinary(t)
	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL
	down.Close()
	s := start(t, bin, filepath.Join(t.TempDir(), "data"), "TOOLBELT_OLLAMA_URL="+url)
	emb := embedderComponent(t, s)
	detail, _ := emb["detail"].(string)
	if emb["status"] != "degraded" || !strings.Contains(detail, "builtin/") || !strings.Contains(detail, "unreachable") {
		t.Fatalf("embedder with Ollama down: %v", emb)
	}
	if code, res := s.post(t, "/api/v1/tools/select", s.key, map[string]any{"query": "read a file"}); code != 200 || !strings.HasPrefix(res["embedder"].(string), "builtin/") {
		t.Errorf("select with Ollama down: %d %v", code, res)
	}
	s.stop(t)
}
