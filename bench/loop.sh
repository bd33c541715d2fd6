#!/usr/bin/env bash
# Per-iteration overhead of `sbx loop` on the docker driver: an agent that
# exits at once, 30 iterations, against the raw `docker exec` of the same
# command. Needs hyperfine and busybox-static.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/loop.sh: install hyperfine" >&2; exit 1; }
work=$(mktemp -d)
export SBX_STATE_DIR="$work/state" SBX_STATIC_BINARY="$work/sbx"
trap '"$work/sbx" destroy -y >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/sbx" ./cmd/sbx
mkdir -p "$work/img" "$work/ws"
cp "$(command -v busybox)" "$work/img/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nENV PATH=/bin\n' > "$work/img/Dockerfile"
docker build -q -t sbx-bench-busybox:1 "$work/img" >/dev/null
cd "$work/ws"
git init -q . && git -c user.email=b@b -c user.name=b commit -q --allow-empty -m init
echo "Do nothing." > PROMPT.md
cat > sandbox.yaml <<YAML
version: 1
name: loopbench
agent: shell
driver: docker
template: sbx-bench-busybox:1
network: {agentHosts: false}
loop:
  prompt: PROMPT.md
  maxIterations: 30
  completion: {promise: NEVER}
  breaker: {noProgress: 0, sameError: 0}
  command: ["true"]
YAML
"$work/sbx" apply -y >/dev/null
hyperfine --runs 5 --export-markdown "$work/loop.md" -n "sbx loop, 30 iterations" "$work/sbx loop -y || test \$? -eq 3" >/dev/null
hyperfine --runs 30 --export-markdown "$work/exec.md" -n "docker exec true" "docker exec sbx-loopbench true" >/dev/null
cat "$work/loop.md" "$work/exec.md"
