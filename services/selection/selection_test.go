package selection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/internal/leaktest"
	"toolbelt/internal/poll"
	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/catalog"
	"toolbelt/services/embed"
	"toolbelt/services/ops"
)

// countingEmbedder wraps the built-in embedder under a chosen model name
// and counts the texts it embeds.
type countingEmbedder struct {
	model string
	texts atomic.Int64
	inner *embed.Builtin
}

func (c *countingEmbedder) Model() string { return c.model }

func (c *countingEmbedder) Embed(ctx context.Context, kind embed.Kind, texts []string) ([][]float32, error) {
	c.texts.Add(int64(len(texts)))
	return c.inner.Embed(ctx, kind, texts)
}

func newCounting(model string) *countingEmbedder {
	return &countingEmbedder{model: model, inner: embed.NewBuiltin()}
}

func allHost() ops.HostCaps {
	return ops.HostCaps{Chromium: true, Python: true, Node: true, Sandbox: true}
}

// seedCatalog registers n small tools plus the built-ins.
func seedCatalog(t testing.TB, reg *catalog.Registry, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := reg.SeedBuiltins(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		def := testTool(fmt.Sprintf("extra_tool_%03d", i), fmt.Sprintf("Look up record set number %d and report its entries.", i))
		if _, err := reg.Register(ctx, def, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// catalogFixture is a store with the built-ins and n extra tools.
func catalogFixture(t *testing.T, n int) (*models.Store, *access.Authz) {
	t.Helper()
	store, _ := modelstest.Store(t)
	authz, err := access.OpenAuthz(context.Background(), access.AuthzDeps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	seedCatalog(t, catalog.NewRegistry(store, quiet), n)
	return store, authz
}

// newFixtureSelector builds and refreshes a selector over the fixture.
func newFixtureSelector(t *testing.T, store *models.Store, authz *access.Authz, emb embed.Embedder, keep int) *Selector {
	t.Helper()
	s := New(Deps{Store: store, Authz: authz, Embedder: emb, Host: allHost(), KeepLearned: keep, Log: quiet})
	running(t, s.Run)
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSelectorPersistsVectors checks that a restart (a new selector over
// the same database) re-embeds nothing, and that learned queries survive.
func TestSelectorPersistsVectors(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	authz, _ := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	reg := catalog.NewRegistry(store, quiet)
	seedCatalog(t, reg, 20)

	first := newCounting("test/model-a")
	s1 := New(Deps{Store: store, Authz: authz, Embedder: first, Host: allHost(), Log: quiet})
	stop1 := start(s1)
	if err := s1.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := first.texts.Load(); got != 28 {
		t.Fatalf("first start embedded %d texts, want the 28 tools", got)
	}
	res, err := s1.Select(ctx, nil, SelectRequest{Query: "read a text file", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.LearnFromCall(ctx, "s", "file_read"); err != nil {
		t.Fatal(err)
	}

	// Stopping writes the queued selection record.
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	if rec, err := store.SelectionByID(ctx, res.SelectionID); err != nil || rec.SessionID != "s" || rec.Query != res.Query {
		t.Fatalf("selection record after Run ended: %v, %v", rec, err)
	}

	second := newCounting("test/model-a")
	s2 := New(Deps{Store: store, Authz: authz, Embedder: second, Host: allHost(), Log: quiet})
	if err := s2.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := second.texts.Load(); got != 0 {
		t.Errorf("restart embedded %d texts, want none", got)
	}
	qs, err := s2.LearnedQueries(ctx, "file_read")
	if err != nil || len(qs) != 1 || qs[0].Query != res.Query || qs[0].Source != "call" {
		t.Errorf("learned queries after restart: %v, %v", qs, err)
	}
	if s2.learning.queries.Load().live != 1 {
		t.Errorf("learned index after restart holds %d queries", s2.learning.queries.Load().live)
	}
	// A call in a session without a selection teaches nothing.
	if err := s2.LearnFromCall(ctx, "no-such-session", "file_read"); err != nil {
		t.Fatal(err)
	}
	if qs, _ := s2.LearnedQueries(ctx, "file_read"); len(qs) != 1 {
		t.Errorf("a call without a selection was learned: %v", qs)
	}
}

// TestSelectorModelChangeReembeds starts with another model: the catalog
// is re-embedded in the background, with progress, and stored.
func TestSelectorModelChangeReembeds(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	authz, _ := access.OpenAuthz(ctx, access.AuthzDeps{Store: store})
	reg := catalog.NewRegistry(store, quiet)
	seedCatalog(t, reg, 100)
	a := New(Deps{Store: store, Authz: authz, Embedder: newCounting("test/model-a"), Host: allHost(), Log: quiet})
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	b := newCounting("test/model-b")
	sb := New(Deps{Store: store, Authz: authz, Embedder: b, Host: allHost(), Log: quiet})
	running(t, sb.Run)
	if err := sb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// Selection works at once (lexically) while vectors are made.
	if _, err := sb.Select(ctx, nil, SelectRequest{Query: "read a text file"}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 30*time.Second, "background re-embedding finished", func() bool { return !sb.reembed.running.Load() })
	ids := make([]uint, 0)
	tools, _ := store.ActiveTools(ctx)
	for _, tl := range tools {
		ids = append(ids, tl.VersionID)
	}
	stored, err := store.Embeddings(ctx, "test/model-b", ids)
	if err != nil || len(stored) != len(tools) {
		t.Fatalf("stored %d vectors under the new model for %d tools (%v)", len(stored), len(tools), err)
	}
	if sb.reembed.done.Load() != int64(len(tools)) || sb.reembed.total.Load() != int64(len(tools)) {
		t.Errorf("progress %d/%d, want %d", sb.reembed.done.Load(), sb.reembed.total.Load(), len(tools))
	}
}

// TestLearnedCapDropsOldest keeps only the newest queries of a tool.
func TestLearnedCapDropsOldest(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	s := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 3)
	for i := range 5 {
		res, err := s.Select(ctx, nil, SelectRequest{Query: fmt.Sprintf("task number %d about files", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Feedback(ctx, nil, res.SelectionID, []string{"file_read"}); err != nil {
			t.Fatal(err)
		}
	}
	qs, _ := s.LearnedQueries(ctx, "file_read")
	var got []string
	for _, q := range qs {
		got = append(got, q.Query)
	}
	want := []string{"task number 4 about files", "task number 3 about files", "task number 2 about files"}
	if !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if live := s.learning.queries.Load().live; live != 3 {
		t.Errorf("index holds %d learned queries, want 3", live)
	}
	// The same query twice is learned once.
	res, _ := s.Select(ctx, nil, SelectRequest{Query: "task number 4 about files"})
	if learned, err := s.Feedback(ctx, nil, res.SelectionID, []string{"file_read"}); err != nil || len(learned) != 0 {
		t.Errorf("duplicate learned: %v %v", learned, err)
	}
}

// TestSuggest finds real tools for invented names.
func TestSuggest(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	s := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0)
	for _, tc := range []struct{ name, want string }{
		{"read_file", "file_read"},
		{"filewrite", "file_write"},
		{"execute_shell", "shell_exec"},
		{"websearch", "web_search"},
		{"list_files", "file_list"},
	} {
		got, err := s.Suggest(ctx, nil, "", tc.name, 3)
		if err != nil || len(got) == 0 || got[0] != tc.want {
			t.Errorf("Suggest(%s) = %v, %v; want %s first", tc.name, got, err, tc.want)
		}
	}
	// An agent is only pointed at tools it may use.
	agent := &models.Principal{ID: 42, Role: access.RoleAgent}
	if err := authz.SetGrants(42, access.Grants{Categories: []string{"search"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Suggest(ctx, agent, "", "read_file", 3)
	if slices.Contains(got, "file_read") {
		t.Errorf("agent pointed at a tool it may not use: %v", got)
	}
}

// TestFewLearnedQueriesStayFaint checks that when a single tool has learned
// something, queries unlike it are not pulled towards that tool.
func TestFewLearnedQueriesStayFaint(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	s := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0)
	res, _ := s.Select(ctx, nil, SelectRequest{Query: "show the config file"})
	if _, err := s.Feedback(ctx, nil, res.SelectionID, []string{"file_read"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"send a POST request to an API", "http_request"},
		{"list the folders in the project", "file_list"},
	} {
		got, err := s.Select(ctx, nil, SelectRequest{Query: tc.query, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		// Fewer than two tools may pass the default min_score.
		if len(got.Tools) == 0 || got.Tools[0].Name != tc.want || len(got.Tools) > 1 && got.Tools[1].Name == "file_read" {
			t.Errorf("%q: %+v; want %s first and file_read not next", tc.query, got.Tools, tc.want)
		}
	}
}

// failingEmbedder embeds documents but fails every query.
type failingEmbedder struct {
	countingEmbedder
	queries atomic.Int64
}

func (f *failingEmbedder) Embed(ctx context.Context, kind embed.Kind, texts []string) ([][]float32, error) {
	if kind == embed.Query {
		f.queries.Add(1)
		return nil, fmt.Errorf("ollama embed: ollama unreachable at http://127.0.0.1:1")
	}
	return f.inner.Embed(ctx, kind, texts)
}

// TestQueryEmbeddingFailureBacksOff ranks lexically when the embedder
// fails, says so, and does not ask it again for every selection.
func TestQueryEmbeddingFailureBacksOff(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	f := &failingEmbedder{countingEmbedder: countingEmbedder{model: "test/failing", inner: embed.NewBuiltin()}}
	s := newFixtureSelector(t, store, authz, f, 0)
	for range 3 {
		res, err := s.Select(ctx, nil, SelectRequest{Query: "read the contents of a text file", Limit: 1})
		if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "file_read" {
			t.Fatalf("lexical selection: %v %v", res, err)
		}
	}
	if n := f.queries.Load(); n != 1 {
		t.Errorf("the failing embedder was asked %d times, want once (then back off)", n)
	}
	if !s.EmbedFailing() || !strings.Contains(s.Status(), "unreachable") {
		t.Errorf("status does not say query embedding fails: %q", s.Status())
	}
}

// TestSelectionRetention prunes old selection records.
func TestSelectionRetention(t *testing.T) {
	ctx := context.Background()
	store, _ := modelstest.Store(t)
	old := &models.Selection{ID: "old", Query: "q", Tools: ",", CreatedAt: time.Now().Add(-SelectionRetention - time.Hour)}
	fresh := &models.Selection{ID: "fresh", Query: "q", Tools: ",", CreatedAt: time.Now()}
	if err := store.CreateSelections(ctx, []*models.Selection{old, fresh}); err != nil {
		t.Fatal(err)
	}
	// Run prunes as it starts.
	if err := start(New(Deps{Store: store, Embedder: embed.NewBuiltin(), Log: quiet}))(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SelectionByID(ctx, "old"); err == nil {
		t.Error("a selection older than the retention was kept")
	}
	if _, err := store.SelectionByID(ctx, "fresh"); err != nil {
		t.Errorf("a fresh selection was pruned: %v", err)
	}
}

// TestAbsoluteScores checks that scores mean the same for every query: a
// task no tool fits returns nothing and says so, a clear one scores well,
// and min_score is checked and cuts.
func TestAbsoluteScores(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	s := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0)
	for _, tc := range []struct {
		name     string
		req      SelectRequest
		wantTool string // first tool; "" for none
		noGood   bool
		atLeast  int // tools returned
	}{
		{"gibberish", SelectRequest{Query: "xyzzy qwerty"}, "", true, 0},
		{"clear task", SelectRequest{Query: "read the text file config.yaml"}, "file_read", false, 1},
		{"no cut-off returns the limit", SelectRequest{Query: "read the text file config.yaml", MinScore: new(0.0), Limit: 6}, "file_read", false, 6},
		// One tool word among gibberish: the tool comes first, flagged.
		// (One word of three is over the line since the built-in
		// embedder has word vectors: "shell" matches shell_exec in text
		// and in meaning, 0.34.)
		{"gibberish with a known word", SelectRequest{Query: "xyzzy qwerty plugh shell"}, "shell_exec", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Select(ctx, nil, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) < tc.atLeast || tc.wantTool == "" && len(res.Tools) > 0 || tc.wantTool != "" && res.Tools[0].Name != tc.wantTool {
				t.Fatalf("tools %+v; want %q first, at least %d", res.Tools, tc.wantTool, tc.atLeast)
			}
			if res.NoGoodMatch != tc.noGood || tc.noGood != (res.Hint != "") {
				t.Errorf("no_good_match %v, hint %q; want %v", res.NoGoodMatch, res.Hint, tc.noGood)
			}
			for i, sel := range res.Tools {
				if sel.Score < 0 || sel.Score > 1 || i > 0 && sel.Score > res.Tools[i-1].Score {
					t.Errorf("scores not in [0, 1] best first: %+v", res.Tools)
				}
			}
		})
	}
	for _, m := range []float64{-0.1, 1.5} {
		_, err := s.Select(ctx, nil, SelectRequest{Query: "read a file", MinScore: &m})
		if !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), "/min_score") {
			t.Errorf("min_score %v: %v, want a validation error naming /min_score", m, err)
		}
	}
}

// A selector that never runs (a tool, a test) starts no goroutine and
// does its background work in its callers: a selection is recorded when
// it is made, a call observed is learned at once, and a catalog change
// waits for the next selection to refresh the index.
func TestSelectorWithoutRun(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t, 0)
	before := leaktest.Take()
	s := New(Deps{Store: store, Authz: authz, Embedder: embed.NewBuiltin(), Host: allHost(), Log: quiet})
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Select(ctx, nil, SelectRequest{Query: "read the text file config.yaml", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.SelectionByID(ctx, res.SelectionID); err != nil {
		t.Errorf("the selection is not recorded: %v", err)
	}
	s.ObserveCallLater("s", "file_read", "call-1", true, true)
	learned, err := store.LearnedQueries(ctx, "file_read")
	if err != nil || len(learned) != 1 || learned[0].Query != res.Query {
		t.Errorf("learned %+v (%v), want the selection's query", learned, err)
	}
	s.MarkDirty()
	// database/sql watches a transaction on a goroutine that may outlive
	// it for a moment.
	for _, stack := range before.Started("database/sql.") {
		t.Errorf("a goroutine started:\n%s", stack)
	}
	if _, err := s.Select(ctx, nil, SelectRequest{Query: "list files"}); err != nil {
		t.Fatal(err)
	}
}
