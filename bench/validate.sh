#!/usr/bin/env bash
# Measures `sbx validate` as a pre-commit hook sees it: whole process wall
# time for one file, and for 1,000 two-kilobyte files in one invocation.
# Needs hyperfine (apt-get install hyperfine). Results go in BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/validate.sh: install hyperfine (apt-get install -y hyperfine)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/sbx" ./cmd/sbx

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
hyperfine --warmup 5 --runs 50 -N "$work/sbx validate $work/many/s0001/sandbox.yaml" \
  --export-markdown "$work/one.md"
hyperfine --warmup 2 --runs 10 "$work/sbx validate \$(cat $work/list)" --export-markdown "$work/many.md"
cat "$work/one.md" "$work/many.md"
