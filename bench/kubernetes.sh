#!/usr/bin/env bash
# Apply of a new sandbox on the repository's Kubernetes test cluster
# (test/kubernetes/cluster up): `sbx apply` against the floor, `kubectl
# apply` of the very objects sbx applies (captured from its own kubectl
# call) plus `kubectl wait` for the proxy pod and the Sandbox to be Ready,
# timed in one hyperfine session. Needs root (loading the helper image into
# the cluster), hyperfine, docker.
#
# The sandbox's egress is advisory: the test cluster does not enforce
# NetworkPolicy, so an enforced sandbox is refused there by design
# (docs/kubernetes.md); the probe is not part of what is compared.
# Everything carries the shell's pid and is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "bench/kubernetes.sh: install hyperfine" >&2; exit 1; }
test/kubernetes/cluster status >/dev/null || { echo "bench/kubernetes.sh: start the cluster: test/kubernetes/cluster up" >&2; exit 1; }
eval "$(test/kubernetes/cluster env)"
runs=${RUNS:-8}
id=$$
ns=sbx-bench-$id class=sbx-bench-$id pv=sbx-bench-$id helper=sbx-helper-bench:$id name=bench
work=$(mktemp -d)
kc() { "$SBX_K8S_BIN/kubectl" "$@"; }
cleanup() {
  (cd "$work/ws" 2>/dev/null && "$work/sbx" destroy -y >/dev/null 2>&1) || true
  kc delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null || true
  kc delete persistentvolume "$pv" --ignore-not-found --wait=true --timeout=60s >/dev/null || true
  test/kubernetes/cluster remove-image "$helper" >/dev/null 2>&1 || true
  docker rmi -f "$helper" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

CGO_ENABLED=0 GOOS=linux go build -o "$work/sbx" ./cmd/sbx
mkdir -p "$work/img" "$work/ws" "$work/pv"
cp "$work/sbx" "$work/img/sbx"
printf 'FROM scratch\nCOPY sbx /sbx\nENTRYPOINT ["/sbx"]\n' >"$work/img/Dockerfile"
docker build -q -t "$helper" "$work/img" >/dev/null 2>&1
test/kubernetes/cluster load-image "$helper" >/dev/null

kc create namespace "$ns" >/dev/null
kc -n "$ns" wait --for=create serviceaccount/default --timeout=60s >/dev/null
# The cluster has no volume provisioner: one hostPath volume, made
# available again after each removal (reset below).
kc create -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $pv}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: $class
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: $work/pv, type: DirectoryOrCreate}
YAML

# kubectl for sbx: the real one, keeping a copy of what `apply -f -` reads.
cat >"$work/kubectl" <<SH
#!/bin/sh
for a in "\$@"; do
  if [ "\$a" = apply ]; then
    tee "$work/objects.json" | "$SBX_K8S_BIN/kubectl" "\$@"
    exit \$?
  fi
done
exec "$SBX_K8S_BIN/kubectl" "\$@"
SH
chmod +x "$work/kubectl"
export SBX_KUBECTL=$work/kubectl SBX_K8S_HELPER_IMAGE=$helper SBX_STATE_DIR=$work/state SBX_DOCKER_SBX=
cat >"$work/ws/sandbox.yaml" <<YAML
version: 1
name: $name
agent: shell
driver: kubernetes
workspace: .
template: docker.io/library/sbx-k8s-busybox:local
network: {allow: [example.com]}
kubernetes: {namespace: $ns, storageClass: $class, workspaceSize: 64Mi, egress: advisory}
YAML
echo hello >"$work/ws/README"

# reset removes the sandbox (whoever made it) and frees the volume.
cat >"$work/reset" <<SH
#!/bin/sh
set -e
cd "$work/ws"
"$work/sbx" destroy -y >/dev/null
"$SBX_K8S_BIN/kubectl" -n "$ns" delete sandboxes.agents.x-k8s.io,pods,networkpolicies.networking.k8s.io,persistentvolumeclaims --all --wait=true --timeout=120s >/dev/null
"$SBX_K8S_BIN/kubectl" patch persistentvolume "$pv" --type=json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null 2>&1 || true
"$SBX_K8S_BIN/kubectl" wait --for=jsonpath='{.status.phase}'=Available persistentvolume/"$pv" --timeout=60s >/dev/null
SH
chmod +x "$work/reset"

# One apply first: it captures the objects the floor applies, and shows
# that sbx applies here at all.
(cd "$work/ws" && "$work/sbx" apply -y >/dev/null)
[ -s "$work/objects.json" ] || { echo "bench/kubernetes.sh: sbx apply ran no kubectl apply" >&2; exit 1; }
"$work/reset"
floor="$SBX_K8S_BIN/kubectl -n $ns apply --server-side --field-manager=sbx -f $work/objects.json && $SBX_K8S_BIN/kubectl -n $ns wait --for=condition=Ready pod/$name.egress sandboxes.agents.x-k8s.io/$name --timeout=180s"
echo "== apply of a new sandbox: sbx apply vs kubectl apply of the same objects + wait for Ready ($runs runs each)"
hyperfine --warmup 1 --runs "$runs" --prepare "$work/reset" --export-markdown "$work/apply.md" \
  -n "sbx apply" "cd $work/ws && $work/sbx apply -y >/dev/null" \
  -n "kubectl apply + wait Ready" "$floor >/dev/null"
cat "$work/apply.md"
