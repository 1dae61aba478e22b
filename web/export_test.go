package web

// The tests are in package web_test: they build the service with package
// app, which imports web. What they check of the route tables is exported
// to them here.

// Row is one row of a route table: its method and path.
type Row struct{ Method, Path string }

func rows[H any](rs []route[H]) []Row {
	out := make([]Row, len(rs))
	for i, r := range rs {
		out[i] = Row{r.method, r.path}
	}
	return out
}

// Routes is the API's route table; Pages the console's.
var Routes, Pages = rows(routes), rows(pages)
