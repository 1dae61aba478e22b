package selection

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"toolbelt/services/embed"
)

// actions is a catalog's actions as index.acts gives them: the words that
// open tool names.
func actions(words ...string) func(string) bool {
	return func(w string) bool { return slices.Contains(words, w) }
}

func intentTexts(its []intent) []string {
	out := make([]string, len(its))
	for i, it := range its {
		out[i] = it.text
	}
	return out
}

// TestIntentsOf: sentences, steps and the items of an enumeration that
// open with an action are intents; lists of things, dates, numbers,
// abbreviations, addresses and short asides stay with their request.
func TestIntentsOf(t *testing.T) {
	acts := actions("find", "convert", "add", "get", "retrieve", "track", "check", "submit", "book", "music")
	cases := []struct {
		name, text string
		want       []string
	}{
		{"enumeration", "find the flights to Rome, convert the price to euros and add the trip to my calendar",
			[]string{"find the flights to Rome,", "convert the price to euros", "and add the trip to my calendar"}},
		{"steps", "Please check the status of ticket gDigAX6tNT. Then, retrieve the plan for patient Ej4bR6LkH. Finally, track the progress of John's sessions.",
			[]string{"Please check the status of ticket gDigAX6tNT.", "Then, retrieve the plan for patient Ej4bR6LkH.", "Finally, track the progress of John's sessions."}},
		{"then", "book a table for two then add it to my calendar",
			[]string{"book a table for two", "then add it to my calendar"}},
		{"a list of things", "Give me tips, strategies, and techniques on writing meta descriptions and titles.",
			[]string{"Give me tips, strategies, and techniques on writing meta descriptions and titles."}},
		{"dates and numbers", "Find available rooms in New York from November 25, 2013, to January 7, 2006.",
			[]string{"Find available rooms in New York from November 25, 2013, to January 7, 2006."}},
		{"abbreviations, decimals, addresses", "Analyse the sample (e.g. DNA or fibres) from www.example.com at 3.5 ml. Dr. Smith asked for the results by Monday.",
			[]string{"Analyse the sample (e.g. DNA or fibres) from www.example.com at 3.5 ml.", "Dr. Smith asked for the results by Monday."}},
		{"a short aside joins its request", "If possible, get the ethics guidelines. Thanks!",
			[]string{"If possible, get the ethics guidelines. Thanks!"}},
		{"a short opening joins the next", "Hello! Retrieve the weather in Oslo.",
			[]string{"Hello! Retrieve the weather in Oslo."}},
		{"one request", "what is the weather in Paris", []string{"what is the weather in Paris"}},
		{"values in brackets", "Calculate the average of these scores {'math':90, 'music':89, 'book':70} across subjects. Find my notes (check them; add the dates, convert nothing).",
			[]string{"Calculate the average of these scores {'math':90, 'music':89, 'book':70} across subjects.", "Find my notes (check them; add the dates, convert nothing)."}},
		{"a stray closing bracket", "find the flights) to Rome, convert the prices {'rome':120, 'find':80} to euros",
			[]string{"find the flights) to Rome,", "convert the prices {'rome':120, 'find':80} to euros"}},
		{"semicolons and line breaks", "get the invoices of March; convert them to PDF files\nadd a summary page to the report",
			[]string{"get the invoices of March;", "convert them to PDF files", "add a summary page to the report"}},
		{"German: sentences cut, commas kept", "Finde die Flüge nach Berlin, rechne den Preis in Euro um. Trage die Reise in meinen Kalender ein.",
			[]string{"Finde die Flüge nach Berlin, rechne den Preis in Euro um.", "Trage die Reise in meinen Kalender ein."}},
		{"French", "Trouve les vols pour Paris et convertis le prix en euros. Ajoute le voyage à mon calendrier.",
			[]string{"Trouve les vols pour Paris et convertis le prix en euros.", "Ajoute le voyage à mon calendrier."}},
		{"Chinese", "查找去北京的航班，把价格换算成欧元。然后添加到我的日历。",
			[]string{"查找去北京的航班，把价格换算成欧元。", "然后添加到我的日历。"}},
		{"Japanese", "東京行きのフライトを探して。価格をユーロに換算して、カレンダーに追加してください。",
			[]string{"東京行きのフライトを探して。", "価格をユーロに換算して、カレンダーに追加してください。"}},
		{"a short Chinese sentence joins", "你好！查找去北京的航班。",
			[]string{"你好！查找去北京的航班。"}},
		{"empty", "  ", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := intentTexts(intentsOf(c.text, acts))
			if len(got) == 0 && len(c.want) == 0 {
				return
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("intents of %q:\n got %q\nwant %q", c.text, got, c.want)
			}
			checkIntents(t, c.text, intentsOf(c.text, acts), acts)
		})
	}
}

// TestIntentsOfWithoutActions: without the catalog's actions only
// sentences cut, and a task of more sentences than maxIntents keeps
// maxIntents, every word in its place.
func TestIntentsOfWithoutActions(t *testing.T) {
	got := intentTexts(intentsOf("find the flights, convert the price and add it to my calendar", nil))
	if len(got) != 1 {
		t.Errorf("without actions: %q, want one intent", got)
	}
	var b strings.Builder
	for i := range 10 {
		b.WriteString("Retrieve the report number " + string(rune('a'+i)) + "x of the finance team. ")
	}
	its := intentsOf(b.String(), nil)
	if len(its) != maxIntents {
		t.Errorf("%d intents of 10 sentences, want %d", len(its), maxIntents)
	}
	checkIntents(t, b.String(), its, nil)
}

// checkIntents holds the cut to what any text must keep: every word in
// its order (an intent is a piece of the text as it stands), no empty
// intent, at most maxIntents, and each intent of several naming something
// (standsAlone).
func checkIntents(t *testing.T, text string, its []intent, acts func(string) bool) {
	t.Helper()
	if len(its) > maxIntents {
		t.Errorf("%d intents, more than %d", len(its), maxIntents)
	}
	var words []string
	for _, it := range its {
		if strings.TrimSpace(it.text) == "" || !utf8.ValidString(it.text) || !strings.Contains(text, it.text) {
			t.Errorf("intent %q is empty, not UTF-8 or not a piece of the text", it.text)
		}
		if len(its) > 1 && !standsAlone(it.text, acts) {
			t.Errorf("intent %q of %d names too little", it.text, len(its))
		}
		words = append(words, embed.Words(it.text)...)
	}
	if want := embed.Words(text); !slices.Equal(words, want) {
		t.Errorf("the intents' words %q, want the text's %q", words, want)
	}
}

// FuzzIntentsOf: whatever the text (any script, stray punctuation, broken
// UTF-8), the cut keeps its words and bounds its intents.
func FuzzIntentsOf(f *testing.F) {
	for _, s := range []string{
		"find the flights, convert the price and add it", "Hi! ... ?? ;;; ,,, and and then",
		"查找航班，然后添加到日历。", "東京。大阪、京都！", "Ünïcödé. Straße, und dann? Ça va; oui.",
		"e.g. i.e. U.S. Dr. 3.5 www.x.y", "\xff\xfe. broken, utf8", "and", ".", "",
	} {
		f.Add(s)
	}
	acts := actions("find", "convert", "add", "then", "and")
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			text = strings.ToValidUTF8(text, " ")
		}
		checkIntents(t, text, intentsOf(text, acts), acts)
		checkIntents(t, text, intentsOf(text, nil), nil)
	})
}
