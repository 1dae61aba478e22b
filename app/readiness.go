package app

import (
	"path/filepath"

	"toolbelt/services/cluster"
	"toolbelt/services/ops"
	"toolbelt/services/sandbox"
)

// health is the readiness report of the App: what it uses (the embedder,
// the sandbox, the tool files, its place in the cluster) and what it
// needs to work, probed: the database, the data directory's disk, the
// call journal (where calls are recorded, or spooled while the database
// cannot take them), the session work directories as the sandbox's user
// writes them, and Redis when configured.
func (a *App) health(box *sandbox.Sandbox, embedNote string) *ops.Health {
	st := box.Status()
	// Named absolute, so that the report says one path for each, which
	// WithoutHostPaths finds (a relative "data/journal" would escape it).
	data, err := filepath.Abs(a.Config.DataDir)
	if err != nil {
		data = a.Config.DataDir
	}
	d := ops.HealthDeps{
		Store: a.Store, Selector: a.Selector, EmbedNote: embedNote, Sandbox: &st, ToolFiles: a.ToolFiles, Cluster: a.Cluster,
		Disk:     ops.DiskProbe(data),
		Journal:  ops.JournalProbe(filepath.Join(data, "journal")),
		Sessions: ops.SessionsProbe(box, filepath.Join(data, "sessions")),
		Outage:   a.outage,
		// Only admins see where the data lives on the host.
		HostPaths: map[string]string{data: "$TOOLBELT_DATA_DIR"},
	}
	if a.Config.ToolsDir != "" {
		d.HostPaths[a.Config.ToolsDir] = "$TOOLBELT_TOOLS_DIR"
	}
	if a.Redis != nil {
		d.Redis = cluster.RedisCheck(a.Redis)
	}
	if a.Upstreams != nil {
		d.Upstreams = a.Upstreams.Health
	}
	return ops.NewHealth(d)
}
