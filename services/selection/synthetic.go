package selection

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"toolbelt/services/tooldef"
)

// Vocabulary of the synthetic catalog: a tool acts (verb) on an object
// (noun) in a system, with a few more objects and qualifiers in its
// description, so common words have long postings and rare combinations
// short ones, as in a large imported catalog.
var (
	synthVerbs = []string{"search", "create", "update", "delete", "list", "get", "export", "import", "validate",
		"schedule", "compare", "archive", "monitor", "summarise", "translate", "convert", "merge", "split",
		"approve", "reject", "assign", "tag", "sync", "backup", "restore", "publish", "render", "resize",
		"upload", "download", "share", "lock", "unlock", "rotate", "count", "estimate", "forecast", "classify",
		"detect", "notify", "subscribe", "cancel", "refund", "invite", "remind", "audit", "scan", "index",
		"query", "aggregate", "plot", "sign", "verify", "encrypt", "decrypt", "compress", "transcribe", "rank",
		"dedupe", "annotate"}
	synthNouns = []string{"invoice", "weather", "repository", "calendar", "ticket", "image", "database", "email",
		"contract", "playlist", "flight", "recipe", "sensor", "budget", "customer", "order", "shipment", "payment",
		"subscription", "employee", "timesheet", "expense", "report", "dashboard", "metric", "alert", "incident",
		"deployment", "container", "cluster", "bucket", "file", "folder", "document", "spreadsheet", "slide",
		"video", "podcast", "article", "comment", "review", "rating", "product", "inventory", "warehouse",
		"supplier", "lead", "opportunity", "campaign", "newsletter", "survey", "form", "appointment", "patient",
		"prescription", "lab result", "course", "student", "grade", "assignment", "book", "library", "map",
		"route", "vehicle", "parking", "hotel", "booking", "restaurant", "menu", "event", "ticket price",
		"stock", "portfolio", "exchange rate", "tax", "receipt", "loan", "account", "password", "certificate",
		"domain", "dns record", "webhook", "api key", "log", "trace", "queue", "message", "channel", "thread",
		"pull request", "issue", "branch", "commit", "build", "test run", "package", "license", "translation",
		"glossary", "contact", "address", "phone number", "note", "task", "project", "milestone", "sprint",
		"goal", "okr", "policy", "risk", "vendor", "asset", "device", "printer", "meeting", "transcript",
		"recording", "photo", "album", "song", "lyrics", "quote", "poll", "badge", "reward", "coupon", "cart",
		"wishlist", "return", "claim", "quote request", "proposal", "signature", "template", "workflow", "job",
		"cron schedule", "backup set", "snapshot", "volume", "firewall rule", "user", "group", "role", "permission"}
	synthSystems = []string{"GitHub", "GitLab", "Jira", "Slack", "Salesforce", "HubSpot", "Stripe", "Shopify",
		"Google Drive", "Dropbox", "Notion", "Confluence", "Zendesk", "Twilio", "AWS", "Azure", "Kubernetes",
		"Postgres", "Snowflake", "Airtable", "Trello", "Asana", "Figma", "Spotify", "Zoom", "Outlook", "Gmail",
		"QuickBooks", "Xero", "Workday", "ServiceNow", "Datadog", "PagerDuty", "Sentry", "Okta", "Cloudflare"}
	synthQualifiers = []string{"recent", "overdue", "archived", "shared", "public", "private", "draft", "pending",
		"failed", "large", "duplicate", "monthly", "weekly", "daily", "regional", "international", "urgent",
		"flagged", "unread", "expired", "active", "inactive", "new", "old", "encrypted", "tagged"}
)

// SyntheticTools returns n distinct tool definitions for benchmarks at
// catalog sizes no real data set has (toolbelt bench select, the package
// benchmarks); the same n and seed give the same catalog.
func SyntheticTools(n int, seed uint64) []tooldef.Definition {
	r := rand.New(rand.NewPCG(seed, 17))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	defs := make([]tooldef.Definition, n)
	for i := range n {
		verb, noun, sys := pick(synthVerbs), pick(synthNouns), pick(synthSystems)
		other, qual := pick(synthNouns), pick(synthQualifiers)
		level := tooldef.LevelSafe
		if i%5 == 4 {
			level = tooldef.LevelModerate
		}
		defs[i] = tooldef.Definition{
			Name:    synthName(sys, verb, noun, i),
			Version: "1.0.0",
			Description: fmt.Sprintf("%s %s %s in %s. Filters by %s and %s, returns the matching %s entries with their %s and links.",
				capitalise(verb), qual, plural(noun), sys, pick(synthQualifiers), other, noun, pick(synthNouns)),
			Category: tooldef.Categories[r.IntN(len(tooldef.Categories))],
			Tags:     []string{tagOf(sys), tagOf(noun)},
			Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":"Which %s to %s"},"limit":{"type":"integer","description":"At most this many %s"}},"required":["query"]}`,
				plural(noun), verb, plural(other))),
			Security: tooldef.Security{Level: level},
			Runner:   tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: "https://tools.invalid/x"},
		}
	}
	return defs
}

// SyntheticQueries returns n tasks phrased from the synthetic catalog's
// vocabulary, a few with a typo or a word no tool has.
func SyntheticQueries(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 23))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	out := make([]string, n)
	for i := range n {
		switch i % 4 {
		case 0:
			out[i] = fmt.Sprintf("%s the %s %s in %s", pick(synthVerbs), pick(synthQualifiers), plural(pick(synthNouns)), pick(synthSystems))
		case 1:
			out[i] = fmt.Sprintf("I need to %s a %s and %s its %s", pick(synthVerbs), pick(synthNouns), pick(synthVerbs), pick(synthNouns))
		case 2:
			out[i] = fmt.Sprintf("%s %s from %s for the quarterly zorblax review", pick(synthVerbs), plural(pick(synthNouns)), pick(synthSystems))
		default:
			out[i] = fmt.Sprintf("%ss %s", pick(synthNouns), pick(synthVerbs))
		}
	}
	return out
}

func plural(noun string) string {
	switch noun[len(noun)-1] {
	case 's', 'x', 'h':
		return noun + "es"
	case 'y':
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}

func capitalise(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// synthName is a valid tool name: lower case, words joined by "_", the
// index last so names are unique.
func synthName(sys, verb, noun string, i int) string {
	var b []byte
	for _, c := range []byte(fmt.Sprintf("%s %s %s %d", sys, verb, noun, i)) {
		switch {
		case c >= 'A' && c <= 'Z':
			b = append(b, c-'A'+'a')
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b = append(b, c)
		default:
			b = append(b, '_')
		}
	}
	return string(b)
}

// tagOf is a valid tag: lower case, spaces as "-".
func tagOf(s string) string { return strings.ReplaceAll(strings.ToLower(s), " ", "-") }
