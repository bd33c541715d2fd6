#!/usr/bin/env bash
# Lifecycle and checkpoint timings of the docker driver on a real daemon
# (needs hyperfine, busybox-static), each against its raw Docker baseline in
# the same run:
#  1. `sbx stop` / `sbx start` vs `docker stop` / `docker start` of the same
#     two containers (the sandbox and its egress proxy);
#  2. `sbx checkpoint create` of a sandbox with 100 MB written inside vs
#     `docker commit` of the same container;
#  3. `sbx apply` restoring from that checkpoint (template.checkpoint) vs
#     `sbx apply` creating from the same image named as a template.
# Names carry the shell's pid, so runs on a shared daemon do not collide.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/lifecycle.sh: install hyperfine" >&2; exit 1; }
id=$$
n=lcbench-$id sb=sbx-lcbench-$id eg=sbx-lcbench-$id-egress
work=$(mktemp -d)
export SBX_STATE_DIR="$work/state" SBX_STATIC_BINARY="$work/sbx"
cleanup() {
  (cd "$work/ws" 2>/dev/null && "$work/sbx" destroy -y >/dev/null 2>&1) || true
  docker rm -f "$sb" "$eg" >/dev/null 2>&1 || true
  docker volume rm -f "$sb-sock" "$sb-policy" >/dev/null 2>&1 || true
  docker rmi -f "sbx-lcbench-busybox:$id" "sbx-checkpoint:lcbench-$id" "lcbench-raw:$id" "lcbench-image:$id" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$work/sbx" ./cmd/sbx
mkdir -p "$work/img" "$work/ws"
cp "$(command -v busybox)" "$work/img/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nENV PATH=/bin\n' > "$work/img/Dockerfile"
docker build -q -t "sbx-lcbench-busybox:$id" "$work/img" >/dev/null
cd "$work/ws"
write() { printf 'version: 1\nname: %s\nagent: shell\ndriver: docker\ntemplate: %s\nnetwork: {agentHosts: false, allow: [a.example]}\n' "$n" "$1" > sandbox.yaml; }
write "sbx-lcbench-busybox:$id"
"$work/sbx" apply -y >/dev/null
sbx=$work/sbx

echo "== stop: sbx stop vs docker stop of both containers"
hyperfine --runs 8 --export-markdown "$work/stop.md" \
  --prepare "docker start $eg $sb >/dev/null" \
  "$sbx stop" "docker stop $sb $eg" >/dev/null
cat "$work/stop.md"
echo "== start: sbx start vs docker start of both containers"
hyperfine --runs 8 --export-markdown "$work/start.md" \
  --prepare "docker stop $sb $eg >/dev/null" \
  "$sbx start" "docker start $eg $sb" >/dev/null
cat "$work/start.md"

docker start "$eg" "$sb" >/dev/null 2>&1 || true
docker exec "$sb" dd if=/dev/urandom of=/big bs=1M count=100 2>/dev/null
echo "== checkpoint of a sandbox with 100 MB written inside: sbx checkpoint create vs docker commit"
hyperfine --runs 5 --export-markdown "$work/checkpoint.md" \
  --prepare "$sbx checkpoint rm lcbench-$id >/dev/null 2>&1; docker rmi -f lcbench-raw:$id >/dev/null 2>&1; true" \
  "$sbx checkpoint create lcbench-$id" "docker commit $sb lcbench-raw:$id" >/dev/null
cat "$work/checkpoint.md"

"$sbx" checkpoint create "lcbench-$id" >/dev/null 2>&1 || true
docker tag "sbx-checkpoint:lcbench-$id" "lcbench-image:$id"
"$sbx" destroy -y >/dev/null
echo "== restore: sbx apply from the checkpoint vs sbx apply from the same image as a template"
write "{checkpoint: lcbench-$id}"; cp sandbox.yaml "$work/restore.yaml"
write "lcbench-image:$id"; cp sandbox.yaml "$work/image.yaml"
hyperfine --runs 5 --export-markdown "$work/restore.md" \
  --prepare "$sbx destroy -y -f $work/restore.yaml >/dev/null 2>&1; true" \
  -n "restore from checkpoint" "$sbx apply -y --approve-widening -f $work/restore.yaml" \
  -n "create from the image" "$sbx apply -y --approve-widening -f $work/image.yaml" >/dev/null
cat "$work/restore.md"
"$sbx" destroy -y -f "$work/image.yaml" >/dev/null 2>&1 || true
