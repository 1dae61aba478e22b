package selection

import (
	"context"
	"log/slog"
	"testing"

	"toolbelt/services/tooldef"
)

// quiet discards the logs of the services under test.
var quiet = slog.New(slog.DiscardHandler)

// testTool is a safe http tool with no parameters: only its name and
// description matter to selection.
func testTool(name, description string) tooldef.Definition {
	return tooldef.Definition{
		Name: name, Version: "1.0.0", Description: description, Category: "api",
		Security: tooldef.Security{Level: tooldef.LevelSafe},
		Runner:   tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: "https://tools.invalid/" + name},
	}
}

// start runs s until stop, which returns Run's error.
func start(s *Selector) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// running runs run (a Run) until the test ends.
func running(tb testing.TB, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
}
