// Package views holds the templ components of the home page and the
// admin console. Components take data and never call services; the
// handlers fetch it. The generated *_templ.go files are committed.
package views
