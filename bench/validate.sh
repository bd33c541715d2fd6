#!/usr/bin/env bash
# Measures `sbx validate` as a pre-commit hook sees it, whole process wall
# time, against its budgets (BENCHMARKS.md), in one run:
#  1. one file: under 20 ms;
#  2. 1,000 two-kilobyte files in one invocation: no slower than `jv`,
#     the validator CLI of santhosh-tekuri/jsonschema (the library sbx
#     validates with), on the same files and schema.
# `sbx version` and jv on the one file are timed beside it, for
# reference: the start of any sbx process, and the library's own CLI on the
# same work. Usage: bench/validate.sh [OLD_SBX]: an earlier sbx
# binary, timed beside in both. Needs hyperfine (apt-get install
# hyperfine) and the Go module proxy or cache for jv (built into the
# scratch directory, never installed). Exits 1 when a budget is missed.
# Results go in BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/validate.sh: install hyperfine (apt-get install -y hyperfine)" >&2; exit 1; }
old=${1:+$(realpath "$1")}

work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
# Built as the README installs it (CGO_ENABLED=0, static).
CGO_ENABLED=0 go build -o "$work/sbx" ./cmd/sbx

# jv v0.7.0 (github.com/santhosh-tekuri/jsonschema/cmd/jv, the newest; it
# names v6.0.1), built against the library version sbx's go.mod names.
lib=$(go list -m -f '{{.Version}}' github.com/santhosh-tekuri/jsonschema/v6)
jvsrc=$(GOFLAGS=-mod=mod go mod download -json github.com/santhosh-tekuri/jsonschema/cmd/jv@v0.7.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$jvsrc" ] || { echo "bench/validate.sh: jv v0.7.0 cannot be downloaded (go mod download github.com/santhosh-tekuri/jsonschema/cmd/jv@v0.7.0)" >&2; exit 1; }
cp -r "$jvsrc" "$work/jvsrc" && chmod -R u+w "$work/jvsrc"
# sbx's go.sum vouches for the library version (the checksum database may
# be out of reach).
grep "^github.com/santhosh-tekuri/jsonschema/v6 $lib[ /]" go.sum >> "$work/jvsrc/go.sum"
(cd "$work/jvsrc" && go mod edit -require "github.com/santhosh-tekuri/jsonschema/v6@$lib" &&
  GOFLAGS=-mod=mod go build -o "$work/jv" .)
echo "jv v0.7.0 against jsonschema $lib"

mkdir -p "$work/many"
# A realistic ~2 KB sandbox file: every section, comments included.
for i in $(seq -w 1 1000); do
  d="$work/many/s$i"
  mkdir -p "$d"
  printf '# Task\nDo the thing.\n' > "$d/PROMPT.md"
  cat > "$d/sandbox.yaml" <<YAML
# yaml-language-server: \$schema=../../schema/sandbox.schema.json
# A generated sandbox for the validate benchmark; about two kilobytes, with
# comments like a real, reviewed file carries.
version: 1
name: bench-$i
agent: claude
template: docker/sandbox-templates:claude-code
workspace: .
env:
  NODE_ENV: development
  LOG_LEVEL: debug
  DATABASE_URL: \${DATABASE_URL:-postgresql://localhost/app}
  REDIS_URL: \${REDIS_URL:-redis://localhost:6379/0}
  FEATURE_FLAGS: "alpha,beta,gamma"
secrets:
  ANTHROPIC_API_KEY: {env: ANTHROPIC_API_KEY}
  GITHUB_TOKEN: {command: [gh, auth, token]}
resources:
  cpus: 4
  memory: 8g
ports: ["3000", "127.0.0.1:8080:3000/tcp"]
network:
  policy: deny
  presets: [anthropic, github, npm, golang]
  allow:
    - api.example.com
    - "*.cdn.example.com"
    - registry.example.org:443
    - 203.0.113.7
  deny:
    - pastebin.com
    - "*.paste.example.com"
  blockCIDRs: [10.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16, "::1/128", "fc00::/7", "fe80::/10"]
loop:
  prompt: PROMPT.md
  maxIterations: 30
  completion:
    promise: COMPLETE
    verify: ["go test ./...", "go vet ./..."]
  iterationTimeout: 15m
  maxDuration: 4h
  breaker: {noProgress: 3, sameError: 5}
# Notes for reviewers, as a real file carries them:
# - api.example.com is our staging API; the agent runs integration tests
#   against it. Owner: platform team.
# - *.cdn.example.com serves test fixtures; read-only.
# - registry.example.org:443 is the internal package mirror.
# - 203.0.113.7 is the license server (documentation range in this sample).
# - pastebin.com and *.paste.example.com are denied explicitly so that a
#   later policy: allow experiment cannot leak code there.
# The template is maintained in the agent-images repository; bump the tag
# there, not here. The prompt lives next to this file and is reviewed like
# code. Iteration bounds were chosen from last quarter's runs.
YAML
done
ls "$work"/many/*/sandbox.yaml > "$work/list"
echo "file size: $(wc -c < "$work/many/s0001/sandbox.yaml") bytes"
one=$work/many/s0001/sandbox.yaml
# Both validate every file and accept all of them; otherwise the timings
# compare different work.
"$work/sbx" validate $(cat "$work/list") >/dev/null
"$work/jv" -d 7 schema/sandbox.schema.json $(cat "$work/list") >/dev/null
hyperfine --warmup 5 --runs 50 -N "$work/sbx validate $one" "$work/sbx version" \
  "$work/jv -d 7 schema/sandbox.schema.json $one" ${old:+"$old validate $one"} \
  --export-json "$work/one.json" >/dev/null
hyperfine --warmup 2 --runs 10 "$work/sbx validate \$(cat $work/list)" \
  "$work/jv -d 7 schema/sandbox.schema.json \$(cat $work/list)" \
  ${old:+"$old validate \$(cat $work/list)"} --export-json "$work/many.json" >/dev/null
# Medians, which the machine's other work moves less than means, and the
# verdicts: the one file's median under 20 ms; sbx's median for 1,000
# files at most jv's.
python3 - "$work/" "$work/one.json" "$work/many.json" <<'PY'
import json, sys
prefix, one, many = sys.argv[1], json.load(open(sys.argv[2]))["results"], json.load(open(sys.argv[3]))["results"]
def table(rs):
    print("| command | median | mean ± σ | min | user + sys |")
    print("|---|---:|---:|---:|---:|")
    for r in rs:
        cmd = r["command"].replace(prefix, "").replace("$(cat list)", "<1,000 files>")
        print(f'| `{cmd[:70]}` | {r["median"]*1e3:.1f} ms | {r["mean"]*1e3:.1f} ± {r["stddev"]*1e3:.1f} ms '
              f'| {r["min"]*1e3:.1f} ms | {(r["user"]+r["system"])*1e3:.1f} ms |')
    print()
table(one)
table(many)
ok = True
m = one[0]["median"] * 1e3
print(f"one file: {m:.1f} ms, budget 20 ms: {'met' if m < 20 else 'MISSED'} (jv: {one[2]['median'] * 1e3:.1f} ms)")
ok &= m < 20
s, j = many[0]["median"] * 1e3, many[1]["median"] * 1e3
print(f"1,000 files: sbx {s:.1f} ms, jv {j:.1f} ms ({s / j:.2f}x), budget jv's: {'met' if s <= j else 'MISSED'}")
ok &= s <= j
sys.exit(0 if ok else 1)
PY
