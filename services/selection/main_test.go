package selection

import "log/slog"

// quiet discards the logs of the services under test.
var quiet = slog.New(slog.DiscardHandler)
