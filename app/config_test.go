package app

import (
	"errors"
	"flag"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"toolbelt/services/access"
	"toolbelt/services/audit"
	"toolbelt/services/callbacks"
	"toolbelt/services/invoke"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/runners"
	"toolbelt/services/selection"
	"toolbelt/services/upstream"
)

// lookupIn reads an environment from a map.
func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// TestParseConfig drives the configuration with flags and variables:
// defaults, variables, flags over variables, and every refusal.
func TestParseConfig(t *testing.T) {
	defaults := Config{Addr: ":8080", DataDir: "./data", LogLevel: "info", LogFormat: "auto", EmbedModel: "nomic-embed-text",
		KeepLearned: selection.DefaultKeepLearned, Sandbox: "auto", ShutdownTimeout: 20 * time.Second,
		Alerts: ops.DefaultAlertConfig(), ToolsDir: "./tools.d", SessionQuotaMB: runners.DefaultSessionQuota >> 20,
		Callbacks: callbacks.Defaults(), AuditRetention: audit.DefaultRetention, Caps: access.DefaultPrincipalCaps(),
		UpstreamProcesses: upstream.DefaultProcessCaps(),
		QueueWaiting:      invoke.DefaultQueueWaiting, QueueWaitingEach: invoke.DefaultQueueWaitingEach,
		OutageGrace: access.DefaultOutageGrace, OAuth: OAuthEmbedded, KeySignIn: true}
	with := func(edit func(*Config)) Config {
		c := defaults
		edit(&c)
		return c
	}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    Config
		wantErr string
	}{
		{name: "defaults", want: defaults},
		{name: "empty variables are unset", env: map[string]string{"TOOLBELT_ADDR": "", "TOOLBELT_SHUTDOWN_TIMEOUT": ""}, want: defaults},
		{name: "variables", env: map[string]string{
			"TOOLBELT_ADDR": "127.0.0.1:9", "TOOLBELT_DATA_DIR": "/srv/tb", "TOOLBELT_ADMIN_KEY": testAdminKey, "TOOLBELT_LOG_LEVEL": "debug",
			"TOOLBELT_LOG_FORMAT": "text", "TOOLBELT_OLLAMA_URL": "http://ollama:11434", "TOOLBELT_EMBED_MODEL": "m",
			"TOOLBELT_LEARNED_PER_TOOL": "7", "TOOLBELT_SANDBOX": "none", "TOOLBELT_SEARXNG_URL": "https://search.example",
			"TOOLBELT_SHUTDOWN_TIMEOUT": "3s", "TOOLBELT_TOOLS_DIR": "", "TOOLBELT_SESSION_QUOTA_MB": "64",
			"TOOLBELT_AUDIT_RETENTION":       "720h",
			"TOOLBELT_MAX_PENDING_APPROVALS": "5", "TOOLBELT_MAX_MCP_SESSIONS": "6", "TOOLBELT_MAX_EVENT_STREAMS": "7",
			"TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER": "12", "TOOLBELT_UPSTREAM_PROCESSES_PER_PRINCIPAL": "3",
			"TOOLBELT_ALERT_FAILURE_RATE": "0.25", "TOOLBELT_ALERT_WINDOW": "5m", "TOOLBELT_ALERT_MIN_CALLS": "3",
			"TOOLBELT_ALERT_WEBHOOK":    "https://hooks.example/x",
			"TOOLBELT_HTTP_ALLOW_HOSTS": "api.example, .corp", "TOOLBELT_HTTP_ALLOW_PRIVATE": "10.0.0.0/8",
			"TOOLBELT_SECRETS": "TOKEN, MISSING,,", "TOKEN": "s3cret",
			"TOOLBELT_CALLBACK_KEY":    testCallbackKey,
			"TOOLBELT_DATABASE_URL":    "postgres://tb:pw@db:5432/tb",
			"TOOLBELT_REDIS_URL":       "redis://:pw@cache:6379/0",
			"TOOLBELT_TRUSTED_PROXIES": " 10.9.0.0/16, 192.168.1.5,fd00::1, 10.1.2.3/8",
			"TOOLBELT_QUEUE_WAITING":   "32", "TOOLBELT_QUEUE_WAITING_PER_PRINCIPAL": "4",
			"TOOLBELT_CALLBACK_WORKERS": "16", "TOOLBELT_CALLBACK_WORKERS_PER_PRINCIPAL": "3",
			"TOOLBELT_OUTAGE_GRACE": "90s",
			"TOOLBELT_PUBLIC_URL":   "https://TB.example.com:8443/", "TOOLBELT_OAUTH": "off",
		}, want: with(func(c *Config) {
			c.OutageGrace = 90 * time.Second
			c.PublicURL, c.OAuth = "https://TB.example.com:8443", OAuthOff
			c.QueueWaiting, c.QueueWaitingEach, c.Callbacks.Workers, c.Callbacks.WorkersEach = 32, 4, 16, 3
			c.TrustedProxies = []string{"10.9.0.0/16", "192.168.1.5/32", "fd00::1/128", "10.0.0.0/8"}
			c.RedisURL = "redis://:pw@cache:6379/0"
			c.CallbackKey = testCallbackKey
			c.DatabaseURL = "postgres://tb:pw@db:5432/tb"
			c.Addr, c.DataDir, c.AdminKey, c.LogLevel, c.LogFormat = "127.0.0.1:9", "/srv/tb", testAdminKey, "debug", "text"
			c.OllamaURL, c.EmbedModel, c.KeepLearned, c.Sandbox, c.SearXNG = "http://ollama:11434", "m", 7, "none", "https://search.example"
			c.ShutdownTimeout, c.SessionQuotaMB, c.AuditRetention = 3*time.Second, 64, 720*time.Hour
			c.Alerts = ops.AlertConfig{Threshold: 0.25, Window: 5 * time.Minute, MinCalls: 3, Webhook: "https://hooks.example/x", Every: ops.DefaultAlertConfig().Every}
			c.NetPolicy = netpolicy.Policy{AllowHosts: []string{"api.example", ".corp"}, AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
			c.Secrets = map[string]string{"TOKEN": "s3cret", "MISSING": ""}
			c.Caps = access.PrincipalCaps{PendingApprovals: 5, MCPSessions: 6, EventStreams: 7}
			c.UpstreamProcesses = upstream.ProcessCaps{PerServer: 12, PerPrincipal: 3}
		})},
		{name: "flags over variables",
			args: []string{"--addr", ":1", "--data-dir", "d", "--log-level", "warn", "--log-format", "text", "--ollama-url", "http://o",
				"--embed-model", "e", "--learned-per-tool", "2", "--sandbox", "native", "--searxng-url", "http://s", "--shutdown-timeout", "1s",
				"--tools-dir", "t", "--session-quota-mb", "5", "--audit-retention", "0"},
			env: map[string]string{"TOOLBELT_ADDR": ":2", "TOOLBELT_DATA_DIR": "x", "TOOLBELT_LEARNED_PER_TOOL": "9", "TOOLBELT_SHUTDOWN_TIMEOUT": "9s", "TOOLBELT_AUDIT_RETENTION": "1h"},
			want: with(func(c *Config) {
				c.Addr, c.DataDir, c.LogLevel, c.LogFormat, c.OllamaURL, c.EmbedModel = ":1", "d", "warn", "text", "http://o", "e"
				c.KeepLearned, c.Sandbox, c.SearXNG, c.ShutdownTimeout, c.ToolsDir, c.SessionQuotaMB = 2, "native", "http://s", time.Second, "t", 5
				c.AuditRetention = 0
			})},
		{name: "bad TOOLBELT_LEARNED_PER_TOOL", env: map[string]string{"TOOLBELT_LEARNED_PER_TOOL": "0"}, wantErr: "TOOLBELT_LEARNED_PER_TOOL must be a positive integer"},
		{name: "bad TOOLBELT_SHUTDOWN_TIMEOUT", env: map[string]string{"TOOLBELT_SHUTDOWN_TIMEOUT": "soon"}, wantErr: "TOOLBELT_SHUTDOWN_TIMEOUT must be a duration such as 20s"},
		{name: "bad TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER", env: map[string]string{"TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER": "0"},
			wantErr: "TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER must be a positive integer: the processes a session-isolated upstream server may run"},
		{name: "per principal above per server", env: map[string]string{"TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER": "2", "TOOLBELT_UPSTREAM_PROCESSES_PER_PRINCIPAL": "3"},
			wantErr: "TOOLBELT_UPSTREAM_PROCESSES_PER_PRINCIPAL (3) must not exceed TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER (2)"},
		{name: "bad TOOLBELT_SESSION_QUOTA_MB", env: map[string]string{"TOOLBELT_SESSION_QUOTA_MB": "-1"}, wantErr: "TOOLBELT_SESSION_QUOTA_MB must be a positive number of MiB"},
		{name: "bad TOOLBELT_AUDIT_RETENTION", env: map[string]string{"TOOLBELT_AUDIT_RETENTION": "a year"}, wantErr: "TOOLBELT_AUDIT_RETENTION must be a duration such as 8760h (0 keeps every entry)"},
		{name: "bad --audit-retention", args: []string{"--audit-retention", "-1h"}, wantErr: "--audit-retention must not be negative (0 keeps every entry)"},
		{name: "bad --learned-per-tool", args: []string{"--learned-per-tool", "0"}, wantErr: "--learned-per-tool must be at least 1"},
		{name: "bad --session-quota-mb", args: []string{"--session-quota-mb", "0"}, wantErr: "--session-quota-mb must be at least 1"},
		{name: "bad --sandbox", args: []string{"--sandbox", "docker"}, wantErr: `--sandbox "docker": use auto, bubblewrap, native or none`},
		{name: "bad --searxng-url", args: []string{"--searxng-url", "search.example"}, wantErr: `--searxng-url "search.example": use an absolute http or https URL`},
		{name: "arguments", args: []string{"extra"}, wantErr: "unexpected arguments: extra"},
		{name: "key sign-in off without a provider", env: map[string]string{"TOOLBELT_KEY_SIGNIN": "off"},
			wantErr: "TOOLBELT_KEY_SIGNIN=off needs TOOLBELT_OIDC_ISSUER and TOOLBELT_OIDC_CLIENT_ID"},
		{name: "bad TOOLBELT_KEY_SIGNIN", env: map[string]string{"TOOLBELT_KEY_SIGNIN": "maybe"}, wantErr: `TOOLBELT_KEY_SIGNIN "maybe": use on or off`},
		{name: "bad TOOLBELT_MAX_MCP_SESSIONS", env: map[string]string{"TOOLBELT_MAX_MCP_SESSIONS": "0"}, wantErr: "TOOLBELT_MAX_MCP_SESSIONS must be a positive integer"},
		{name: "bad TOOLBELT_MAX_PENDING_APPROVALS", env: map[string]string{"TOOLBELT_MAX_PENDING_APPROVALS": "many"}, wantErr: "TOOLBELT_MAX_PENDING_APPROVALS must be a positive integer"},
		{name: "short callback key", env: map[string]string{"TOOLBELT_CALLBACK_KEY": "short"}, wantErr: "TOOLBELT_CALLBACK_KEY must be at least 32 bytes"},
		{name: "bad alert rate", env: map[string]string{"TOOLBELT_ALERT_FAILURE_RATE": "2"}, wantErr: `TOOLBELT_ALERT_FAILURE_RATE "2": use a share between 0 and 1, such as 0.5`},
		{name: "bad alert window", env: map[string]string{"TOOLBELT_ALERT_WINDOW": "30s"}, wantErr: `TOOLBELT_ALERT_WINDOW "30s": use a duration of at least 1m, such as 15m`},
		{name: "bad alert minimum", env: map[string]string{"TOOLBELT_ALERT_MIN_CALLS": "0"}, wantErr: `TOOLBELT_ALERT_MIN_CALLS "0": use a whole number of at least 1`},
		{name: "bad alert webhook", env: map[string]string{"TOOLBELT_ALERT_WEBHOOK": "hooks"}, wantErr: "TOOLBELT_ALERT_WEBHOOK: use an absolute http or https URL"},
		{name: "not a postgres URL", env: map[string]string{"TOOLBELT_DATABASE_URL": "mysql://tb:hunter2@db/tb"},
			wantErr: "TOOLBELT_DATABASE_URL: use a Postgres URL such as postgres://toolbelt:PASSWORD@db.internal:5432/toolbelt"},
		{name: "not a redis URL", env: map[string]string{"TOOLBELT_REDIS_URL": "memcache://:hunter2@cache"},
			wantErr: "TOOLBELT_REDIS_URL: use a Redis URL such as redis://:PASSWORD@cache.internal:6379/0"},
		{name: "trusting every client", env: map[string]string{"TOOLBELT_TRUSTED_PROXIES": "10.0.0.1, 0.0.0.0/0"},
			wantErr: `TOOLBELT_TRUSTED_PROXIES: "0.0.0.0/0" would trust every client's X-Forwarded-For`},
		{name: "trusting every IPv6 client", env: map[string]string{"TOOLBELT_TRUSTED_PROXIES": "::/0"},
			wantErr: `TOOLBELT_TRUSTED_PROXIES: "::/0" would trust`},
		{name: "not a proxy address", env: map[string]string{"TOOLBELT_TRUSTED_PROXIES": "proxy.internal"},
			wantErr: `TOOLBELT_TRUSTED_PROXIES: "proxy.internal" is neither an address nor a CIDR range`},
		{name: "negative outage grace", env: map[string]string{"TOOLBELT_OUTAGE_GRACE": "-1m"}, wantErr: "TOOLBELT_OUTAGE_GRACE must be a duration such as 5m"},
		{name: "public URL over plain http", env: map[string]string{"TOOLBELT_PUBLIC_URL": "http://tb.example.com"}, wantErr: `TOOLBELT_PUBLIC_URL "http://tb.example.com": use https`},
		{name: "public URL with a path", env: map[string]string{"TOOLBELT_PUBLIC_URL": "https://tb.example.com/toolbelt"}, wantErr: `TOOLBELT_PUBLIC_URL "https://tb.example.com/toolbelt": give the origin only`},
		{name: "public URL with userinfo", env: map[string]string{"TOOLBELT_PUBLIC_URL": "https://a:b@tb.example.com"}, wantErr: `TOOLBELT_PUBLIC_URL "https://a:b@tb.example.com": give the origin only`},
		{name: "public URL not absolute", env: map[string]string{"TOOLBELT_PUBLIC_URL": "tb.example.com"}, wantErr: `TOOLBELT_PUBLIC_URL "tb.example.com": use the absolute URL`},
		{name: "public URL on a look-alike loopback", env: map[string]string{"TOOLBELT_PUBLIC_URL": "http://localhost.evil.io"}, wantErr: `TOOLBELT_PUBLIC_URL "http://localhost.evil.io": use https`},
		{name: "unknown OAuth mode", env: map[string]string{"TOOLBELT_OAUTH": "saml"}, wantErr: `TOOLBELT_OAUTH "saml": use embedded`},
		{name: "bad queue bound", env: map[string]string{"TOOLBELT_QUEUE_WAITING_PER_PRINCIPAL": "0"}, wantErr: "TOOLBELT_QUEUE_WAITING_PER_PRINCIPAL must be a positive integer"},
		{name: "bad callback share", env: map[string]string{"TOOLBELT_CALLBACK_WORKERS_PER_PRINCIPAL": "two"}, wantErr: "TOOLBELT_CALLBACK_WORKERS_PER_PRINCIPAL must be a positive integer"},
		{name: "bad private range", env: map[string]string{"TOOLBELT_HTTP_ALLOW_PRIVATE": "ten"}, wantErr: "TOOLBELT_HTTP_ALLOW_PRIVATE: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig(tc.args, lookupIn(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("config\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
	if _, err := ParseConfig([]string{"-h"}, lookupIn(nil)); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// TestDatabaseURLIsSecret: the database URL and its password are redacted
// like the other secrets, and the banner names the database without them.
func TestDatabaseURLIsSecret(t *testing.T) {
	for _, tc := range []struct{ url, password, shown string }{
		{"postgres://tb:hunter22@db.internal:5432/tb?sslmode=require", "hunter22", "postgres://tb:xxxxx@db.internal:5432/tb"},
		{"postgresql://tb@db/tb?password=hunter22&sslmode=disable", "hunter22", "postgresql://tb@db/tb"},
		{"", "", "data/toolbelt.db"},
	} {
		cfg := Config{DataDir: "data", DatabaseURL: tc.url}
		if got := cfg.DatabaseName(); got != tc.shown {
			t.Errorf("%s shown as %q, want %q", tc.url, got, tc.shown)
		}
		if vals := secretValues(cfg); !slices.Contains(vals, tc.url) || !slices.Contains(vals, tc.password) {
			t.Errorf("%s: secret values %q lack the URL or its password", tc.url, vals)
		}
	}
}

// TestRedisURLIsSecret: the Redis URL and its password are redacted like
// the other secrets, and the banner names the server without them.
func TestRedisURLIsSecret(t *testing.T) {
	for _, tc := range []struct{ url, password, shown string }{
		{"redis://:hunter22@cache.internal:6379/0", "hunter22", "redis://:xxxxx@cache.internal:6379/0"},
		{"rediss://tb:hunter22@cache/1?dial_timeout=3s", "hunter22", "rediss://tb:xxxxx@cache/1"},
		{"unix:///run/redis.sock?db=2", "", "unix:///run/redis.sock"},
		{"", "", "none"},
	} {
		cfg := Config{DataDir: "data", RedisURL: tc.url}
		if got := cfg.RedisName(); got != tc.shown {
			t.Errorf("%s shown as %q, want %q", tc.url, got, tc.shown)
		}
		if vals := secretValues(cfg); !slices.Contains(vals, tc.url) || !slices.Contains(vals, tc.password) {
			t.Errorf("%s: secret values %q lack the URL or its password", tc.url, vals)
		}
	}
}

// TestParseBenchConfig: the retrieval benchmark needs its two files and
// takes the embedder from the environment unless flags say otherwise.
func TestParseBenchConfig(t *testing.T) {
	env := lookupIn(map[string]string{"TOOLBELT_OLLAMA_URL": "http://o", "TOOLBELT_EMBED_MODEL": "m"})
	got, err := ParseBenchConfig([]string{"--tools", "t.jsonl", "--queries", "q.jsonl", "--json", "--embed-model", "f"}, env)
	want := BenchConfig{Tools: "t.jsonl", Queries: "q.jsonl", JSON: true, OllamaURL: "http://o", EmbedModel: "f"}
	if err != nil || got != want {
		t.Errorf("%+v %v, want %+v", got, err, want)
	}
	if _, err := ParseBenchConfig([]string{"--tools", "t.jsonl"}, env); err == nil || err.Error() != "bench retrieval needs --tools and --queries" {
		t.Errorf("without --queries: %v", err)
	}
}

// Every variable the server reads is in both settings tables: the
// README's and the operations guide's.
func TestEverySettingDocumented(t *testing.T) {
	read := map[string]bool{}
	if _, err := ParseConfig(nil, func(name string) (string, bool) {
		read[name] = true
		return "", false
	}); err != nil {
		t.Fatal(err)
	}
	if len(read) < 20 {
		t.Fatalf("ParseConfig read only %d variables: %v", len(read), read)
	}
	for _, doc := range []string{"../README.md", "../docs/operations.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for name := range read {
			if !strings.Contains(string(b), "| `"+name+"` |") {
				t.Errorf("%s has no row for %s", doc, name)
			}
		}
	}
}
