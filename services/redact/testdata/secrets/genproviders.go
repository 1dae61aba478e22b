//go:build ignore

// Command genproviders writes providers.jsonl: fake credentials in the
// formats their issuers document (prefixes, lengths, alphabets, checksum-free
// layouts), each in the snippet where such a credential is usually found, and
// look-alike text that holds no secret (placeholders, hashes, identifiers,
// public keys). Every value is drawn from a seeded generator: none is real.
//
//	go run services/redact/testdata/secrets/genproviders.go > services/redact/testdata/secrets/providers.jsonl
package main

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

var rng = rand.New(rand.NewPCG(2026, 14))

const (
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower  = "abcdefghijklmnopqrstuvwxyz"
	digits = "0123456789"
	alnum  = upper + lower + digits
	hexa   = "0123456789abcdef"
	b32    = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b64    = alnum + "+/"
	b64url = alnum + "-_"
	punct  = "!#$%&*+-.=?@^_~"
)

func pick(set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[rng.IntN(len(set))]
	}
	return string(b)
}

func oneOf(xs ...string) string { return xs[rng.IntN(len(xs))] }

// password is a human-chosen-looking but random password: mixed classes.
func password() string {
	switch rng.IntN(3) {
	case 0:
		return pick(alnum+punct, 12+rng.IntN(10))
	case 1:
		w := oneOf("Falcon", "river", "Quartz", "maple", "Orbit", "tundra", "Copper", "violet")
		return w + pick(digits, 2+rng.IntN(3)) + pick(punct, 1) + pick(alnum, 4+rng.IntN(4))
	default:
		return pick(alnum, 20+rng.IntN(12))
	}
}

func b64enc(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func jwt() string {
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"` + oneOf("HS256", "RS256", "ES256") + `","typ":"JWT"}`))
	p := enc.EncodeToString([]byte(fmt.Sprintf(`{"sub":"%d","name":"%s","iat":%d,"exp":%d,"scope":"%s"}`,
		rng.IntN(1e6), oneOf("alice", "build-bot", "svc-orders"), 1.7e9+rng.IntN(1e7), 1.8e9+rng.IntN(1e7), oneOf("read write", "admin", "repo"))))
	return h + "." + p + "." + pick(b64url, 43)
}

func pem(kind string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-----BEGIN %s-----\n", kind)
	lead := map[string]string{"RSA PRIVATE KEY": "MIIEow", "PRIVATE KEY": "MIIEvQ", "EC PRIVATE KEY": "MHcCAQEE", "OPENSSH PRIVATE KEY": "b3BlbnNzaC1rZXktdjEAAAAA", "ENCRYPTED PRIVATE KEY": "MIIFHzBJ", "DSA PRIVATE KEY": "MIIBuwIBAAKBgQ"}[kind]
	body := lead + pick(b64, 64*(6+rng.IntN(8))-len(lead))
	for len(body) > 64 {
		b.WriteString(body[:64] + "\n")
		body = body[64:]
	}
	b.WriteString(body + "==\n")
	fmt.Fprintf(&b, "-----END %s-----", kind)
	return b.String()
}

type rec struct {
	Source  string   `json:"source"`
	Format  string   `json:"rule"`
	TP      bool     `json:"tp"`
	Text    string   `json:"text"`
	Secrets []string `json:"secrets,omitempty"`
}

// format makes one credential and the snippet holding it; the secrets are
// the substrings that must not survive.
type format struct {
	name string
	make func() (text string, secrets []string)
}

func tok(name string, value func() string, snippets ...string) format {
	return format{name, func() (string, []string) {
		v := value()
		s := snippets[rng.IntN(len(snippets))]
		return strings.ReplaceAll(s, "{s}", v), []string{v}
	}}
}

var formats = []format{
	tok("aws-access-key-id", func() string { return oneOf("AKIA", "ASIA") + pick(b32, 16) },
		"aws_access_key_id = {s}", "export AWS_ACCESS_KEY_ID={s}", `"AccessKeyId": "{s}",`, "AWS_ACCESS_KEY_ID: {s}"),
	format{"aws-secret-access-key", func() (string, []string) {
		id, sec := "AKIA"+pick(b32, 16), pick(b64, 40)
		return oneOf(
			"[default]\naws_access_key_id = "+id+"\naws_secret_access_key = "+sec+"\nregion = eu-west-1",
			"export AWS_ACCESS_KEY_ID="+id+"\nexport AWS_SECRET_ACCESS_KEY="+sec,
			`{"AccessKeyId": "`+id+`", "SecretAccessKey": "`+sec+`", "Expiration": "2026-12-01T09:00:00Z"}`,
		), []string{id, sec}
	}},
	tok("github-pat-classic", func() string { return oneOf("ghp_", "gho_", "ghu_", "ghs_", "ghr_") + pick(alnum, 36) },
		"GITHUB_TOKEN={s}", "git clone https://x-access-token:{s}@github.com/acme/infra.git", "  token: {s}", `{"token": "{s}"}`),
	tok("github-pat-fine-grained", func() string { return "github_pat_" + pick(alnum, 22) + "_" + pick(alnum, 59) },
		"GH_TOKEN={s}", "gh auth login --with-token <<< {s}", `"github_token": "{s}"`),
	tok("gitlab-pat", func() string { return "glpat-" + pick(alnum+"-_", 20) },
		"GITLAB_TOKEN={s}", "git remote set-url origin https://oauth2:{s}@gitlab.com/acme/app.git", `private_token: "{s}"`),
	tok("slack-bot-token", func() string {
		return oneOf("xoxb-", "xoxp-") + pick(digits, 12) + "-" + pick(digits, 13) + "-" + pick(alnum, 24)
	}, "SLACK_BOT_TOKEN={s}", `slack_token: "{s}"`, `client = WebClient(token="{s}")`),
	tok("slack-webhook", func() string {
		return "https://hooks.slack.com/services/T" + pick(upper+digits, 10) + "/B" + pick(upper+digits, 10) + "/" + pick(alnum, 24)
	}, "SLACK_WEBHOOK_URL={s}", `webhook_url: "{s}"`, `curl -X POST -H 'Content-type: application/json' --data '{"text":"deploy done"}' {s}`),
	tok("stripe-secret-key", func() string { return oneOf("sk_live_", "rk_live_", "sk_test_") + pick(alnum, 24+rng.IntN(75)) },
		"STRIPE_SECRET_KEY={s}", `stripe.api_key = "{s}"`, "curl https://api.stripe.com/v1/charges -u {s}:"),
	tok("google-api-key", func() string { return "AIza" + pick(b64url, 35) },
		"GOOGLE_API_KEY={s}", `"apiKey": "{s}",`, "https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={s}"),
	format{"gcp-service-account", func() (string, []string) {
		k := pem("PRIVATE KEY")
		js, _ := json.MarshalIndent(map[string]string{"type": "service_account", "project_id": "acme-prod-" + pick(digits, 4),
			"private_key_id": pick(hexa, 40), "private_key": k + "\n", "client_email": "deployer@acme-prod.iam.gserviceaccount.com"}, "", "  ")
		body := strings.Split(k, "\n")[1]
		return string(js), []string{body}
	}},
	tok("openai-api-key", func() string {
		return oneOf("sk-proj-", "sk-svcacct-", "sk-") + pick(b64url, 20+rng.IntN(50)) + "T3BlbkFJ" + pick(b64url, 20+rng.IntN(50))
	}, "OPENAI_API_KEY={s}", `client = OpenAI(api_key="{s}")`, `"openai_key": "{s}"`),
	tok("anthropic-api-key", func() string { return oneOf("sk-ant-api03-", "sk-ant-admin01-") + pick(b64url, 93) + "AA" },
		"ANTHROPIC_API_KEY={s}", `anthropic.Anthropic(api_key="{s}")`, `  x-api-key: {s}`),
	tok("jwt", jwt, "Authorization: Bearer {s}", `{"access_token": "{s}", "token_type": "Bearer", "expires_in": 3600}`, "id_token={s}", "export KUBE_TOKEN={s}"),
	format{"private-key-pem", func() (string, []string) {
		k := pem(oneOf("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY"))
		return oneOf(k, "$ cat ~/.ssh/id_deploy\n"+k, "tls:\n  key: |\n    "+strings.ReplaceAll(k, "\n", "\n    ")), []string{strings.Split(k, "\n")[2]}
	}},
	format{"database-url", func() (string, []string) {
		u, p := oneOf("app", "admin", "orders_rw", "postgres", "root"), password()
		p = strings.NewReplacer("@", "", "/", "", ":", "", "#", "", "?", "", "%", "").Replace(p)
		host := oneOf("db.internal", "10.0.3.17", "orders.cluster-c9xk2.eu-west-1.rds.amazonaws.com", "localhost")
		url := oneOf("postgres://", "postgresql://", "mysql://", "mongodb+srv://", "redis://", "amqp://") + u + ":" + p + "@" + host + ":5432/" + oneOf("orders", "app", "prod")
		return oneOf("DATABASE_URL="+url, `  url: "`+url+`"`, `{"dsn": "`+url+`"}`, "psql "+url, "2026-11-30 10:02:11 connecting to "+url), []string{p}
	}},
	tok("bearer-opaque", func() string { return pick(alnum+"-._~", 32+rng.IntN(33)) },
		"Authorization: Bearer {s}", `curl -H "Authorization: Bearer {s}" https://api.acme.dev/v2/orders`, `headers = {"Authorization": "Bearer {s}"}`,
		`fetch(url, { headers: { Authorization: "Bearer {s}" } })`, "> GET /v1/me HTTP/1.1\n> Authorization: Bearer {s}\n> Accept: */*"),
	format{"basic-auth", func() (string, []string) {
		cred := b64enc(oneOf("ci", "admin", "svc-build") + ":" + password())
		return oneOf("Authorization: Basic "+cred, `curl -H "Authorization: Basic `+cred+`" https://registry.acme.dev/v2/_catalog`,
			`{"auths": {"registry.acme.dev": {"auth": "`+cred+`"}}}`), []string{cred}
	}},
	tok("api-key-header", func() string { return pick(alnum, 32+rng.IntN(16)) },
		`curl -H "X-API-Key: {s}" https://api.acme.dev/v1/items`, `-H "api-key: {s}"`, "X-Api-Key: {s}"),
	tok("password-assignment", password,
		"DB_PASSWORD={s}", "POSTGRES_PASSWORD={s}", "password: {s}", `  password: "{s}"`, `"password": "{s}",`, "spring.datasource.password={s}",
		`<add key="SmtpPassword" value="{s}" />`, "MYSQL_ROOT_PASSWORD='{s}'", `db_pass = "{s}"`, `$ mysql -u root -p'{s}' -h db.internal`, "REDIS_PASSWORD: {s}",
		`export ADMIN_PASSWORD="{s}"`, "passwd = {s}", "secret_key = {s}", "client_secret: {s}"),
	tok("twilio-api-key", func() string { return "SK" + pick(hexa, 32) }, "TWILIO_API_KEY={s}", `twilio_key: "{s}"`),
	tok("sendgrid-api-key", func() string { return "SG." + pick(b64url, 22) + "." + pick(b64url, 43) }, "SENDGRID_API_KEY={s}", `sg = SendGridAPIClient("{s}")`),
	tok("npm-token", func() string { return "npm_" + pick(alnum, 36) }, "//registry.npmjs.org/:_authToken={s}", "NPM_TOKEN={s}"),
	tok("huggingface-token", func() string { return "hf_" + pick(upper+lower, 34) }, "HF_TOKEN={s}", `login(token="{s}")`),
	tok("azure-storage-key", func() string { return pick(b64, 86) + "==" },
		"DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={s};EndpointSuffix=core.windows.net", "AZURE_STORAGE_KEY={s}"),
	tok("telegram-bot-token", func() string { return pick(digits, 10) + ":AA" + pick(b64url, 33) }, "TELEGRAM_BOT_TOKEN={s}", "https://api.telegram.org/bot{s}/sendMessage"),
	tok("digitalocean-token", func() string { return "dop_v1_" + pick(hexa, 64) }, "DIGITALOCEAN_TOKEN={s}", `do_token: "{s}"`),
	tok("shopify-token", func() string { return oneOf("shpat_", "shpss_", "shpca_") + pick(hexa, 32) }, "SHOPIFY_ACCESS_TOKEN={s}", `"X-Shopify-Access-Token": "{s}"`),
	tok("mailgun-key", func() string { return "key-" + pick(hexa, 32) }, "MAILGUN_API_KEY={s}", "curl -s --user 'api:{s}' https://api.mailgun.net/v3/mg.acme.dev/messages"),
	tok("heroku-key", func() string { return hexUUID() }, "HEROKU_API_KEY={s}", "heroku_api_key: {s}"),
	tok("generic-secret-env", func() string { return pick(alnum, 32+rng.IntN(32)) },
		"SECRET_KEY={s}", "JWT_SECRET={s}", "SESSION_SECRET: {s}", `"client_secret": "{s}"`, "APP_KEY=base64:{s}", "access_token={s}", "auth_token: {s}"),
}

func hexUUID() string {
	h := pick(hexa, 32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// nonSecrets is text that looks like a credential's surroundings or has a
// credential's entropy but holds no secret.
var nonSecrets = []func() string{
	func() string { return "password=${DB_PASSWORD}" },
	func() string {
		return oneOf("DB_PASSWORD=", "API_KEY=", "  password: ", "SECRET_KEY=") + oneOf("changeme", "<your-password>", "${SECRET}", "$(cat /run/secrets/db)", "{{ .Values.password }}", "xxxxxxxx", "********", "REPLACE_ME")
	},
	func() string {
		return `curl -H "Authorization: Bearer $` + oneOf("TOKEN", "GITHUB_TOKEN", "API_KEY") + `" https://api.acme.dev/v1/items`
	},
	func() string { return `Authorization: Bearer ${{ secrets.` + oneOf("DEPLOY_TOKEN", "GH_PAT") + ` }}` },
	func() string {
		return "commit " + pick(hexa, 40) + "\nAuthor: Dana Lee <dana@acme.dev>\nDate:   Mon Nov 30 10:02:11 2026 +0000"
	},
	func() string {
		return pick(hexa, 7) + " " + oneOf("Fix flaky test", "Bump deps", "Refactor router") + "\n" + pick(hexa, 7) + " Merge branch 'main'"
	},
	func() string { return `"request_id": "` + hexUUID() + `", "status": 200` },
	func() string {
		s := sha256.Sum256([]byte(pick(alnum, 20)))
		return hex.EncodeToString(s[:]) + "  dist/toolbelt-linux-amd64.tar.gz"
	},
	func() string { return `"integrity": "sha512-` + pick(b64, 86) + `=="` },
	func() string {
		return "golang.org/x/" + oneOf("net", "sys", "text") + " v0.3" + pick(digits, 1) + ".0 h1:" + pick(b64, 43) + "="
	},
	func() string { return "image: ghcr.io/acme/api@sha256:" + pick(hexa, 64) },
	func() string { return "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + pick(b64, 43) + " dana@laptop" },
	func() string {
		return "-----BEGIN CERTIFICATE-----\nMIID" + pick(b64, 60) + "\n" + pick(b64, 64) + "\n" + pick(b64, 40) + "=\n-----END CERTIFICATE-----"
	},
	func() string {
		return "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" + pick(b64, 20) + "\n" + pick(b64, 64) + "\n-----END PUBLIC KEY-----"
	},
	func() string {
		return "arn:aws:iam::" + pick(digits, 12) + ":role/" + oneOf("deployer", "ci-runner", "lambda-exec")
	},
	func() string {
		return "postgres://" + oneOf("localhost", "db.internal:5432", "10.0.3.17") + "/" + oneOf("orders", "app") + "?sslmode=disable"
	},
	func() string { return "DATABASE_URL=postgres://user:password@localhost:5432/app" },
	func() string {
		return `password := os.Getenv("DB_PASSWORD")` + "\nif password == \"\" {\n\treturn errors.New(\"DB_PASSWORD is not set\")\n}"
	},
	func() string { return "def get_api_key(self):\n    return self.settings.get(\"api_key\")" },
	func() string {
		return "2026-11-30T10:02:11Z WARN auth: " + oneOf("missing Authorization header", "token expired for user 4412", "password authentication failed for user \"app\"", "invalid API key format")
	},
	func() string { return oneOf("color: #", "background: #") + pick("0123456789abcdef", 6) + ";" },
	func() string {
		return "https://github.com/acme/" + oneOf("infra", "api", "web") + "/blob/" + pick(hexa, 40) + "/README.md"
	},
	func() string {
		return `<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAA` + pick(b64, 120) + `">`
	},
	func() string { return "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE" },
	func() string {
		return "pod/api-" + pick(lower+digits, 10) + "-" + pick(lower+digits, 5) + "   1/1     Running   0          3d2h"
	},
	func() string {
		s := sha1.Sum([]byte(pick(alnum, 10)))
		return "ETag: \"" + hex.EncodeToString(s[:]) + "\""
	},
	func() string { return "token_type: Bearer\nexpires_in: 3600\nscope: read:orders" },
	func() string { return "The API key is sent in the X-API-Key header; rotate it from the console." },
	func() string { return "go test -run TestPassword ./internal/auth/ -count=1" },
	func() string {
		return `{"name": "password", "in": "body", "required": true, "schema": {"type": "string", "minLength": 12}}`
	},
	func() string { return "uuid: " + hexUUID() + "\nversion: 3.4." + pick(digits, 2) },
}

func main() {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, f := range formats {
		for range 24 {
			text, secrets := f.make()
			enc.Encode(rec{Source: "provider-formats", Format: f.name, TP: true, Text: text, Secrets: secrets})
		}
	}
	for i, f := range nonSecrets {
		for range 12 {
			enc.Encode(rec{Source: "provider-formats", Format: fmt.Sprintf("non-secret-%02d", i), Text: f()})
		}
	}
}
