package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// secret marks test texts; no error may contain it.
const secret = "s3cret-patient-record"

// fakeOllama speaks Ollama's /api/embed: it decodes the real request and
// answers with vectors derived from each input's hash, so tests can check
// order and prefixes from the vectors alone.
type fakeOllama struct {
	models map[string]bool // pulled models, without ":latest"
	dim    atomic.Int64

	// fail, when set, may turn request n (1-based) into an error answer.
	fail func(n int64) (status int, msg string)
	// mangle, when set, edits the vectors before they are sent.
	mangle func([][]float32) [][]float32
	// raw, when set, is sent as the 200 body instead of a real answer.
	raw string
	// hang makes every request wait until the client gives up.
	hang bool

	requests atomic.Int64
	mu       sync.Mutex
	inputs   [][]string // each request's input, in arrival order
}

func newFake(t *testing.T, models ...string) (*fakeOllama, *httptest.Server) {
	t.Helper()
	f := &fakeOllama{models: map[string]bool{}}
	for _, m := range models {
		f.models[m] = true
	}
	f.dim.Store(8)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeOllama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/embed" {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		writeOllamaError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	n := f.requests.Add(1)

	var req struct {
		Model    string          `json:"model"`
		Input    json.RawMessage `json:"input"`
		Truncate *bool           `json:"truncate"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeOllamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	var input []string
	if err := json.Unmarshal(req.Input, &input); err != nil {
		var one string // Ollama also accepts a single string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			writeOllamaError(w, http.StatusBadRequest, "invalid input type")
			return
		}
		input = []string{one}
	}
	f.mu.Lock()
	f.inputs = append(f.inputs, input)
	f.mu.Unlock()

	if f.hang {
		<-r.Context().Done()
		return
	}
	if f.fail != nil {
		if status, msg := f.fail(n); status != 0 {
			writeOllamaError(w, status, msg)
			return
		}
	}
	if !f.models[strings.TrimSuffix(req.Model, ":latest")] {
		writeOllamaError(w, http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", req.Model))
		return
	}
	if f.raw != "" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, f.raw)
		return
	}
	vecs := make([][]float32, len(input))
	for i, s := range input {
		vecs[i] = fakeVector(s, int(f.dim.Load()))
	}
	if f.mangle != nil {
		vecs = f.mangle(vecs)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "embeddings": vecs})
}

func (f *fakeOllama) received() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.inputs...)
}

func writeOllamaError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// fakeVector derives a deterministic, unnormalized vector from text.
func fakeVector(text string, dim int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	v := make([]float32, dim)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}

// newTestOllama builds an embedder whose retries wait milliseconds, not
// the production hundreds of milliseconds.
func newTestOllama(t *testing.T, cfg OllamaConfig) *Ollama {
	t.Helper()
	o, err := NewOllama(cfg)
	if err != nil {
		t.Fatalf("NewOllama: %v", err)
	}
	o.backoffInitial = time.Millisecond
	o.backoffMax = 2 * time.Millisecond
	return o
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s text %d", secret, i)
	}
	return out
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want one containing %q", want)
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	if !strings.HasPrefix(msg, "ollama embed: ") {
		t.Errorf("err = %q, want prefix %q", msg, "ollama embed: ")
	}
	if !strings.Contains(msg, want) {
		t.Errorf("err = %q, want it to contain %q", msg, want)
	}
	if strings.Contains(msg, secret) {
		t.Errorf("err = %q leaks the input text", msg)
	}
}

func TestOllamaEmbed(t *testing.T) {
	tests := []struct {
		name       string
		model      string
		kind       Kind
		n          int
		batchSize  int
		wantReqs   int
		wantPrefix string
	}{
		{"nomic documents in three batches", "nomic-embed-text", Document, 150, 64, 3, "search_document: "},
		{"nomic query", "nomic-embed-text", Query, 1, 0, 1, "search_query: "},
		{"nomic with a tag", "nomic-embed-text:v1.5", Query, 2, 0, 1, "search_query: "},
		{"other model has no prefix", "all-minilm", Document, 5, 2, 3, ""},
		{"exactly one full batch", "mxbai-embed-large", Query, 64, 64, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t, tt.model)
			o := newTestOllama(t, OllamaConfig{URL: srv.URL, Model: tt.model, BatchSize: tt.batchSize})
			in := texts(tt.n)

			got, err := o.Embed(context.Background(), tt.kind, in)
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if len(got) != tt.n {
				t.Fatalf("got %d vectors, want %d", len(got), tt.n)
			}
			if reqs := f.requests.Load(); reqs != int64(tt.wantReqs) {
				t.Errorf("requests = %d, want %d", reqs, tt.wantReqs)
			}
			var sent []string
			for _, batch := range f.received() {
				if len(batch) > o.batchSize {
					t.Errorf("batch of %d texts, limit %d", len(batch), o.batchSize)
				}
				sent = append(sent, batch...)
			}
			for i, s := range in {
				if want := tt.wantPrefix + s; sent[i] != want {
					t.Fatalf("input %d sent as %q, want %q", i, sent[i], want)
				}
				want := Normalize(fakeVector(tt.wantPrefix+s, 8))
				for j := range want {
					if math.Abs(float64(got[i][j]-want[j])) > 1e-6 {
						t.Fatalf("vector %d differs from the one for its text: out of order?", i)
					}
				}
				if norm := math.Sqrt(float64(Dot(got[i], got[i]))); math.Abs(norm-1) > 1e-5 {
					t.Errorf("vector %d has length %v, want 1", i, norm)
				}
			}
			if o.Dim() != 8 {
				t.Errorf("Dim = %d, want 8", o.Dim())
			}
			if want := "ollama/" + tt.model; o.Model() != want {
				t.Errorf("Model = %q, want %q", o.Model(), want)
			}
		})
	}
}

func TestOllamaEmbedEmpty(t *testing.T) {
	f, srv := newFake(t, "nomic-embed-text")
	o := newTestOllama(t, OllamaConfig{URL: srv.URL})
	for _, in := range [][]string{nil, {}} {
		got, err := o.Embed(context.Background(), Query, in)
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("Embed(%v) = %v, %v; want empty, nil", in, got, err)
		}
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("requests = %d, want 0", n)
	}
	if o.Dim() != 0 {
		t.Errorf("Dim = %d before any answer, want 0", o.Dim())
	}
}

func TestOllamaRetries(t *testing.T) {
	failFirst := func(k int64, status int, msg string) func(int64) (int, string) {
		return func(n int64) (int, string) {
			if n <= k {
				return status, msg
			}
			return 0, ""
		}
	}
	tests := []struct {
		name         string
		model        string // default nomic-embed-text, which the fake has
		maxRetries   int
		fail         func(int64) (int, string)
		wantErr      string // "" for success
		wantAttempts int64
	}{
		{name: "500 then success", fail: failFirst(1, 500, "llama runner process has terminated"), wantAttempts: 2},
		{name: "429 then success", fail: failFirst(1, 429, "server busy, please try again"), wantAttempts: 2},
		{name: "two 503 then success", fail: failFirst(2, 503, "server busy"), wantAttempts: 3},
		{
			name: "503 until retries run out", fail: failFirst(100, 503, "server busy"),
			wantErr: "gave up after 4 attempts", wantAttempts: 4,
		},
		{
			name: "no retries when negative", maxRetries: -1, fail: failFirst(100, 503, "server busy"),
			wantErr: "status 503", wantAttempts: 1,
		},
		{
			name: "model not pulled is permanent", model: "bge-m3",
			wantErr: "`ollama pull bge-m3`", wantAttempts: 1,
		},
		{
			name: "400 is permanent", fail: failFirst(100, 400, "input length exceeds the context length"),
			wantErr: "rejected the request (status 400): input length exceeds", wantAttempts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t, "nomic-embed-text")
			f.fail = tt.fail
			o := newTestOllama(t, OllamaConfig{URL: srv.URL, Model: tt.model, MaxRetries: tt.maxRetries})

			got, err := o.Embed(context.Background(), Document, texts(3))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Embed: %v", err)
				}
				if len(got) != 3 {
					t.Errorf("got %d vectors, want 3", len(got))
				}
			} else {
				checkErr(t, err, tt.wantErr)
			}
			if n := f.requests.Load(); n != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", n, tt.wantAttempts)
			}
		})
	}
}

func TestOllamaTimeout(t *testing.T) {
	f, srv := newFake(t, "nomic-embed-text")
	f.hang = true
	o := newTestOllama(t, OllamaConfig{URL: srv.URL, Timeout: 100 * time.Millisecond, MaxRetries: 1})

	_, err := o.Embed(context.Background(), Query, texts(1))
	checkErr(t, err, "timeout")
	if n := f.requests.Load(); n != 2 {
		t.Errorf("attempts = %d, want 2 (timeouts are retried)", n)
	}
}

func TestOllamaBadAnswers(t *testing.T) {
	tests := []struct {
		name    string
		mangle  func([][]float32) [][]float32
		raw     string
		wantErr string
	}{
		{
			name:    "too few vectors",
			mangle:  func(v [][]float32) [][]float32 { return v[:2] },
			wantErr: "ollama returned 2 vectors for 3 texts",
		},
		{
			name:    "no vectors",
			mangle:  func([][]float32) [][]float32 { return nil },
			wantErr: "ollama returned 0 vectors for 3 texts",
		},
		{
			name:    "mixed dimensions",
			mangle:  func(v [][]float32) [][]float32 { v[2] = v[2][:4]; return v },
			wantErr: "vector 3 of 3 has dimension 4, expected 8",
		},
		{
			name:    "empty vector",
			mangle:  func(v [][]float32) [][]float32 { v[1] = []float32{}; return v },
			wantErr: "vector 2 of 3 is empty",
		},
		{
			name:    "not JSON",
			raw:     "<html>proxy error</html>",
			wantErr: "bad answer",
		},
		{
			name:    "wrong JSON type",
			raw:     `{"embeddings":[["a"]]}`,
			wantErr: "bad answer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t, "nomic-embed-text")
			f.mangle, f.raw = tt.mangle, tt.raw
			o := newTestOllama(t, OllamaConfig{URL: srv.URL})

			_, err := o.Embed(context.Background(), Document, texts(3))
			checkErr(t, err, tt.wantErr)
			if n := f.requests.Load(); n != 1 {
				t.Errorf("attempts = %d, want 1 (bad answers are not retried)", n)
			}
			if o.Dim() != 0 {
				t.Errorf("Dim = %d after a bad answer, want 0", o.Dim())
			}
		})
	}
}

func TestOllamaDimensionChange(t *testing.T) {
	f, srv := newFake(t, "nomic-embed-text")
	o := newTestOllama(t, OllamaConfig{URL: srv.URL})
	if _, err := o.Embed(context.Background(), Document, texts(2)); err != nil {
		t.Fatalf("first Embed: %v", err)
	}
	f.dim.Store(4) // someone swapped the model behind the same name
	_, err := o.Embed(context.Background(), Document, texts(2))
	checkErr(t, err, "dimension 4, expected 8")
	if o.Dim() != 8 {
		t.Errorf("Dim = %d, want 8", o.Dim())
	}
}

func TestCheckVectors(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name    string
		vecs    [][]float32
		n       int
		wantDim int
		wantErr string
	}{
		{"good", [][]float32{{1, 2}, {3, 4}}, 2, 2, ""},
		{"count", [][]float32{{1, 2}}, 2, 0, "returned 1 vector for 2 texts"},
		{"NaN", [][]float32{{1, 2}, {nan, 4}}, 2, 0, "vector 2 of 2 has a NaN or infinite value"},
		{"Inf", [][]float32{{inf, 2}}, 1, 0, "vector 1 of 1 has a NaN or infinite value"},
		{"dimension", [][]float32{{1, 2, 3}, {3, 4}}, 2, 0, "dimension 2, expected 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dim, err := checkVectors(tt.vecs, tt.n)
			if tt.wantErr == "" {
				if err != nil || dim != tt.wantDim {
					t.Fatalf("checkVectors = %d, %v; want %d, nil", dim, err, tt.wantDim)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkVectors err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestOllamaProbe(t *testing.T) {
	_, up := newFake(t, "nomic-embed-text")
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	tests := []struct {
		name    string
		url     string
		model   string
		wantErr string
	}{
		{"healthy", up.URL, "", ""},
		{"server down", downURL, "", "unreachable"},
		{"model not pulled", up.URL, "snowflake-arctic-embed", "`ollama pull snowflake-arctic-embed`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newTestOllama(t, OllamaConfig{URL: tt.url, Model: tt.model, MaxRetries: 1})
			err := o.Probe(context.Background())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Probe: %v", err)
				}
				if o.Dim() != 8 {
					t.Errorf("Dim after Probe = %d, want 8", o.Dim())
				}
				return
			}
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestOllamaContextCancelled(t *testing.T) {
	t.Run("before the call", func(t *testing.T) {
		f, srv := newFake(t, "nomic-embed-text")
		o := newTestOllama(t, OllamaConfig{URL: srv.URL})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := o.Embed(ctx, Query, texts(1))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		checkErr(t, err, "canceled")
		if n := f.requests.Load(); n != 0 {
			t.Errorf("requests = %d, want 0", n)
		}
	})
	t.Run("during a request", func(t *testing.T) {
		f, srv := newFake(t, "nomic-embed-text")
		f.hang = true
		o := newTestOllama(t, OllamaConfig{URL: srv.URL}) // 30s timeout: only ctx can end it
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := o.Embed(ctx, Query, texts(1))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		checkErr(t, err, "canceled")
		if n := f.requests.Load(); n != 1 {
			t.Errorf("requests = %d, want 1 (no retry after cancel)", n)
		}
	})
	t.Run("while waiting to retry", func(t *testing.T) {
		f, srv := newFake(t, "nomic-embed-text")
		f.fail = func(int64) (int, string) { return 503, "server busy" }
		o := newTestOllama(t, OllamaConfig{URL: srv.URL, MaxRetries: 100})
		o.backoffInitial, o.backoffMax = time.Hour, time.Hour
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := o.Embed(ctx, Query, texts(1))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if n := f.requests.Load(); n != 1 {
			t.Errorf("requests = %d, want 1", n)
		}
	})
}

func TestNewOllama(t *testing.T) {
	bad := []string{
		"",
		"ftp://127.0.0.1:11434",
		"http://",
		"http:///api",
		"127.0.0.1:11434",
		"localhost:11434",
		"garbage",
		"http://[::1",
		"://nohost",
	}
	for _, u := range bad {
		t.Run("rejects "+u, func(t *testing.T) {
			if o, err := NewOllama(OllamaConfig{URL: u}); err == nil {
				t.Fatalf("NewOllama(%q) = %+v, want error", u, o)
			} else if !strings.HasPrefix(err.Error(), "ollama embed: ") {
				t.Errorf("err = %q, want prefix %q", err, "ollama embed: ")
			}
		})
	}

	type settings struct {
		model      string
		timeout    time.Duration
		maxRetries int
		batchSize  int
	}
	tests := []struct {
		name string
		cfg  OllamaConfig
		want settings
	}{
		{
			name: "defaults",
			cfg:  OllamaConfig{URL: "http://127.0.0.1:11434"},
			want: settings{model: "nomic-embed-text", timeout: 30 * time.Second, maxRetries: 3, batchSize: 64},
		},
		{
			name: "explicit",
			cfg: OllamaConfig{URL: "https://gpu.internal/ollama", Model: "all-minilm",
				Timeout: time.Second, MaxRetries: 5, BatchSize: 8, HTTPClient: &http.Client{}},
			want: settings{model: "all-minilm", timeout: time.Second, maxRetries: 5, batchSize: 8},
		},
		{
			name: "negative retries mean none",
			cfg:  OllamaConfig{URL: "http://localhost:11434", MaxRetries: -1},
			want: settings{model: "nomic-embed-text", timeout: 30 * time.Second, maxRetries: 0, batchSize: 64},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := NewOllama(tt.cfg)
			if err != nil {
				t.Fatalf("NewOllama: %v", err)
			}
			got := settings{o.model, o.timeout, o.maxRetries, o.batchSize}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestTaskPrefix(t *testing.T) {
	tests := []struct {
		model string
		kind  Kind
		want  string
	}{
		{"nomic-embed-text", Query, "search_query: "},
		{"nomic-embed-text", Document, "search_document: "},
		{"nomic-embed-text:latest", Query, "search_query: "},
		{"nomic-embed-text-v2-moe", Document, "search_document: "},
		{"all-minilm", Query, ""},
		{"mxbai-embed-large", Document, ""},
	}
	for _, tt := range tests {
		if got := taskPrefix(tt.model, tt.kind); got != tt.want {
			t.Errorf("taskPrefix(%q, %d) = %q, want %q", tt.model, tt.kind, got, tt.want)
		}
	}
}
