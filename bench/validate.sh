#!/usr/bin/env bash
# Measures `sbx validate` as a pre-commit hook sees it, whole process wall
# time, against its budgets (BENCHMARKS.md): one file under 20 ms, and
# 1,000 files in one invocation no slower than `jv`, the validator CLI of
# santhosh-tekuri/jsonschema (the library sbx validates with), on the same
# files and schema. `sbx version` is timed beside, as the floor of any sbx
# process; the one file is also timed interleaved with it, run by run.
# Usage: bench/validate.sh [OLD_SBX]: an earlier sbx binary, timed beside
# in both. Needs hyperfine (apt-get install hyperfine) and jv's module in
# the Go module cache (it is built offline from there). Results go in
# BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/validate.sh: install hyperfine (apt-get install -y hyperfine)" >&2; exit 1; }
old=${1:+$(realpath "$1")}

work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
# Each binary is timed as a copy of what the Go linker wrote: on this
# machine a binary as the linker writes it starts about 0.7 ms slower than
# a copy of itself (same number of page faults, slower ones), which an sbx
# that was downloaded or copied, like the OLD binary given, does not pay.
# installed replaces a binary with its copy.
installed() { cp "$1" "$1.copy" && mv "$1.copy" "$1"; }
# Built as the README installs it (CGO_ENABLED=0, static): a dynamically
# linked sbx starts slower, which only hides what validate itself costs.
CGO_ENABLED=0 go build -o "$work/sbx" ./cmd/sbx
installed "$work/sbx"

# jv v0.7.0 (github.com/santhosh-tekuri/jsonschema/cmd/jv), built against
# the library version sbx's go.mod names, from the module cache only.
lib=$(go list -m -f '{{.Version}}' github.com/santhosh-tekuri/jsonschema/v6)
jvsrc=$(GOFLAGS=-mod=mod GOPROXY=off go mod download -json github.com/santhosh-tekuri/jsonschema/cmd/jv@v0.7.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$jvsrc" ] || { echo "bench/validate.sh: jv v0.7.0 is not in the module cache (go mod download github.com/santhosh-tekuri/jsonschema/cmd/jv@v0.7.0)" >&2; exit 1; }
cp -r "$jvsrc" "$work/jvsrc" && chmod -R u+w "$work/jvsrc"
(cd "$work/jvsrc" && go mod edit -require "github.com/santhosh-tekuri/jsonschema/v6@$lib" &&
  GOFLAGS=-mod=mod GOPROXY=off go build -o "$work/jv" .)
installed "$work/jv"

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
hyperfine --warmup 5 --runs 50 -N "$work/sbx version" "$work/sbx validate $one" \
  ${old:+"$old validate $one"} --export-json "$work/one.json" >/dev/null
hyperfine --warmup 2 --runs 10 "$work/sbx validate \$(cat $work/list)" \
  "$work/jv -d 7 schema/sandbox.schema.json \$(cat $work/list)" \
  ${old:+"$old validate \$(cat $work/list)"} --export-json "$work/many.json" >/dev/null
# Medians, which the machine's other work moves less than means, and each
# one's ratio to the first command's (sbx version; sbx validate).
summary() {
  python3 - "$1" "$work/" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
print("| command | median | mean ± σ | min | user + sys | median / first |")
print("|---|---:|---:|---:|---:|---:|")
for r in rs:
    cmd = r["command"].replace(sys.argv[2], "").replace("$(cat list)", "<1,000 files>")
    print(f'| `{cmd[:70]}` | {r["median"]*1e3:.1f} ms | {r["mean"]*1e3:.1f} ± {r["stddev"]*1e3:.1f} ms | {r["min"]*1e3:.1f} ms '
          f'| {(r["user"]+r["system"])*1e3:.1f} ms | {r["median"]/rs[0]["median"]:.2f} |')
PY
}
summary "$work/one.json"
echo
summary "$work/many.json"
echo

# hyperfine times each command's runs in one block, so load that comes
# and goes on a shared machine can fall on one command and not the other
# (a median of sbx version twice validate's has been seen). So the one
# file is also timed interleaved: rounds of every command, in alternating
# order, each spawned and reaped directly (posix_spawn, wait4); medians
# and lower quartiles of wall time, medians of CPU time.
python3 - 300 "$work/" "$work/sbx version" "$work/sbx validate $one" ${old:+"$old validate $one"} <<'PY'
import os, statistics, sys, time
rounds, prefix, cmds = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
argvs = [c.split() for c in cmds]
null = os.open(os.devnull, os.O_WRONLY)
wall, cpu = [[] for _ in cmds], [[] for _ in cmds]
for r in range(rounds + 5):  # the first five warm up
    for i in (range(len(cmds)) if r % 2 == 0 else reversed(range(len(cmds)))):
        start = time.perf_counter_ns()
        pid = os.posix_spawn(argvs[i][0], argvs[i], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
        _, status, ru = os.wait4(pid, 0)
        elapsed = time.perf_counter_ns() - start
        if status != 0:
            sys.exit(f"bench/validate.sh: {cmds[i]} failed")
        if r >= 5:
            wall[i].append(elapsed / 1e6)
            cpu[i].append((ru.ru_utime + ru.ru_stime) * 1e3)
q = lambda xs, k: statistics.quantiles(xs, n=4)[k]
print(f"| interleaved, {rounds} rounds | median | lower quartile | CPU median | median / first | lower quartile / first |")
print("|---|---:|---:|---:|---:|---:|")
for i, c in enumerate(cmds):
    m, lq = statistics.median(wall[i]), q(wall[i], 0)
    print(f"| `{c.replace(prefix, '')[:70]}` | {m:.2f} ms | {lq:.2f} ms | {statistics.median(cpu[i]):.2f} ms "
          f"| {m / statistics.median(wall[0]):.2f} | {lq / q(wall[0], 0):.2f} |")
PY
