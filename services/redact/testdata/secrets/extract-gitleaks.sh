#!/bin/sh
# Writes gitleaks.jsonl (to stdout): the true and false positives of the rule
# tests in gitleaks' generator (cmd/generate/config/rules/*.go), from the
# gitleaks version go.mod names. A scratch copy of the module has its
# utils.Validate patched to dump the examples it is given, the generator is
# run, and labelgitleaks.go re-randomises the secrets and labels them.
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
src=$(cd "$root" && go list -m -f '{{.Dir}}' github.com/zricethezav/gitleaks/v8)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/gl" && chmod -R u+w "$tmp/gl"
v="$tmp/gl/cmd/generate/config/utils/validate.go"
python3 - "$v" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('import (\n', 'import (\n\t"encoding/json"\n\t"os"\n', 1)
s = s.replace('''func Validate(rule config.Rule, truePositives []string, falsePositives []string) *config.Rule {
	r := &rule''', '''func dump(id, kind, text string) {
	f, err := os.OpenFile(os.Getenv("GLX_OUT"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(map[string]string{"rule": id, "kind": kind, "text": text})
	f.Write(append(b, '\\n'))
	f.Close()
}

func Validate(rule config.Rule, truePositives []string, falsePositives []string) *config.Rule {
	r := &rule
	for _, tp := range truePositives {
		dump(r.RuleID, "tp", tp)
	}
	for _, fp := range falsePositives {
		dump(r.RuleID, "fp", fp)
	}''')
open(p, 'w').write(s)
PY
# The generator fails at its very end (it wants its template); the dump is done by then.
(cd "$tmp/gl" && GLX_OUT="$tmp/dump.jsonl" GOFLAGS=-mod=mod go run ./cmd/generate/config "$tmp/out.toml" >/dev/null 2>&1) || true
cd "$root" && go run services/redact/testdata/secrets/labelgitleaks.go "$tmp/dump.jsonl"
