package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/ollama/ollama/api"
)

// Defaults for OllamaConfig fields left zero.
const (
	defaultOllamaModel     = "nomic-embed-text"
	defaultOllamaTimeout   = 30 * time.Second
	defaultOllamaRetries   = 3
	defaultOllamaBatchSize = 64
)

// Retry pacing: short enough that a restarting Ollama is picked up quickly,
// capped so a long outage does not stretch one call into minutes.
const (
	ollamaBackoffInitial = 200 * time.Millisecond
	ollamaBackoffMax     = 2 * time.Second
)

// maxServerMessage bounds how much of a server's error body reaches our
// errors, so an HTML page from a proxy does not flood the logs.
const maxServerMessage = 200

// OllamaConfig configures the Ollama embedder.
type OllamaConfig struct {
	URL        string        // base URL, e.g. http://127.0.0.1:11434
	Model      string        // default "nomic-embed-text"
	Timeout    time.Duration // per HTTP request, default 30s
	MaxRetries int           // retries after the first try; 0 means 3, negative means none
	BatchSize  int           // texts per /api/embed request, default 64
	HTTPClient *http.Client  // optional
}

// Ollama embeds texts with a model served by Ollama's /api/embed. It is
// safe for concurrent use.
type Ollama struct {
	client     *api.Client
	base       *url.URL
	model      string
	timeout    time.Duration
	maxRetries int
	batchSize  int

	// dim is the vector dimension of the first good answer; later answers
	// must match it, because vectors of mixed dimensions cannot be compared.
	dim atomic.Int64

	// backoffInitial and backoffMax pace retries; tests shorten them.
	backoffInitial time.Duration
	backoffMax     time.Duration
}

var _ Embedder = (*Ollama)(nil)

// NewOllama checks cfg and fills its defaults. It does not touch the
// network, so a server that is down is reported by Probe or Embed, not here.
func NewOllama(cfg OllamaConfig) (*Ollama, error) {
	raw := strings.TrimSpace(cfg.URL)
	if raw == "" {
		return nil, errors.New("ollama embed: URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("ollama embed: invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("ollama embed: invalid URL %q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("ollama embed: invalid URL %q: missing host", u.Redacted())
	}

	o := &Ollama{
		base:           u,
		model:          strings.TrimSpace(cfg.Model),
		timeout:        cfg.Timeout,
		maxRetries:     cfg.MaxRetries,
		batchSize:      cfg.BatchSize,
		backoffInitial: ollamaBackoffInitial,
		backoffMax:     ollamaBackoffMax,
	}
	if o.model == "" {
		o.model = defaultOllamaModel
	}
	if o.timeout <= 0 {
		o.timeout = defaultOllamaTimeout
	}
	switch {
	case o.maxRetries == 0:
		o.maxRetries = defaultOllamaRetries
	case o.maxRetries < 0:
		o.maxRetries = 0
	}
	if o.batchSize <= 0 {
		o.batchSize = defaultOllamaBatchSize
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// No client-wide timeout: each attempt gets its own deadline.
		hc = &http.Client{}
	}
	o.client = api.NewClient(u, hc)
	return o, nil
}

// Model names the embedder for stored vectors, e.g. "ollama/nomic-embed-text".
func (o *Ollama) Model() string { return "ollama/" + o.model }

// Dim returns the vector dimension learned from the first good answer, or 0
// before any answer, so callers can size storage without a config setting.
func (o *Ollama) Dim() int { return int(o.dim.Load()) }

// Probe embeds one short text so that startup can fail early with a clear
// reason: Ollama unreachable, the model not pulled, or a malformed answer.
func (o *Ollama) Probe(ctx context.Context) error {
	_, err := o.Embed(ctx, Query, []string{"probe"})
	return err
}

// taskPrefix returns the text to put before each input for models trained
// with task prefixes. nomic-embed-text (every tag and version) learned to
// tell queries from documents by "search_query: " and "search_document: ",
// and retrieval is noticeably worse without them; other models get none.
func taskPrefix(model string, kind Kind) string {
	if !strings.HasPrefix(strings.ToLower(model), "nomic-embed-text") {
		return ""
	}
	switch kind {
	case Query:
		return "search_query: "
	case Document:
		return "search_document: "
	}
	return ""
}

// Embed returns one unit-length vector per text, in order. Texts are sent in
// batches of BatchSize; each request is retried on network errors,
// timeouts, 429 and 5xx. Errors carry counts, never the texts.
func (o *Ollama) Embed(ctx context.Context, kind Kind, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return [][]float32{}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ollama embed: %w", err)
	}

	prefix := taskPrefix(o.model, kind)
	batches := (len(texts) + o.batchSize - 1) / o.batchSize
	out := make([][]float32, 0, len(texts))
	for b := range batches {
		start := b * o.batchSize
		end := min(start+o.batchSize, len(texts))
		input := make([]string, end-start)
		for i, t := range texts[start:end] {
			input[i] = prefix + t
		}
		vecs, err := o.embedBatch(ctx, input)
		if err != nil {
			if batches > 1 {
				return nil, fmt.Errorf("ollama embed: batch %d of %d: %w", b+1, batches, err)
			}
			return nil, fmt.Errorf("ollama embed: %w", err)
		}
		for _, v := range vecs {
			out = append(out, Normalize(v))
		}
	}
	return out, nil
}

// embedBatch sends one /api/embed request, retrying what may heal by itself,
// and returns its checked vectors.
func (o *Ollama) embedBatch(ctx context.Context, input []string) ([][]float32, error) {
	truncate := true // an over-long tool description should still embed
	req := &api.EmbedRequest{Model: o.model, Input: input, Truncate: &truncate}

	attempts := 0
	op := func() ([][]float32, error) {
		attempts++
		actx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		resp, err := o.client.Embed(actx, req)
		if err != nil {
			return nil, o.classify(ctx, actx, err)
		}
		if err := o.check(resp.Embeddings, len(input)); err != nil {
			return nil, backoff.Permanent(err)
		}
		return resp.Embeddings, nil
	}
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     o.backoffInitial,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         o.backoffMax,
	}
	vecs, err := backoff.Retry(ctx, op,
		backoff.WithBackOff(bo),
		backoff.WithMaxTries(uint(o.maxRetries)+1),
		backoff.WithMaxElapsedTime(0),
	)
	if err == nil {
		return vecs, nil
	}
	var perm *backoff.PermanentError
	if errors.As(err, &perm) { // Retry unwraps it only when tries remain
		err = perm.Unwrap()
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w (after %d %s)", context.Cause(ctx), attempts, plural(attempts, "attempt"))
	}
	if attempts > 1 {
		return nil, fmt.Errorf("gave up after %d attempts: %w", attempts, err)
	}
	return nil, err
}

// classify turns a client error into a message saying what is wrong, marked
// permanent unless retrying may help. ctx is the caller's context and actx
// the attempt's, which adds the per-request deadline.
func (o *Ollama) classify(ctx, actx context.Context, err error) error {
	if ctx.Err() != nil {
		return backoff.Permanent(context.Cause(ctx))
	}
	host := o.base.Redacted()

	var se api.StatusError
	if errors.As(err, &se) {
		msg := serverMessage(se.ErrorMessage)
		switch {
		case se.StatusCode == http.StatusTooManyRequests:
			return fmt.Errorf("ollama at %s is busy (status 429): %s", host, msg)
		case se.StatusCode >= 500:
			return fmt.Errorf("ollama at %s failed (status %d): %s", host, se.StatusCode, msg)
		case se.StatusCode == http.StatusNotFound:
			return backoff.Permanent(fmt.Errorf(
				"model %q not found at %s; pull it with `ollama pull %s` (status 404: %s)",
				o.model, host, o.model, msg))
		default:
			return backoff.Permanent(fmt.Errorf("ollama at %s rejected the request (status %d): %s", host, se.StatusCode, msg))
		}
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		return backoff.Permanent(fmt.Errorf("ollama at %s refused access (status %d)", host, ae.StatusCode))
	}

	var ne net.Error
	if errors.Is(actx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("timeout: no answer from ollama at %s within %s: %w", host, o.timeout, err)
	}

	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return backoff.Permanent(fmt.Errorf("bad answer from ollama at %s: %w", host, err))
	}

	var ue *url.Error
	if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("ollama unreachable at %s: %w", host, err)
	}
	return backoff.Permanent(fmt.Errorf("ollama at %s: %w", host, err))
}

// check validates an answer for n texts: one vector each, one non-zero
// dimension shared by all (and by every earlier answer), finite values.
// The first good answer fixes Dim.
func (o *Ollama) check(vecs [][]float32, n int) error {
	dim, err := checkVectors(vecs, n)
	if err != nil {
		return err
	}
	if o.dim.CompareAndSwap(0, int64(dim)) {
		return nil
	}
	if want := o.dim.Load(); int64(dim) != want {
		return fmt.Errorf("bad answer: dimension %d, expected %d", dim, want)
	}
	return nil
}

// checkVectors returns the common dimension of vecs or says what is wrong
// with them, naming only counts and positions.
func checkVectors(vecs [][]float32, n int) (int, error) {
	if len(vecs) != n {
		return 0, fmt.Errorf("bad answer: ollama returned %d %s for %d %s",
			len(vecs), plural(len(vecs), "vector"), n, plural(n, "text"))
	}
	dim := 0
	for i, v := range vecs {
		if len(v) == 0 {
			return 0, fmt.Errorf("bad answer: vector %d of %d is empty", i+1, n)
		}
		if i == 0 {
			dim = len(v)
		} else if len(v) != dim {
			return 0, fmt.Errorf("bad answer: vector %d of %d has dimension %d, expected %d", i+1, n, len(v), dim)
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return 0, fmt.Errorf("bad answer: vector %d of %d has a NaN or infinite value", i+1, n)
			}
		}
	}
	return dim, nil
}

// serverMessage trims an error body for inclusion in our errors.
func serverMessage(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "no message"
	}
	if r := []rune(s); len(r) > maxServerMessage {
		return string(r[:maxServerMessage]) + "…"
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
