#!/usr/bin/env bash
# How long a server-sent event takes from an upstream to the agent through
# a docker-driver sandbox's whole egress path (the sandbox's bridge on
# 127.0.0.1:3128, the proxy's Unix socket, the proxy's container), against
# the same client reading the same upstream straight from a plain
# container on the same Docker network (the baseline). Issue 19's target:
# within 5 ms of direct.
#
# The upstream (bench/testdata/ssebench serve, its own container on
# Docker's default bridge) sends an event every millisecond; the client
# (ssebench read, run with docker exec) reads 1,000 of them and prints the
# latencies, send to read (both sides read CLOCK_REALTIME, which runc
# containers share with the host; a gVisor sandbox keeps a clock of its
# own, so the client first estimates the offset through the same path
# and reports it with its bound). Paths: direct from a runc container; a
# runc sandbox (its bridge hands its listening socket to the proxy); and,
# if the daemon has runsc, a gVisor sandbox (its bridge copies: no socket
# crosses to the host; the driver runs runsc with --network=none, so
# there is no gVisor container with a network to compare with). Shapes:
# chunked (what SSE servers send), a body the connection's end ends, and
# chunked inside a CONNECT tunnel (HTTPS to a gateway).
#
# Usage: bench/sse.sh [OLD_SBX] [ROUNDS]: OLD_SBX, a static build of an
# earlier sbx, gets sandboxes of its own measured beside (before/after);
# ROUNDS (default 3) rounds take every path in turn. Needs busybox-static.
# Every object has this run's id in its name (the daemon is shared) and is
# removed at the end, the egress images the run built too.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:+$(realpath "$1")}
rounds=${2:-3}
events=1000
work=$(mktemp -d)
id=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
runsc=$(docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' && echo yes || true)
sandboxes=() # "label ws binary"
new_images=()
cleanup() {
  for s in "${sandboxes[@]}"; do
    set -- $s
    (cd "$2" && SBX_STATE_DIR="$work/state-$1" SBX_STATIC_BINARY="$3" "$3" destroy -y >/dev/null 2>&1) || true
  done
  docker rm -f "sse-up-$id" "sse-direct-$id" >/dev/null 2>&1 || true
  for img in "${new_images[@]}"; do docker rmi -f "$img" >/dev/null 2>&1 || true; done
  docker rmi -f "sbx-bench-busybox:$id" "sbx-bench-sse:$id" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

CGO_ENABLED=0 go build -o "$work/sbx" ./cmd/sbx
mkdir -p "$work/img" "$work/up"
CGO_ENABLED=0 go build -o "$work/up/ssebench" ./bench/testdata/ssebench
[ -n "$old" ] && cp "$old" "$work/sbx-old"
cp "$(command -v busybox)" "$work/img/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nENV PATH=/bin\n' > "$work/img/Dockerfile"
docker build -q -t "sbx-bench-busybox:$id" "$work/img" >/dev/null
printf 'FROM scratch\nCOPY ssebench /ssebench\nENTRYPOINT ["/ssebench"]\n' > "$work/up/Dockerfile"
docker build -q -t "sbx-bench-sse:$id" "$work/up" >/dev/null
docker run -d --name "sse-up-$id" "sbx-bench-sse:$id" serve -listen :8080 >/dev/null
ip=$(docker inspect -f '{{.NetworkSettings.IPAddress}}' "sse-up-$id")

# The baseline clients: plain containers on the default bridge.
docker run -d --name "sse-direct-$id" -v "$work/up:/b:ro" "sbx-bench-busybox:$id" sleep 1d >/dev/null
paths=("direct docker exec sse-direct-$id /b/ssebench read")

# sandbox LABEL BINARY RUNTIME: a sandbox the docker driver makes with
# BINARY, allowed to reach the upstream (Docker's bridge is a private
# range: blockCIDRs leaves it open).
sandbox() {
  local label=$1 bin=$2 runtime=$3 ws="$work/ws-$1" name="sse-$1-$id" rt=""
  [ -n "$runtime" ] && rt="docker: {runtime: $runtime}"
  mkdir -p "$ws"
  cp "$work/up/ssebench" "$ws/ssebench"
  cat > "$ws/sandbox.yaml" <<YAML
version: 1
name: $name
agent: shell
driver: docker
template: sbx-bench-busybox:$id
network: {agentHosts: false, allow: [$ip], blockCIDRs: [127.0.0.0/8]}
$rt
YAML
  # The proxy's image is sbx-egress:<the binary's sha256, 12 digits>
  # (driver/docker/docker.go, egressImage): removed at the end if this
  # run built it.
  local img
  img="sbx-egress:$(sha256sum "$bin" | cut -c1-12)"
  docker image inspect "$img" >/dev/null 2>&1 || new_images+=("$img")
  sandboxes+=("$label $ws $bin")
  (cd "$ws" && SBX_STATE_DIR="$work/state-$label" SBX_STATIC_BINARY="$bin" "$bin" apply -y >/dev/null)
  local c="sbx-$name"
  paths+=("$label docker exec $c $ws/ssebench read -proxy 127.0.0.1:3128")
}
sandbox sandbox "$work/sbx" ""
[ -n "$runsc" ] && sandbox sandbox-gvisor "$work/sbx" runsc
if [ -n "$old" ]; then
  sandbox old-sandbox "$work/sbx-old" ""
  [ -n "$runsc" ] && sandbox old-sandbox-gvisor "$work/sbx-old" runsc
fi

echo "| round | path | shape | mean | p50 | p99 | max | first event | clock offset (± rtt/2) |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$rounds"); do
  for shape in chunked close connect; do
    for p in "${paths[@]}"; do
      set -- $p
      label=$1; shift
      out=$("$@" -target "$ip:8080" -shape "$shape" -n "$events" 2>&1) || out="failed: $out"
      row=$(sed -E 's/^events=[0-9]+ mean_us=([0-9]+) p50_us=([0-9]+) p99_us=([0-9]+) max_us=([0-9]+) first_us=([0-9]+) offset_us=(-?[0-9]+) rtt_us=([0-9]+)$/\1 µs | \2 µs | \3 µs | \4 µs | \5 µs | \6 µs (± \7\/2)/' <<<"$out")
      echo "| $r | $label | $shape | $row |"
    done
  done
done
