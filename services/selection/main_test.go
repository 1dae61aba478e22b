package selection

import (
	"log/slog"

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
