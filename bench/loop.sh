#!/usr/bin/env bash
# Per-iteration overhead of `sbx loop` on the docker driver against a raw
# `docker exec` of the same command, measured in one hyperfine session:
# a run of 1 iteration and one of 31 (an agent that exits at once, no
# completion), so that (T31 - T1) / 30 is what one more iteration costs,
# start-up and convergence aside; and `docker exec CONTAINER true`.
# Prints the ratio. Needs hyperfine, busybox-static and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/loop.sh: install hyperfine" >&2; exit 1; }
runs=${RUNS:-5}
work=$(mktemp -d)
name="loopbench-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
export SBX_STATE_DIR="$work/state" SBX_STATIC_BINARY="$work/sbx"
trap 'cd "$work/ws" 2>/dev/null && "$work/sbx" destroy -y >/dev/null 2>&1; docker rmi -f "sbx-bench-busybox:$name" >/dev/null 2>&1; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/sbx" ./cmd/sbx
mkdir -p "$work/img" "$work/ws"
cp "$(command -v busybox)" "$work/img/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nENV PATH=/bin\n' > "$work/img/Dockerfile"
docker build -q -t "sbx-bench-busybox:$name" "$work/img" >/dev/null
cd "$work/ws"
git init -q . && git -c user.email=b@b -c user.name=b commit -q --allow-empty -m init
echo "Do nothing." > PROMPT.md
cat > sandbox.yaml <<YAML
version: 1
name: $name
agent: shell
driver: docker
template: sbx-bench-busybox:$name
network: {agentHosts: false}
loop:
  prompt: PROMPT.md
  maxIterations: 31
  completion: {promise: NEVER}
  breaker: {noProgress: 0, sameError: 0}
  command: ["true"]
YAML
"$work/sbx" apply -y >/dev/null
container=$(docker ps --filter "label=dev.sbx.sandbox=$name" --format '{{.Names}}'  | grep -v -- -egress | head -1)
hyperfine --warmup 1 --runs "$runs" --export-json "$work/h.json" \
  -n loop1 "$work/sbx loop -y --max-iterations 1 || test \$? -eq 3" \
  -n loop31 "$work/sbx loop -y --max-iterations 31 || test \$? -eq 3" \
  -n exec "docker exec $container true" >&2
python3 - "$work/h.json" <<'PY'
import json, sys, statistics as st
r = {x["command"]: x["times"] for x in json.load(open(sys.argv[1]))["results"]}
it = (st.mean(r["loop31"]) - st.mean(r["loop1"])) / 30
ex = st.mean(r["exec"])
print(f"| run of 1 iteration | {st.mean(r['loop1'])*1000:.0f} ms ± {st.stdev(r['loop1'])*1000:.0f} |")
print(f"| run of 31 iterations | {st.mean(r['loop31'])*1000:.0f} ms ± {st.stdev(r['loop31'])*1000:.0f} |")
print(f"| one more iteration, (T31 - T1) / 30 | {it*1000:.1f} ms |")
print(f"| raw docker exec CONTAINER true | {ex*1000:.1f} ms ± {st.stdev(r['exec'])*1000:.1f} |")
print(f"| ratio iteration / raw exec | {it/ex:.2f} |")
PY
