#!/usr/bin/env bash
# An earlier sbx against this tree's, in one run (the machines are shared
# and noisy, so only ratios measured together mean anything):
#  1. `sbx apply` of a new docker-driver sandbox;
#  2. `sbx loop`, 30 iterations of an agent that exits at once.
# Usage: bench/baseline.sh OLD_SBX   (a static build of the earlier sbx,
# e.g. git worktree add /tmp/old REV && CGO_ENABLED=0 go build -C /tmp/old
# -o /tmp/sbx-old ./cmd/sbx). Needs hyperfine and busybox-static.
set -euo pipefail
cd "$(dirname "$0")/.."
old=$(realpath "${1:?usage: bench/baseline.sh OLD_SBX}")
command -v hyperfine >/dev/null || { echo "bench/baseline.sh: install hyperfine" >&2; exit 1; }
work=$(mktemp -d)
id=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
cleanup() {
  for v in old new; do
    (cd "$work/$v" 2>/dev/null && SBX_STATE_DIR="$work/state-$v" SBX_STATIC_BINARY="$work/sbx-$v" "$work/sbx-$v" destroy -y >/dev/null 2>&1) || true
  done
  docker rmi -f "sbx-bench-busybox:$id" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cp "$old" "$work/sbx-old"
CGO_ENABLED=0 go build -o "$work/sbx-new" ./cmd/sbx
mkdir -p "$work/img"
cp "$(command -v busybox)" "$work/img/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nENV PATH=/bin\n' > "$work/img/Dockerfile"
docker build -q -t "sbx-bench-busybox:$id" "$work/img" >/dev/null
for v in old new; do
  mkdir -p "$work/$v"
  (cd "$work/$v" && git init -q . && git -c user.email=b@b -c user.name=b commit -q --allow-empty -m init)
  echo "Do nothing." > "$work/$v/PROMPT.md"
  cat > "$work/$v/sandbox.yaml" <<YAML
version: 1
name: bench-$v-$id
agent: shell
driver: docker
template: sbx-bench-busybox:$id
network: {agentHosts: false}
loop:
  prompt: PROMPT.md
  maxIterations: 30
  completion: {promise: NEVER}
  breaker: {noProgress: 0, sameError: 0}
  command: ["true"]
YAML
  # The egress image is built once, outside the timing.
  (cd "$work/$v" && SBX_STATE_DIR="$work/state-$v" SBX_STATIC_BINARY="$work/sbx-$v" "$work/sbx-$v" apply -y >/dev/null)
done
run() { echo "cd $work/$1 && SBX_STATE_DIR=$work/state-$1 SBX_STATIC_BINARY=$work/sbx-$1 $work/sbx-$1 $2"; }
echo "== apply of a new sandbox"
hyperfine --warmup 2 --runs 20 --export-markdown "$work/create.md" \
  --prepare "$(run old 'destroy -y >/dev/null 2>&1'); $(run new 'destroy -y >/dev/null 2>&1'); true" \
  -n old "$(run old 'apply -y')" -n new "$(run new 'apply -y')" >/dev/null
cat "$work/create.md"
echo "== sbx loop, 30 iterations"
hyperfine --warmup 1 --runs 6 --export-markdown "$work/loop.md" \
  -n old "$(run old 'loop -y') || test \$? -eq 3" -n new "$(run new 'loop -y') || test \$? -eq 3" >/dev/null
cat "$work/loop.md"
