package console

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"toolbelt/handlers"
	"toolbelt/models"
	"toolbelt/services/formats"
	"toolbelt/services/selection"
	"toolbelt/services/tooldef"
	"toolbelt/views"
)

// Playground runs a selection as the signed-in principal, the way an agent
// asks POST /api/v1/tools/select, and shows the ranked tools with their
// scores and reasons. The form is a GET, so a query can be bookmarked; the
// first visit (no q parameter) shows the form only.
func (h *Handler) Playground(c *gin.Context) error {
	q := c.Request.URL.Query()
	form := views.PlaygroundForm{Query: q.Get("q"), Limit: q.Get("limit"), MaxLimit: selection.MaxSelectLimit, Errors: map[string]string{},
		Format: cmp.Or(q.Get("format"), formats.Formats[0]), Formats: formats.Formats}
	if form.Limit == "" {
		form.Limit = strconv.Itoa(selection.DefaultSelectLimit)
	}
	chosen := q["category"]
	for _, cat := range tooldef.Categories {
		form.Categories = append(form.Categories, views.PlaygroundCategory{Name: cat, Checked: slices.Contains(chosen, cat)})
	}
	d := views.PlaygroundData{Form: form}
	if s := CurrentConsole(c); s != nil {
		d.CSRF = s.CSRF
	}
	status := http.StatusOK
	if _, asked := q["q"]; asked {
		res, err := h.playgroundSelect(c, form, chosen)
		var ve *models.ValidationError
		switch {
		case errors.As(err, &ve):
			status = handlers.ErrorStatus(err)
			playgroundErrors(d.Form.Errors, ve)
		case err != nil:
			return err
		default:
			d.Result = res
		}
	}
	return h.Render(c, status, views.Playground(h.Page(c, "Retrieval playground"), d))
}

// playgroundSelect asks the selector, which checks the whole request. A
// limit that is not a whole number, or below 1 (which the API reads as
// "the default"), is sent as -1, so the selector reports it beside any
// other problem and selects nothing.
func (h *Handler) playgroundSelect(c *gin.Context, form views.PlaygroundForm, categories []string) (*views.PlaygroundResult, error) {
	limit, err := strconv.Atoi(strings.TrimSpace(form.Limit))
	notNumber := err != nil
	if notNumber || limit < 1 {
		limit = -1
	}
	res, err := h.Selector.Select(c.Request.Context(), handlers.CurrentPrincipal(c),
		selection.SelectRequest{Query: form.Query, Limit: limit, Categories: categories, Format: form.Format})
	var ve *models.ValidationError
	if notNumber && errors.As(err, &ve) {
		for i, p := range ve.Problems {
			if p.Pointer == "/limit" {
				ve.Problems[i].Message = fmt.Sprintf("must be a whole number between 1 and %d", selection.MaxSelectLimit)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	out := &views.PlaygroundResult{SelectionID: res.SelectionID, Embedder: res.Embedder, Format: res.Format,
		SelectionTokens: res.Tokens.Selection, CatalogTokens: res.Tokens.Catalog, SavedRatio: res.Tokens.Saved,
		Limit: cmp.Or(max(limit, 0), selection.DefaultSelectLimit), MinScore: selection.DefaultMinScore, GoodScore: selection.GoodMatchScore,
		Categories: categories, NoGoodMatch: res.NoGoodMatch, Hint: res.Hint, Unmatched: res.UnmatchedTerms}
	for _, in := range res.Intents {
		out.Intents = append(out.Intents, views.PlaygroundIntent{Text: in.Text, Tools: in.Tools, Best: in.BestScore})
	}
	for i, t := range res.Tools {
		out.Tools = append(out.Tools, views.PlaygroundTool{Rank: i + 1, Name: t.Name, Category: t.Category, Level: t.SecurityLevel,
			Score: t.Score, DenseSimilarity: t.Reasons.DenseSimilarity, DenseRank: t.Reasons.DenseRank,
			LexicalScore: t.Reasons.LexicalScore, LexicalRank: t.Reasons.LexicalRank, Intent: t.Reasons.Intent,
			MatchedTerms: t.Reasons.MatchedTerms, LearnedQueries: t.Reasons.LearnedQueries, Rendering: views.PrettyJSON(string(t.Tool))})
	}
	return out, nil
}

// PlaygroundFeedback tells the ranking that the playground's selection
// needed the tool (as POST /api/v1/selections/{id}/feedback does): its
// query becomes retrieval text for the tool.
func (h *Handler) PlaygroundFeedback(c *gin.Context) error {
	id, tool := c.PostForm("selection_id"), c.PostForm("tool")
	learned, err := h.Selector.Feedback(c.Request.Context(), handlers.CurrentPrincipal(c), id, []string{tool})
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("%s already knew this task: nothing new to learn.", tool)
	if len(learned) > 0 {
		msg = fmt.Sprintf("Learned: tasks like this one now find %s.", tool)
	}
	return Redirect(c, "/admin/playground", msg)
}

// playgroundErrors puts each problem of a selection request next to its
// field.
func playgroundErrors(errs map[string]string, ve *models.ValidationError) {
	for _, p := range ve.Problems {
		field := pointerField(p.Pointer)
		switch field {
		case "query", "limit", "categories":
		default:
			field = "query"
		}
		msg := p.Message
		switch {
		case field == "query" && strings.HasPrefix(msg, "is required"):
			msg = "Describe the task the tools are for."
		case field == "query" && strings.HasPrefix(msg, "is "):
			msg = "The task " + msg + "."
		case field == "limit":
			msg = "The limit " + msg + "."
		}
		if errs[field] == "" {
			errs[field] = msg
		}
	}
}
