#!/usr/bin/env bash
# Measures a no-op `sbx plan` against the fake Docker sbx CLI, over 1 and
# 20 sandboxes: the wall time, and the same with the fake's own cost taken
# out (sbx's overhead beyond the backend calls). Needs hyperfine.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/plan.sh: install hyperfine (apt-get install -y hyperfine)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/sbx" ./cmd/sbx
go build -o "$work/docker-sbx" ./bench/testdata/fakecli
export SBX_DOCKER_SBX="$work/docker-sbx" SBX_STATE_DIR="$work/state"
export FAKE_SBX_STATE="$work/fake.json" FAKE_SBX_LOG="$work/argv.log"
"$work/docker-sbx" policy init deny-all
for n in 1 20; do
  files=()
  for i in $(seq 1 "$n"); do
    d="$work/s$n-$i"; mkdir -p "$d"
    printf 'version: 1\nname: bench-%s-%s\nagent: claude\ndriver: sbx\nnetwork: {presets: [npm, github]}\nenv: {NODE_ENV: development}\n' "$n" "$i" > "$d/sandbox.yaml"
    files+=(-f "$d/sandbox.yaml")
  done
  "$work/sbx" apply -y "${files[@]}" >/dev/null
  : > "$work/argv.log"
  "$work/sbx" plan --detailed-exitcode "${files[@]}" >/dev/null
  echo "== $n sandbox(es): backend calls of one no-op plan: $(wc -l < "$work/argv.log")"
  sort "$work/argv.log" | uniq -c | sed 's/^/   /' | head -5
  # The backend calls alone: the same commands run back to back.
  calls=$(python3 -c 'import json,sys; [print(" ".join(json.loads(l))) for l in open(sys.argv[1])]' "$work/argv.log")
  printf '%s\n' "$calls" | sed "s|^|$work/docker-sbx |" > "$work/calls.sh"
  hyperfine -N --warmup 3 --runs 30 --export-markdown "$work/plan-$n.md" \
    "$work/sbx plan --detailed-exitcode ${files[*]}" \
    "bash $work/calls.sh" >/dev/null
  cat "$work/plan-$n.md"
done
