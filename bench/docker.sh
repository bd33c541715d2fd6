#!/usr/bin/env bash
# Docker driver timings on a real daemon (needs hyperfine, busybox-static):
#  1. `sbx apply` of a new sandbox vs the floor, two plain `docker run -d`
#     of the same images (the template and the egress image) at once, and
#     vs the docker CLI commands that make the same containers, from a
#     script (the egress image and the template are built beforehand:
#     build time is excluded);
#  2. an allow-list change applied in place vs an env change (a replace).
# Usage: bench/docker.sh [OLD_SBX]: a static build of an earlier sbx, whose
# apply of the same sandbox is timed beside in 1. Every object has this
# run's id in its name (the daemon is shared) and is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/docker.sh: install hyperfine" >&2; exit 1; }
old=${1:+$(realpath "$1")}
work=$(mktemp -d)
id=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
export SBX_STATE_DIR="$work/state" SBX_STATIC_BINARY="$work/sbx"
old_env="SBX_STATE_DIR=$work/state-old SBX_STATIC_BINARY=$work/sbx-old"
cleanup() {
  (cd "$work/ws" 2>/dev/null && "$work/sbx" destroy -y >/dev/null 2>&1) || true
  (cd "$work/ws-old" 2>/dev/null && env $old_env "$work/sbx-old" destroy -y >/dev/null 2>&1) || true
  docker rm -f raw-bench-$id raw-bench-$id-egress floor-bench-$id floor-bench-$id-egress >/dev/null 2>&1 || true
  docker volume rm -f raw-sock-$id-$id raw-policy-$id-$id >/dev/null 2>&1 || true
  docker rmi -f sbx-bench-busybox:$id >/dev/null 2>&1 || true
  rm -rf "$work"; }
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$work/sbx" ./cmd/sbx
mkdir -p "$work/img" "$work/ws" "$work/ws-old"
cp "$(command -v busybox)" "$work/img/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nENV PATH=/bin\n' > "$work/img/Dockerfile"
docker build -q -t sbx-bench-busybox:$id "$work/img" >/dev/null
write() { cat > sandbox.yaml <<YAML
version: 1
name: $3
agent: shell
driver: docker
template: sbx-bench-busybox:$id
env: {NODE_ENV: $1}
network:
  allow: [$2]
YAML
}
destroy_all="$work/sbx destroy -y >/dev/null 2>&1;"
if [ -n "$old" ]; then
  cp "$old" "$work/sbx-old"
  cd "$work/ws-old"
  write development a.example bench-old-$id
  env $old_env "$work/sbx-old" apply -y >/dev/null   # builds its egress image once
  env $old_env "$work/sbx-old" destroy -y >/dev/null
  destroy_all="$destroy_all (cd $work/ws-old && env $old_env $work/sbx-old destroy -y >/dev/null 2>&1);"
fi
cd "$work/ws"
write development a.example bench-$id
"$work/sbx" apply -y >/dev/null   # builds the egress image once
egress=$(docker inspect -f '{{.Config.Image}}' sbx-bench-$id-egress)
"$work/sbx" destroy -y >/dev/null
printf '{"default":"deny","allow":["a.example"],"deny":[],"blockCIDRs":["10.0.0.0/8"]}' > "$work/policy.json"
cat > "$work/raw.sh" <<SH
set -e
for v in raw-sock-$id raw-policy-$id; do docker volume create \$v >/dev/null; done
docker run --detach --interactive --name raw-bench-$id-egress -v raw-sock-$id:/run/sbx-egress -v raw-policy-$id:/policy -e GOMAXPROCS=1 $egress __egress-proxy --policy /policy/policy.json --init-policy "\$(cat $work/policy.json)" --control --listen unix:/run/sbx-egress/egress.sock >/dev/null &
egress_pid=\$!
docker create --name raw-bench-$id --network none --entrypoint /.sbx/sbx -v $work/sbx:/.sbx/sbx:ro -v raw-sock-$id:/run/sbx-egress -v $work/ws:$work/ws -w $work/ws -e NODE_ENV=development -e HTTP_PROXY=http://127.0.0.1:3128 sbx-bench-busybox:$id __sandbox-init --socket /run/sbx-egress/egress.sock >/dev/null
wait \$egress_pid
docker start raw-bench-$id >/dev/null
SH
# The floor: the two images run plainly, at once.
cat > "$work/floor.sh" <<SH
docker run -d --name floor-bench-$id sbx-bench-busybox:$id sleep 1d >/dev/null &
docker run -d --name floor-bench-$id-egress $egress __egress-proxy --policy /policy.json --init-policy '{"default":"deny"}' --listen unix:/egress.sock >/dev/null &
wait
SH
echo "== create: sbx apply vs two plain docker run -d at once vs the same docker commands"
hyperfine --runs 15 --export-markdown "$work/create.md" \
  --prepare "$destroy_all docker rm -f raw-bench-$id raw-bench-$id-egress floor-bench-$id floor-bench-$id-egress >/dev/null 2>&1; docker volume rm -f raw-sock-$id raw-policy-$id >/dev/null 2>&1; true" \
  -n "sbx apply (new sandbox)" "$work/sbx apply -y" -n "two plain docker run -d at once" "bash $work/floor.sh" \
  -n "the same docker commands" "bash $work/raw.sh" \
  ${old:+-n "earlier sbx apply (new sandbox)" "cd $work/ws-old && env $old_env $work/sbx-old apply -y"} >/dev/null
docker rm -f floor-bench-$id floor-bench-$id-egress >/dev/null 2>&1 || true
cat "$work/create.md"
"$work/sbx" apply -y >/dev/null
echo "== change: allow-list in place vs env replace"
hyperfine --runs 8 --export-markdown "$work/change.md" \
  --prepare "sed -i 's/allow: \[.*\]/allow: [a.example]/' sandbox.yaml; $work/sbx apply -y --approve-widening >/dev/null" \
  -n "allow-list change (in place)" "sed -i 's/allow: \[.*\]/allow: [b.example]/' sandbox.yaml; $work/sbx apply -y --approve-widening" >/dev/null
cat "$work/change.md"
hyperfine --runs 5 --export-markdown "$work/replace.md" \
  --prepare "sed -i 's/NODE_ENV: .*}/NODE_ENV: a}/' sandbox.yaml; $work/sbx apply -y >/dev/null" \
  -n "env change (replace)" "sed -i 's/NODE_ENV: .*}/NODE_ENV: b}/' sandbox.yaml; $work/sbx apply -y" >/dev/null
cat "$work/replace.md"
"$work/sbx" destroy -y >/dev/null
