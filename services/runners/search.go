package runners

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"toolbelt/models"
)

// webSearch asks the SearXNG endpoint (GET /search?format=json) and
// returns titles, URLs and snippets.
func (t *Table) webSearch(ctx context.Context, c *Call) (any, error) {
	if t.searchURL == "" {
		return nil, &Error{Code: models.CodeUpstream, Message: "web_search has no search endpoint configured",
			Suggestion: "Do not retry; an administrator must set TOOLBELT_SEARXNG_URL (or --searxng-url) to a SearXNG instance with the JSON format enabled."}
	}
	query, _ := c.Args["query"].(string)
	limit := intArg(c.Args, "max_results", 10)
	u := t.searchURL + "/search?" + url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := t.searchClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Code: models.CodeUpstream, Message: fmt.Sprintf("the search endpoint did not answer: %v", err), Retryable: true, Suggestion: "Try again later."}
	}
	defer resp.Body.Close()
	c.Log.InfoContext(ctx, "search answered", "status", resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		return nil, &Error{Code: models.CodeUpstream, Message: fmt.Sprintf("the search endpoint answered %s", resp.Status),
			Retryable: resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, Suggestion: "Try again later, or rephrase the query."}
	}
	var answer struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxHTTPResponseBytes)).Decode(&answer); err != nil {
		return nil, &Error{Code: models.CodeUpstream, Message: "the search endpoint did not answer SearXNG JSON", Suggestion: "Tell an administrator: the endpoint must have the json format enabled."}
	}
	type hit struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Snippet string `json:"snippet"`
	}
	hits := []hit{}
	for _, r := range answer.Results {
		if len(hits) == limit {
			break
		}
		hits = append(hits, hit{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return map[string]any{"query": query, "results": hits}, nil
}
