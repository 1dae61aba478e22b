package embed

import (
	"context"
	"fmt"
	"testing"
)

// benchTexts are tool texts and queries of the kind selection indexes and
// ranks: few distinct words, each repeated a lot, so the stem cache is warm.
func benchTexts(n int) []string {
	nouns := []string{"invoice", "weather", "repository", "calendar", "ticket", "image", "database", "email", "contract", "playlist", "flight", "recipe", "sensor", "budget"}
	verbs := []string{"searching", "creates", "summarises", "translated", "exporting", "validates", "scheduling", "compares", "archived", "monitoring"}
	out := make([]string, n)
	for i := range out {
		noun, verb := nouns[i%len(nouns)], verbs[(i/len(nouns))%len(verbs)]
		out[i] = fmt.Sprintf("%s_%s_%05d: %s %s records in workspace %d; returns the matching %s entries with their links and summaries.",
			verb, noun, i, verb, noun, i%97, noun)
	}
	return out
}

// BenchmarkTerms measures turning a tool text into retrieval terms (words,
// stop words, stems), which selection does for every tool indexed and
// every query ranked.
func BenchmarkTerms(b *testing.B) {
	tok := NewTokenizer()
	texts := benchTexts(1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tok.Terms(texts[i%len(texts)])
	}
}

// BenchmarkTermsParallel is BenchmarkTerms from every core at once, as
// concurrent selections rank queries: the stem cache is shared.
func BenchmarkTermsParallel(b *testing.B) {
	tok := NewTokenizer()
	texts := benchTexts(1024)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			tok.Terms(texts[i%len(texts)])
		}
	})
}

// BenchmarkBuiltinEmbed measures the built-in embedder on a batch of tool
// texts, as a catalog is embedded.
func BenchmarkBuiltinEmbed(b *testing.B) {
	e := NewBuiltin()
	texts := benchTexts(256)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Embed(ctx, Document, texts); err != nil {
			b.Fatal(err)
		}
	}
}
