package app

import (
	"flag"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"toolbelt/services/access"
	"toolbelt/services/audit"
	"toolbelt/services/callbacks"
	"toolbelt/services/identity"
	"toolbelt/services/invoke"
	"toolbelt/services/netpolicy"
	"toolbelt/services/ops"
	"toolbelt/services/runners"
	"toolbelt/services/sandbox"
	"toolbelt/services/selection"
	"toolbelt/services/upstream"
	"toolbelt/web"
)

// Config is every setting, read once at start from TOOLBELT_* variables
// with flags overriding them. ParseConfig is the one place that reads the
// environment: nothing New builds looks at it again.
type Config struct {
	Addr        string
	DataDir     string
	AdminKey    string
	LogLevel    string
	LogFormat   string
	OllamaURL   string
	EmbedModel  string
	KeepLearned int
	Sandbox     string
	SearXNG     string
	// Caps bound what one principal may hold at once (access.PrincipalCaps).
	Caps access.PrincipalCaps
	// ShutdownTimeout is how long calls in flight may finish after
	// SIGTERM or SIGINT before they are cancelled as interrupted.
	ShutdownTimeout time.Duration
	// Alerts says when a tool's failure rate raises an alert.
	Alerts ops.AlertConfig
	// ToolsDir holds tool files (YAML or JSON), watched while serving.
	ToolsDir string
	// Instance names this instance in /readyz, the metrics and the logs
	// (TOOLBELT_INSTANCE); empty: hostname-pid.
	Instance string
	// SessionQuotaMB is the disk quota of each session's work directory.
	SessionQuotaMB int
	// UpstreamProcesses bound a session-isolated upstream server's
	// processes (TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER, _PER_PRINCIPAL).
	UpstreamProcesses upstream.ProcessCaps
	// AuditRetention is how long audit log entries are kept
	// (TOOLBELT_AUDIT_RETENTION); 0 keeps them all.
	AuditRetention time.Duration
	// NetPolicy is what http tools, the browser and OpenAPI imports may
	// reach (TOOLBELT_HTTP_ALLOW_HOSTS, TOOLBELT_HTTP_ALLOW_PRIVATE).
	NetPolicy netpolicy.Policy
	// Secrets are the values of the variables named in TOOLBELT_SECRETS,
	// by name: http tools may reference them in headers as {{env.NAME}},
	// and they are redacted verbatim from tool output and call records.
	Secrets map[string]string
	// Chromium is the browser browser_navigate drives (TOOLBELT_CHROMIUM);
	// empty: the first one found on PATH.
	Chromium string
	// CallbackKey is the key the callback signing secrets are derived
	// from (TOOLBELT_CALLBACK_KEY, at least 32 bytes); empty: the one in
	// the data directory's callback.key, made at the first start.
	CallbackKey string
	// Callbacks bound the delivery of call results to callback URLs.
	Callbacks callbacks.Settings
	// DatabaseURL is the Postgres database everything is stored in
	// (TOOLBELT_DATABASE_URL, postgres://…); empty: the SQLite file in the
	// data directory. It holds a password: never logged, shown redacted.
	DatabaseURL string
	// RedisURL is the Redis server several instances share what they must
	// agree on in real time through (TOOLBELT_REDIS_URL, redis://,
	// rediss:// or unix://): the results cache, the category queues,
	// change notices; the queues and notices fall back to Postgres while
	// it does not answer. Rate limits and key guesses are counted in
	// Postgres either way. Empty: instances on Postgres send change
	// notices over LISTEN/NOTIFY, share the category queues in the
	// database, and cache results each on its own. It may hold a
	// password: never logged, shown redacted.
	RedisURL string
	// TrustedProxies are the addresses and CIDR ranges of the reverse
	// proxies in front of the server (TOOLBELT_TRUSTED_PROXIES,
	// comma-separated): a request from one of them is taken to come from
	// the client its X-Forwarded-For names (gin's ClientIP), for the
	// key-guess limiter above all. Empty: nobody's header is believed,
	// the peer is the client.
	TrustedProxies []string
	// MCPAllowedOrigins are the web origins (scheme://host[:port]) whose
	// pages may send requests to /mcp (TOOLBELT_MCP_ALLOWED_ORIGINS,
	// comma-separated), besides pages served from this machine's own
	// loopback names. A request without Origin (every non-browser client)
	// is not affected.
	MCPAllowedOrigins []string
	// QueueWaiting bounds the calls waiting per category queue
	// (TOOLBELT_QUEUE_WAITING) and QueueWaitingEach those of one principal
	// among them (TOOLBELT_QUEUE_WAITING_PER_PRINCIPAL), async calls
	// counted from their submission.
	QueueWaiting, QueueWaitingEach int

	// OutageGrace is how long, while the database does not answer, the
	// keys this instance checked before keep working and their calls are
	// spooled to the journal (TOOLBELT_OUTAGE_GRACE); past it every call
	// is refused and /readyz answers 503. 0: refused at once.
	OutageGrace time.Duration

	// PublicURL is the server's origin as its clients reach it
	// (TOOLBELT_PUBLIC_URL: scheme://host[:port], https unless the host
	// is a loopback name): the issuer of the embedded authorization
	// server and the name of the OAuth resources /mcp and /api/v1.
	// Empty: http on the listen address, for one machine.
	PublicURL string
	// OAuth is how access tokens are issued (TOOLBELT_OAUTH): embedded
	// (Toolbelt's own authorization server, the default), oidc (the
	// organisation's OpenID provider) or off (API keys only).
	OAuth string
	// OIDC is the external OpenID provider (TOOLBELT_OIDC_*): its JWT
	// access tokens are accepted at /mcp and /api/v1, its people get
	// principals at their first sign-in. Zero: none.
	OIDC identity.Settings
	// OIDCName is the identity provider as people know it, on the
	// console's "Sign in with …" button (TOOLBELT_OIDC_NAME); empty: the
	// issuer's host.
	OIDCName string
	// KeySignIn lets the console's sign-in page take an API key
	// (TOOLBELT_KEY_SIGNIN, on by default): off leaves the console to the
	// identity provider; keys keep working on the API and /mcp.
	KeySignIn bool
	// OAuthKey encrypts the embedded authorization server's access tokens
	// and its stored signing key (TOOLBELT_OAUTH_KEY, at least 32 bytes);
	// empty: the one in the data directory's oauth.key, made at the first
	// start. Every instance sharing a database needs the same.
	OAuthKey string
	// OAuthDCR turns on dynamic client registration (RFC 7591) at
	// /oauth/register (TOOLBELT_OAUTH_DCR): anyone may then register a
	// public client (a person still consents to each).
	OAuthDCR bool
	// VaultKey seals the credentials people connect (their upstream
	// tokens and stored secrets): TOOLBELT_VAULT_KEY, 32 bytes in hex or
	// base64, more separated by commas while rotating (the first seals);
	// empty: the data directory's vault.key, made at the first start.
	// Every instance sharing a database needs the same.
	VaultKey string
}

// The identity modes of Config.OAuth.
const (
	OAuthEmbedded = "embedded"
	OAuthOIDC     = "oidc"
	OAuthOff      = "off"
)

// ParseConfig reads the serve command's configuration from args and the
// environment, which lookup reads (os.LookupEnv in main). -h answers
// flag.ErrHelp after printing the flags.
func ParseConfig(args []string, lookup func(string) (string, bool)) (Config, error) {
	env := func(name, def string) string {
		if v, ok := lookup(name); ok && v != "" {
			return v
		}
		return def
	}
	cfg := Config{AdminKey: env("TOOLBELT_ADMIN_KEY", ""), Chromium: env("TOOLBELT_CHROMIUM", ""),
		CallbackKey: env("TOOLBELT_CALLBACK_KEY", ""), Callbacks: callbacks.Defaults(), DatabaseURL: env("TOOLBELT_DATABASE_URL", ""),
		RedisURL: env("TOOLBELT_REDIS_URL", "")}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", env("TOOLBELT_ADDR", ":8080"), "listen address (TOOLBELT_ADDR)")
	fs.StringVar(&cfg.DataDir, "data-dir", env("TOOLBELT_DATA_DIR", "./data"), "directory holding the SQLite database (TOOLBELT_DATA_DIR)")
	fs.StringVar(&cfg.LogLevel, "log-level", env("TOOLBELT_LOG_LEVEL", "info"), "debug, info, warn or error (TOOLBELT_LOG_LEVEL)")
	fs.StringVar(&cfg.LogFormat, "log-format", env("TOOLBELT_LOG_FORMAT", "auto"), "auto (text on a terminal, JSON otherwise), json or text (TOOLBELT_LOG_FORMAT)")
	fs.StringVar(&cfg.OllamaURL, "ollama-url", env("TOOLBELT_OLLAMA_URL", ""), "Ollama base URL for embeddings (TOOLBELT_OLLAMA_URL); the built-in embedder when empty or unreachable")
	fs.StringVar(&cfg.EmbedModel, "embed-model", env("TOOLBELT_EMBED_MODEL", "nomic-embed-text"), "Ollama embedding model (TOOLBELT_EMBED_MODEL)")
	fs.StringVar(&cfg.Sandbox, "sandbox", env("TOOLBELT_SANDBOX", sandbox.Auto), "auto, bubblewrap, native or none (TOOLBELT_SANDBOX): how commands of tools are isolated")
	fs.StringVar(&cfg.ToolsDir, "tools-dir", env("TOOLBELT_TOOLS_DIR", "./tools.d"), "directory of tool files (YAML or JSON), applied at start and watched (TOOLBELT_TOOLS_DIR); empty: none")
	fs.StringVar(&cfg.SearXNG, "searxng-url", env("TOOLBELT_SEARXNG_URL", ""), "SearXNG-compatible search endpoint for web_search (TOOLBELT_SEARXNG_URL)")
	fs.StringVar(&cfg.Instance, "instance", env("TOOLBELT_INSTANCE", ""), "this instance's name in /readyz and the metrics (TOOLBELT_INSTANCE); hostname-pid when empty")
	keep, err := strconv.Atoi(env("TOOLBELT_LEARNED_PER_TOOL", strconv.Itoa(selection.DefaultKeepLearned)))
	if err != nil || keep < 1 {
		return cfg, fmt.Errorf("TOOLBELT_LEARNED_PER_TOOL must be a positive integer")
	}
	fs.IntVar(&cfg.KeepLearned, "learned-per-tool", keep, "learned queries kept per tool, oldest dropped (TOOLBELT_LEARNED_PER_TOOL)")
	caps := access.DefaultPrincipalCaps()
	for _, c := range []struct {
		name string
		to   *int
	}{{"TOOLBELT_MAX_PENDING_APPROVALS", &caps.PendingApprovals}, {"TOOLBELT_MAX_MCP_SESSIONS", &caps.MCPSessions}, {"TOOLBELT_MAX_EVENT_STREAMS", &caps.EventStreams}} {
		v, err := strconv.Atoi(env(c.name, strconv.Itoa(*c.to)))
		if err != nil || v < 1 {
			return cfg, fmt.Errorf("%s must be a positive integer: what one principal may hold at once", c.name)
		}
		*c.to = v
	}
	cfg.Caps = caps
	procs := upstream.DefaultProcessCaps()
	for _, c := range []struct {
		name string
		to   *int
	}{{"TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER", &procs.PerServer}, {"TOOLBELT_UPSTREAM_PROCESSES_PER_PRINCIPAL", &procs.PerPrincipal}} {
		v, err := strconv.Atoi(env(c.name, strconv.Itoa(*c.to)))
		if err != nil || v < 1 {
			return cfg, fmt.Errorf("%s must be a positive integer: the processes a session-isolated upstream server may run", c.name)
		}
		*c.to = v
	}
	if procs.PerPrincipal > procs.PerServer {
		return cfg, fmt.Errorf("TOOLBELT_UPSTREAM_PROCESSES_PER_PRINCIPAL (%d) must not exceed TOOLBELT_UPSTREAM_PROCESSES_PER_SERVER (%d)", procs.PerPrincipal, procs.PerServer)
	}
	cfg.UpstreamProcesses = procs
	grace, err := time.ParseDuration(env("TOOLBELT_SHUTDOWN_TIMEOUT", "20s"))
	if err != nil || grace < 0 {
		return cfg, fmt.Errorf("TOOLBELT_SHUTDOWN_TIMEOUT must be a duration such as 20s")
	}
	quota, err := strconv.Atoi(env("TOOLBELT_SESSION_QUOTA_MB", strconv.Itoa(runners.DefaultSessionQuota>>20)))
	if err != nil || quota < 1 {
		return cfg, fmt.Errorf("TOOLBELT_SESSION_QUOTA_MB must be a positive number of MiB")
	}
	fs.IntVar(&cfg.SessionQuotaMB, "session-quota-mb", quota, "disk quota of each session's work directory, in MiB (TOOLBELT_SESSION_QUOTA_MB)")
	retention, err := time.ParseDuration(env("TOOLBELT_AUDIT_RETENTION", audit.DefaultRetention.String()))
	if err != nil || retention < 0 {
		return cfg, fmt.Errorf("TOOLBELT_AUDIT_RETENTION must be a duration such as 8760h (0 keeps every entry)")
	}
	fs.DurationVar(&cfg.AuditRetention, "audit-retention", retention, "how long audit log entries are kept, 0 for ever (TOOLBELT_AUDIT_RETENTION)")
	if cfg.OutageGrace, err = time.ParseDuration(env("TOOLBELT_OUTAGE_GRACE", access.DefaultOutageGrace.String())); err != nil || cfg.OutageGrace < 0 {
		return cfg, fmt.Errorf("TOOLBELT_OUTAGE_GRACE must be a duration such as 5m (0 refuses calls as soon as the database does not answer)")
	}
	cfg.OAuthKey = env("TOOLBELT_OAUTH_KEY", "")
	cfg.VaultKey = env("TOOLBELT_VAULT_KEY", "")
	if cfg.OAuthDCR, err = strconv.ParseBool(env("TOOLBELT_OAUTH_DCR", "false")); err != nil {
		return cfg, fmt.Errorf("TOOLBELT_OAUTH_DCR must be true or false")
	}
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", grace, "how long calls in flight may finish on SIGTERM before they are interrupted (TOOLBELT_SHUTDOWN_TIMEOUT)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.KeepLearned < 1 {
		return cfg, fmt.Errorf("--learned-per-tool must be at least 1")
	}
	if cfg.AuditRetention < 0 {
		return cfg, fmt.Errorf("--audit-retention must not be negative (0 keeps every entry)")
	}
	if cfg.SessionQuotaMB < 1 {
		return cfg, fmt.Errorf("--session-quota-mb must be at least 1")
	}
	if !slices.Contains([]string{sandbox.Auto, sandbox.Bubblewrap, sandbox.Native, sandbox.None}, cfg.Sandbox) {
		return cfg, fmt.Errorf("--sandbox %q: use auto, bubblewrap, native or none", cfg.Sandbox)
	}
	if cfg.SearXNG != "" {
		if u, err := url.Parse(cfg.SearXNG); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, fmt.Errorf("--searxng-url %q: use an absolute http or https URL", cfg.SearXNG)
		}
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if cfg.Alerts, err = alertConfig(env); err != nil {
		return cfg, err
	}
	if cfg.NetPolicy, err = netpolicy.Parse(env("TOOLBELT_HTTP_ALLOW_HOSTS", ""), env("TOOLBELT_HTTP_ALLOW_PRIVATE", "")); err != nil {
		return cfg, fmt.Errorf("TOOLBELT_HTTP_ALLOW_PRIVATE: %w", err)
	}
	if cfg.OAuthKey != "" && len(cfg.OAuthKey) < 32 {
		return cfg, fmt.Errorf("TOOLBELT_OAUTH_KEY must be at least 32 bytes (such as the output of: openssl rand -hex 32)")
	}
	if cfg.CallbackKey != "" && len(cfg.CallbackKey) < 32 {
		return cfg, fmt.Errorf("TOOLBELT_CALLBACK_KEY must be at least 32 bytes (such as the output of: openssl rand -hex 32)")
	}
	if err := cfg.checkKeys(); err != nil {
		return cfg, err
	}
	if cfg.DatabaseURL != "" {
		// The message never repeats the URL: it holds a password.
		if u, err := url.Parse(cfg.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return cfg, fmt.Errorf("TOOLBELT_DATABASE_URL: use a Postgres URL such as postgres://toolbelt:PASSWORD@db.internal:5432/toolbelt")
		}
	}
	if cfg.RedisURL != "" {
		if _, err := redis.ParseURL(cfg.RedisURL); err != nil {
			return cfg, fmt.Errorf("TOOLBELT_REDIS_URL: use a Redis URL such as redis://:PASSWORD@cache.internal:6379/0")
		}
	}
	if cfg.TrustedProxies, err = trustedProxies(env("TOOLBELT_TRUSTED_PROXIES", "")); err != nil {
		return cfg, err
	}
	if cfg.MCPAllowedOrigins, err = web.ParseOrigins(env("TOOLBELT_MCP_ALLOWED_ORIGINS", "")); err != nil {
		return cfg, fmt.Errorf("TOOLBELT_MCP_ALLOWED_ORIGINS: %w", err)
	}
	if cfg.QueueWaiting, err = positive(env, "TOOLBELT_QUEUE_WAITING", invoke.DefaultQueueWaiting); err != nil {
		return cfg, err
	}
	if cfg.QueueWaitingEach, err = positive(env, "TOOLBELT_QUEUE_WAITING_PER_PRINCIPAL", invoke.DefaultQueueWaitingEach); err != nil {
		return cfg, err
	}
	if cfg.Callbacks.Workers, err = positive(env, "TOOLBELT_CALLBACK_WORKERS", cfg.Callbacks.Workers); err != nil {
		return cfg, err
	}
	if cfg.Callbacks.WorkersEach, err = positive(env, "TOOLBELT_CALLBACK_WORKERS_PER_PRINCIPAL", cfg.Callbacks.WorkersEach); err != nil {
		return cfg, err
	}
	if cfg.PublicURL, err = publicURL(env("TOOLBELT_PUBLIC_URL", "")); err != nil {
		return cfg, err
	}
	if cfg.OAuth = env("TOOLBELT_OAUTH", OAuthEmbedded); !slices.Contains([]string{OAuthEmbedded, OAuthOIDC, OAuthOff}, cfg.OAuth) {
		return cfg, fmt.Errorf("TOOLBELT_OAUTH %q: use embedded (Toolbelt issues access tokens), oidc (your OpenID provider does) or off (API keys only)", cfg.OAuth)
	}
	if cfg.OIDC, err = oidcSettings(env); err != nil {
		return cfg, err
	}
	if cfg.OAuth == OAuthOIDC && !cfg.OIDC.Enabled() {
		return cfg, fmt.Errorf("TOOLBELT_OAUTH=oidc needs TOOLBELT_OIDC_ISSUER: the issuer URL of the OpenID provider that issues the access tokens")
	}
	cfg.OIDCName = strings.TrimSpace(env("TOOLBELT_OIDC_NAME", ""))
	if cfg.KeySignIn, err = keySignIn(env("TOOLBELT_KEY_SIGNIN", "on"), cfg.OIDC); err != nil {
		return cfg, err
	}
	cfg.Secrets = secrets(env)
	return cfg, nil
}

// keySignIn reads TOOLBELT_KEY_SIGNIN. Off needs the console's client at
// an identity provider: with neither, nobody could sign in to the console.
func keySignIn(v string, oidc identity.Settings) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		if !oidc.Enabled() || oidc.ClientID == "" {
			return false, fmt.Errorf("TOOLBELT_KEY_SIGNIN=off needs TOOLBELT_OIDC_ISSUER and TOOLBELT_OIDC_CLIENT_ID: without an identity provider nobody could sign in to the console")
		}
		return false, nil
	}
	return false, fmt.Errorf("TOOLBELT_KEY_SIGNIN %q: use on or off (off: the console signs in only through the identity provider)", v)
}

// positive reads the positive integer setting name, def when unset.
func positive(env func(name, def string) string, name string, def int) (int, error) {
	n, err := strconv.Atoi(env(name, strconv.Itoa(def)))
	if err != nil || n < 1 {
		return def, fmt.Errorf("%s must be a positive integer", name)
	}
	return n, nil
}

// trustedProxies reads TOOLBELT_TRUSTED_PROXIES: addresses or CIDR
// ranges, comma-separated. A range as wide as a whole address family
// would believe any client's header, so it is refused.
func trustedProxies(list string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(item)
		if err != nil {
			addr, aerr := netip.ParseAddr(item)
			if aerr != nil {
				return nil, fmt.Errorf("TOOLBELT_TRUSTED_PROXIES: %q is neither an address nor a CIDR range (such as 10.0.0.0/8)", item)
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		if prefix.Bits() == 0 {
			return nil, fmt.Errorf("TOOLBELT_TRUSTED_PROXIES: %q would trust every client's X-Forwarded-For; name the proxies' own addresses", item)
		}
		out = append(out, prefix.Masked().String())
	}
	return out, nil
}

// DatabaseName says where the data is kept, for the start banner: the
// Postgres URL without its password and parameters (which may hold one
// too), or the SQLite file.
func (cfg Config) DatabaseName() string {
	if cfg.DatabaseURL == "" {
		return filepath.Join(cfg.DataDir, "toolbelt.db")
	}
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		return "postgres"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
}

// RedisName says which Redis is shared, for the start banner: the URL
// without its password and parameters, or "none".
func (cfg Config) RedisName() string {
	if cfg.RedisURL == "" {
		return "none"
	}
	u, err := url.Parse(cfg.RedisURL)
	if err != nil {
		return "redis"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
}

// redisPassword is the password of the Redis URL, "" without one.
func redisPassword(redisURL string) string {
	if redisURL == "" {
		return ""
	}
	if opts, err := redis.ParseURL(redisURL); err == nil {
		return opts.Password
	}
	return ""
}

// databasePassword is the password of the database URL, "" without one.
func databasePassword(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok {
		return pw
	}
	return u.Query().Get("password")
}

// alertConfig reads the failure-rate alert settings from the environment.
func alertConfig(env func(name, def string) string) (ops.AlertConfig, error) {
	a := ops.DefaultAlertConfig()
	if v := env("TOOLBELT_ALERT_FAILURE_RATE", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return a, fmt.Errorf("TOOLBELT_ALERT_FAILURE_RATE %q: use a share between 0 and 1, such as 0.5", v)
		}
		a.Threshold = f
	}
	if v := env("TOOLBELT_ALERT_WINDOW", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			return a, fmt.Errorf("TOOLBELT_ALERT_WINDOW %q: use a duration of at least 1m, such as 15m", v)
		}
		a.Window = d
	}
	if v := env("TOOLBELT_ALERT_MIN_CALLS", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return a, fmt.Errorf("TOOLBELT_ALERT_MIN_CALLS %q: use a whole number of at least 1", v)
		}
		a.MinCalls = n
	}
	if v := env("TOOLBELT_ALERT_WEBHOOK", ""); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return a, fmt.Errorf("TOOLBELT_ALERT_WEBHOOK: use an absolute http or https URL")
		}
		a.Webhook = v
	}
	return a, nil
}

// secrets are the variables named in TOOLBELT_SECRETS (comma-separated
// names, e.g. the variables http tools take headers from) and their values.
func secrets(env func(name, def string) string) map[string]string {
	var vals map[string]string // nil when none is configured
	for _, name := range strings.Split(env("TOOLBELT_SECRETS", ""), ",") {
		if name = strings.TrimSpace(name); name != "" {
			if vals == nil {
				vals = map[string]string{}
			}
			vals[name] = env(name, "")
		}
	}
	return vals
}

// secretValues are the values redacted verbatim from tool output and call
// records: the admin key, the callback key, the database and Redis URLs
// and their passwords, the OpenID client secret, and the configured
// secrets.
func secretValues(cfg Config) []string {
	vals := []string{cfg.AdminKey, cfg.CallbackKey, cfg.OAuthKey, cfg.VaultKey, cfg.DatabaseURL, databasePassword(cfg.DatabaseURL),
		cfg.RedisURL, redisPassword(cfg.RedisURL), cfg.OIDC.ClientSecret}
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		vals = append(vals, cfg.Secrets[name])
	}
	return vals
}

// publicURL checks TOOLBELT_PUBLIC_URL: an origin, since it names the
// token issuer and the resources clients ask tokens for; https, since
// tokens travel to it, unless it is this machine.
func publicURL(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("TOOLBELT_PUBLIC_URL %q: use the absolute URL clients reach the server at, such as https://toolbelt.example.com", v)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("TOOLBELT_PUBLIC_URL %q: give the origin only (scheme://host[:port]): Toolbelt serves from the root of its host", v)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return "", fmt.Errorf("TOOLBELT_PUBLIC_URL %q: use https (access tokens travel to it); http is for loopback addresses only", v)
	}
	return u.Scheme + "://" + u.Host, nil
}

// loopbackHost reports whether host names this machine.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
