package selection

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"toolbelt/models"
	"toolbelt/services/access"
	"toolbelt/services/formats"
	"toolbelt/services/tooldef"
)

// SelectRequest asks which tools fit a task.
type SelectRequest struct {
	// Query is the task, as long as the agent has it (a system prompt
	// followed by the request, say); Messages the conversation, in the
	// LLM APIs' chat format. One of them is needed.
	Query             string    `json:"query" example:"summarise the CSV files in this folder"`
	Messages          []Message `json:"messages,omitempty"`
	SessionID         string    `json:"session_id,omitempty" example:"run-42"`
	Limit             int       `json:"limit,omitempty" example:"12"`
	Categories        []string  `json:"categories,omitempty"`
	ExcludeCategories []string  `json:"exclude_categories,omitempty"`
	Format            string    `json:"format,omitempty" example:"openai" enums:"openai,openai_responses,anthropic,gemini,mcp"`
	// MinScore drops tools scoring less (0 to 1; default DefaultMinScore).
	MinScore *float64 `json:"min_score,omitempty" example:"0.05" minimum:"0" maximum:"1"`
	// task is Query and Messages as ranked (checkRequest composes it).
	task task
}

// Selected is one chosen tool with why it was chosen.
type Selected struct {
	Name          string `json:"name" example:"file_list"`
	Category      string `json:"category" example:"filesystem"`
	SecurityLevel string `json:"security_level" example:"safe"`
	// Score is the tool's relevance, 0 to 1 on the same scale for every
	// query (docs/selection.md#scores).
	Score   float64         `json:"score" example:"0.72"`
	Reasons Reasons         `json:"reasons"`
	Tool    json.RawMessage `json:"tool" swaggertype:"object"`
}

// Reasons explains a tool's rank.
type Reasons struct {
	DenseSimilarity float64  `json:"dense_similarity" example:"0.42"`
	DenseRank       int      `json:"dense_rank,omitempty" example:"3"`
	LexicalScore    float64  `json:"lexical_score" example:"7.1"`
	LexicalRank     int      `json:"lexical_rank,omitempty" example:"1"`
	MatchedTerms    []string `json:"matched_terms"`
	LearnedQueries  []string `json:"learned_queries,omitempty"`
	// Intent is the part of the task the tool answers, when the task asks
	// for several things (docs/selection.md#tasks-of-several-intents);
	// absent when it answers the task as a whole. The scores, ranks and
	// matched terms are then those of the tool's ranking for that part.
	Intent string `json:"intent,omitempty" example:"convert the price to euros"`
}

// IntentMatch is one part of a task that asks for something of its own,
// as a selection found it.
type IntentMatch struct {
	Text string `json:"text" example:"convert the price to euros"`
	// Tools are the selected tools that answer it, in the selection's
	// order: none when no tool matches it well, which says this part of
	// the task may have no tool.
	Tools []string `json:"tools" example:"convert_currency"`
	// BestScore is the best score of any tool for this part alone.
	BestScore float64 `json:"best_score" example:"0.71"`
}

// TokenEstimate compares the selection's size with the whole catalog the
// caller may see, in the requested format (about four characters a token).
type TokenEstimate struct {
	Selection int     `json:"selection" example:"1450"`
	Catalog   int     `json:"catalog" example:"48200"`
	Saved     float64 `json:"saved_ratio" example:"0.97"`
}

// SelectResult answers a selection.
type SelectResult struct {
	SelectionID string `json:"selection_id" example:"9f2c4e1a7b3d5f60"`
	// Query is the focus ranked at full weight: the query, or the last
	// user message, cut to its last paragraphs (FocusChars); ContextChars
	// how much of the rest was weighed as context.
	Query        string     `json:"query"`
	ContextChars int        `json:"context_chars" example:"0"`
	Format       string     `json:"format" example:"openai"`
	Embedder     string     `json:"embedder" example:"builtin/hash-v1-256+words-v1-64-9c7dbae4"`
	Tools        []Selected `json:"tools"`
	// NoGoodMatch is true when no tool scores GoodMatchScore or more:
	// the tools returned (maybe none) fit the task poorly, and Hint says
	// what to do.
	NoGoodMatch bool          `json:"no_good_match"`
	Hint        string        `json:"hint,omitempty" example:"no tool fits this task well (best score 0.04); describe the action and the object, or ask an admin to register a tool for it"`
	Tokens      TokenEstimate `json:"tokens"`
	// Intents are the task's parts, when it asks for several things:
	// each was ranked on its own, and the selection gives every part its
	// best tools before any part its second best.
	Intents []IntentMatch `json:"intents,omitempty"`
	// UnmatchedTerms are the task's words that no selected tool's text
	// holds: what the selection may not cover (a misspelling, a word the
	// catalog does not use, or a part no tool does).
	UnmatchedTerms []string `json:"unmatched_terms,omitempty" example:"calendar"`
	// ToolReferences, with format anthropic, name the tools as the
	// tool_reference blocks of Anthropic's tool search: the content of the
	// tool_result an agent answers its search tool's call with.
	ToolReferences []formats.ToolReference `json:"tool_references,omitempty"`
	// committed receives the result of the selection record's write.
	committed <-chan error
}

// Committed returns once the record of res is committed, with the write's
// error; an HTTP answer waits for it, so the selection id it hands out
// survives a crash.
func (s *Selector) Committed(ctx context.Context, res *SelectResult) error {
	if res.committed == nil {
		return nil
	}
	return s.recorder.batch.Wait(ctx, res.committed)
}

// visibility decides which tools a caller may be offered.
type visibility struct {
	all        bool
	categories map[string]bool
	tools      map[string]bool
}

// visibilityOf reads a caller's grants once per selection. Admins and
// reviewers see the whole catalog; an agent sees a safe tool it holds by
// name or category, and a moderate or dangerous tool only through its
// category (dangerous ones then need approval at call time).
func (s *Selector) visibilityOf(caller *models.Principal) (visibility, error) {
	if caller == nil || caller.Role != access.RoleAgent {
		return visibility{all: true}, nil
	}
	g, err := s.authz.Grants(caller.ID)
	if err != nil {
		return visibility{}, err
	}
	v := visibility{categories: map[string]bool{}, tools: map[string]bool{}}
	for _, c := range g.Categories {
		v.categories[c] = true
	}
	for _, t := range g.Tools {
		v.tools[t] = true
	}
	return v, nil
}

func (v visibility) allows(e *entry) bool {
	if v.all {
		return true
	}
	if v.categories[e.category] {
		return true
	}
	return e.level == tooldef.LevelSafe && v.tools[e.name]
}

// Callable returns, in name order and after the tool named after, up to
// limit tools the caller may call and this host can run, each in format;
// next names the last one when more follow, "" on the last page. It is the
// catalog an MCP client lists: admins get every tool, agents what their
// grants let selection offer them, reviewers nothing, since they decide
// approvals and call no tool.
func (s *Selector) Callable(ctx context.Context, caller *models.Principal, format, after string, limit int) (tools []json.RawMessage, next string, err error) {
	if !slices.Contains(formats.Formats, format) {
		return nil, "", formats.UnknownFormat(format)
	}
	if limit < 1 {
		return nil, "", models.ErrInvalid.Errorf("page size %d", limit)
	}
	if caller != nil && caller.Role == access.RoleReviewer {
		return []json.RawMessage{}, "", nil
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, "", err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, "", err
	}
	ix := s.catalog.snapshot.Load()
	// Entries are in name order (the store lists them so), so a page
	// starts after its cursor without scanning what came before.
	start := sort.Search(len(ix.entries), func(i int) bool { return ix.entries[i].name > after })
	var page []*entry
	for _, e := range ix.entries[start:] {
		if !vis.allows(e) || !e.runnable {
			continue
		}
		if len(page) == limit {
			next = page[len(page)-1].name
			break
		}
		page = append(page, e)
	}
	ids := make([]uint, len(page))
	for i, e := range page {
		ids[i] = e.versionID
	}
	exports, err := s.store.Exports(ctx, format, ids)
	if err != nil {
		return nil, "", err
	}
	tools = make([]json.RawMessage, 0, len(page))
	for _, e := range page {
		if raw, ok := exports[e.versionID]; ok {
			tools = append(tools, json.RawMessage(raw))
		}
	}
	return tools, next, nil
}

// Select ranks the catalog for a task and returns the best tools the caller
// may use and this host can run, in the requested format, and records the
// selection so later use can teach the index.
func (s *Selector) Select(ctx context.Context, caller *models.Principal, req SelectRequest) (*SelectResult, error) {
	defer func(start time.Time) { s.metrics.Selected(time.Since(start)) }(time.Now())
	if err := s.checkRequest(&req); err != nil {
		return nil, err
	}
	if err := s.ensureFresh(ctx); err != nil {
		return nil, err
	}
	vis, err := s.visibilityOf(caller)
	if err != nil {
		return nil, err
	}
	ix := s.catalog.snapshot.Load()
	include := toSet(req.Categories)
	exclude := toSet(req.ExcludeCategories)
	ranked, parts := s.rankTask(ctx, ix, req.task, scope{vis: vis, include: include, exclude: exclude, minScore: *req.MinScore}, req.Limit)
	best := 0.0
	for _, r := range ranked {
		best = max(best, r.score)
	}
	ranked = slices.DeleteFunc(ranked, func(r rankedTool) bool { return r.score < *req.MinScore })
	res := &SelectResult{Query: req.task.focus, ContextChars: utf8.RuneCountInString(req.task.context), Format: req.Format,
		Embedder: s.emb.Model(), Tools: []Selected{}}
	if best < GoodMatchScore {
		res.NoGoodMatch = true
		res.Hint = fmt.Sprintf("no tool fits this task well (best score %.2f, a good match scores %.2f or more); describe the action and the object it acts on, or ask an admin to register a tool for it", best, GoodMatchScore)
	}
	ids := make([]uint, len(ranked))
	for i, r := range ranked {
		ids[i] = ix.entries[r.entry].versionID
	}
	exports, err := s.store.Exports(ctx, req.Format, ids)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ranked))
	for _, p := range parts {
		res.Intents = append(res.Intents, IntentMatch{Text: p.text, Tools: []string{}, BestScore: round(p.best, 5)})
	}
	for _, r := range ranked {
		e := ix.entries[r.entry]
		if r.intent > 0 {
			r.reasons.Intent = parts[r.intent-1].text
			res.Intents[r.intent-1].Tools = append(res.Intents[r.intent-1].Tools, e.name)
		}
		res.Tools = append(res.Tools, Selected{
			Name: e.name, Category: e.category, SecurityLevel: e.level, Score: round(r.score, 5),
			Reasons: r.reasons, Tool: json.RawMessage(exports[e.versionID]),
		})
		names = append(names, e.name)
		res.Tokens.Selection += e.doc.sizes[req.Format] / 4
	}
	res.UnmatchedTerms = unmatchedWords(queryWords(s.tok, req.task.focus), ix, ranked)
	if req.Format == formats.FormatAnthropic {
		res.ToolReferences = formats.ToolReferences(names)
	}
	res.Tokens.Catalog = ix.catalogTokens(vis, s.host, req.Format)
	if res.Tokens.Catalog > 0 {
		res.Tokens.Saved = round(1-float64(res.Tokens.Selection)/float64(res.Tokens.Catalog), 3)
	}
	sel := &models.Selection{ID: models.NewID(), SessionID: req.SessionID, Query: req.task.focus, Tools: "," + strings.Join(names, ",") + ","}
	if caller != nil {
		sel.PrincipalID = caller.ID
	}
	res.committed = s.recorder.record(ctx, sel)
	res.SelectionID = sel.ID
	return res, nil
}

func (s *Selector) checkRequest(req *SelectRequest) error {
	var ps models.Problems
	req.Query = strings.TrimSpace(req.Query)
	t, tps := taskOf(req.Query, req.Messages)
	ps = append(ps, tps...)
	req.task = t
	if req.Limit == 0 {
		req.Limit = DefaultSelectLimit
	}
	if req.Limit < 1 || req.Limit > MaxSelectLimit {
		ps.Add("/limit", "must be between 1 and %d", MaxSelectLimit)
	}
	if req.Format == "" {
		req.Format = formats.FormatOpenAI
	}
	if !slices.Contains(formats.Formats, req.Format) {
		ps.Add("/format", "%q is not a format; use one of %s", req.Format, strings.Join(formats.Formats, ", "))
	}
	for i, c := range req.Categories {
		if !slices.Contains(tooldef.Categories, c) {
			ps.Add(fmt.Sprintf("/categories/%d", i), "%q is not a category; use one of %s", c, strings.Join(tooldef.Categories, ", "))
		}
	}
	for i, c := range req.ExcludeCategories {
		if !slices.Contains(tooldef.Categories, c) {
			ps.Add(fmt.Sprintf("/exclude_categories/%d", i), "%q is not a category; use one of %s", c, strings.Join(tooldef.Categories, ", "))
		}
	}
	if len(req.SessionID) > 128 {
		ps.Add("/session_id", "is longer than 128 characters")
	}
	if req.MinScore == nil {
		req.MinScore = new(float64(DefaultMinScore))
	} else if m := *req.MinScore; !(m >= 0 && m <= 1) {
		ps.Add("/min_score", "must be between 0 and 1 (scores are on that scale); the default is %g", DefaultMinScore)
	}
	if len(ps) > 0 {
		return &models.ValidationError{What: "selection request", Problems: ps}
	}
	return nil
}

// unmatchedWords are the task's words (words) that no ranked tool's text
// holds, in the task's order; numbers are values, not words a tool
// holds, and are left out.
func unmatchedWords(words wordStems, ix *index, ranked []rankedTool) []string {
	var out []string
	for k, w := range words.words {
		if !strings.ContainsFunc(w, unicode.IsLetter) {
			continue
		}
		// Postings are in entry order: a binary search a tool, not a pass
		// over its text.
		ps := ix.lex.postings[words.stems[k]]
		held := slices.ContainsFunc(ranked, func(r rankedTool) bool {
			_, found := slices.BinarySearchFunc(ps, int32(r.entry), func(p posting, e int32) int { return cmp.Compare(p.doc, e) })
			return found
		})
		if !held {
			out = append(out, w)
		}
	}
	return out
}

func toSet(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
