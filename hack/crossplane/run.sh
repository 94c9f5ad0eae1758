#!/usr/bin/env bash
# `make crossplane-e2e`: the provider installed as a Crossplane package and
# run by a real Crossplane, on a real node. Opt-in (not part of `make test`):
# it needs root and a Crossplane, built here from source or given as
# release binaries.
#
#   make crossplane-e2e                          # builds Crossplane v2.1.0 (hack/crossplane/build.sh)
#   CROSSPLANE_BIN=/path/crossplane CROSSPLANE_CLI=/path/crank \
#   CROSSPLANE_CRDS=/path/cluster/crds make crossplane-e2e   # release binaries
#
# Steps, each closed by a PASS or FAIL line (the first FAIL stops the run,
# which exits non-zero; everything started here is stopped on the way out):
#  1. the Dockerfile's images (hack/node/images.sh, buildah) and the
#     function's image; the provider package (scripts/build-xpkg.sh, the CLI's
#     `xpkg build` with the runtime image tarball embedded) and the
#     function's package
#  2. the control plane and a real node (hack/node/up.sh) in network
#     namespace NODE_NETNS; containerd pulls 127.0.0.1:REGISTRY_PORT over
#     plain HTTP (a registry mirror entry), so the kubelet gets the images
#     Crossplane's Deployments name from the local registry, as a cluster
#     would from any registry
#  3. in that namespace: an OCI registry on 127.0.0.1 (go-containerregistry),
#     both packages pushed to it; Crossplane core out of cluster (`core init`,
#     `core start`, webhooks off) and its RBAC manager (`rbac start`), which
#     grants the provider's ServiceAccount what its package asks for
#  4. a ManagedResourceActivationPolicy for the provider's kinds (the package
#     declares safe-start), the DeploymentRuntimeConfig of
#     package/runtime-config.yaml and a pkg.crossplane.io/v1 Provider: the
#     Pod Crossplane creates becomes Ready and serves /metrics
#  5. pve-sim in the cluster (deploy/pve-sim/); examples/vm-100.yaml Ready;
#     `crossplane beta trace` reads it
#  6. the Function package; examples/crossplane/ (an apiextensions.crossplane.io/v2
#     XRD, scope Namespaced, a pipeline Composition and a VMGroup): two
#     composed ProxmoxVMs and the VMGroup Ready
#
# Environment: CROSSPLANE_BIN, CROSSPLANE_CLI, CROSSPLANE_CRDS (release
# binaries and the release's cluster/crds; all three or none),
# CROSSPLANE_VERSION (the source build's version), REGISTRY_PORT (5000),
# NODE_DIR (.work/crossplane-node), NODE_NETNS (crossplane-xp),
# KEEP_NODE=1 (leave everything running at the end; stop it with
# `NODE_DIR=... NODE_NETNS=... bash hack/crossplane/run.sh down`).
set -euo pipefail

xp_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export NODE_DIR="${NODE_DIR:-$(cd "$xp_here/../.." && pwd)/.work/crossplane-node}"
export NODE_NETNS="${NODE_NETNS:-crossplane-xp}"
here="$xp_here/../node"
# shellcheck source=../node/env.bash source-path=SCRIPTDIR
source "$here/env.bash"
log_tag=crossplane-e2e
port="${REGISTRY_PORT:-5000}"
registry="127.0.0.1:$port"
ns=crossplane-system
provider_ref="$registry/proxmox/provider-proxmox:v0.0.0-e2e"
function_ref="$registry/proxmox/function-compose-vms:v0.0.0-e2e"
# Packages, logs, the CLI's config: beside the node's directory, which
# down.sh removes.
xp_dir="$node_dir-work"
failed=0
# Set once this run holds the machine's node lock: only then may it tear a
# node down (down.sh also clears host-wide leftovers: cni-* namespaces, cgroups).
locked=""

# take_node_lock: one node per machine at a time (the deploy suite's node
# test takes the same lock): two kubelets would share the host's kubepods
# cgroups.
take_node_lock() {
  # Fd 8; every daemon started from here on closes it (`8>&-`), or it
  # would hold the lock as long as it runs.
  exec 8>"${TMPDIR:-/tmp}/crossplane-provider-proxmox-node-test.lock"
  flock -n 8 || { log "another node runs on this machine; waiting for it"; flock 8; }
  locked=1
}

# stop_ours: core, the RBAC manager and the registry (started here), then
# the node; core first, so that it recreates no Deployment the node's
# teardown deletes.
stop_ours() {
  local name pid
  for name in crossplane-core crossplane-rbac registry; do
    [[ -f "$node_dir/$name.pid" ]] || continue
    pid="$(cat "$node_dir/$name.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$node_dir/$name.pid"
  done
  KEEP_NODE_DIR="${KEEP_NODE_DIR:-}" bash "$here/down.sh" || log "hack/node/down.sh failed"
}

if [[ "${1:-}" == down ]]; then
  # The node of a KEEP_NODE=1 run, which released the lock when it ended
  # (as `make node-down` stops the node of `make node-up`).
  stop_ours
  exit 0
fi

[[ "$(id -u)" == 0 ]] || die "needs root (the node: network namespace, mounts, cgroups)"
# The PASS/FAIL lines, printed again together at the end.
report="$(mktemp)"

# step NAME: starts timing a step; pass/fail close it.
step_name="" step_start=0
step() { step_name="$1"; step_start=$SECONDS; log "--- $1"; }
pass() {
  local line
  line="$(printf 'PASS  %4d s  %s' $((SECONDS - step_start)) "$step_name${1:+ ($1)}")"
  echo "$line" | tee -a "$report"
}
fail() {
  local line
  line="$(printf 'FAIL  %4d s  %s' $((SECONDS - step_start)) "$step_name")"
  echo "$line" | tee -a "$report"
  log "$step_name: $*"
  failed=1
  exit 1
}

finish() {
  local rc=$?
  if [[ "$rc" != 0 && "$failed" == 0 ]]; then
    printf 'FAIL  %4d s  %s\n' $((SECONDS - step_start)) "${step_name:-setup} (the script stopped: exit $rc)" \
      | tee -a "$report"
  fi
  if [[ "$rc" != 0 && -n "$locked" ]]; then
    diagnostics || true
  fi
  if [[ -z "$locked" ]]; then
    :
  elif [[ "${KEEP_NODE:-}" == 1 ]]; then
    log "KEEP_NODE=1: still running (without the machine's node lock, as after make node-up); stop with:"
    log "  NODE_DIR=$NODE_DIR NODE_NETNS=$NODE_NETNS bash $xp_here/run.sh down"
  else
    # The logs of a failed run stay for reading.
    [[ "$rc" == 0 ]] || KEEP_NODE_DIR=1
    stop_ours
  fi
  echo "=== crossplane-e2e summary (total $SECONDS s)"
  cat "$report"
  rm -f "$report"
  exit "$rc"
}
trap finish EXIT

diagnostics() {
  [[ -f "$node_dir/cluster/kubeconfig" && -e "/run/netns/$netns" ]] || return 0
  log "diagnostics (logs stay in $node_dir)"
  kubectl get providers,providerrevisions,functions,functionrevisions,managedresourcedefinitions -o wide >&2 || true
  kubectl -n "$ns" get deploy,pods -o wide >&2 || true
  kubectl get proxmoxvms,vmgroups -A -o wide >&2 || true
  kubectl get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -25 >&2 || true
  tail -20 "$node_dir/crossplane-core.log" >&2 2>/dev/null || true
  kubectl -n "$ns" logs -l pkg.crossplane.io/provider=provider-proxmox --tail=20 >&2 || true
}

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds (quietly).
wait_for() {
  local what="$1" limit="$2"; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what: not within $limit s"
    sleep 1
  done
}

# cond KIND/NAME TYPE [NS]: true when the object's condition TYPE is True.
cond() {
  local args=(get "$1" -o "jsonpath={.status.conditions[?(@.type==\"$2\")].status}")
  [[ -z "${3:-}" ]] || args=(-n "$3" "${args[@]}")
  [[ "$(kubectl "${args[@]}" 2>/dev/null)" == True ]]
}

# install_package KIND NAME REF [SPEC_FIELDS]: a pkg.crossplane.io/v1
# Provider or Function of the package REF (JSON spec fields may follow).
install_package() {
  echo "{\"apiVersion\": \"pkg.crossplane.io/v1\", \"kind\": \"$1\", \"metadata\": {\"name\": \"$2\"},
         \"spec\": {\"package\": \"$3\"${4:+, $4}}}" | kubectl apply -f - >/dev/null \
    || fail "applying $1 $2 failed"
}

# In the node's namespace: the admin kubeconfig for Crossplane and its CLI.
cli() { in_ns env KUBECONFIG="$node_dir/cluster/kubeconfig" "$bin/crossplane-cli" "$@"; }

# --- 0. Crossplane: release binaries or a build from source
step "Crossplane binaries"
if [[ -n "${CROSSPLANE_BIN:-}${CROSSPLANE_CLI:-}${CROSSPLANE_CRDS:-}" ]]; then
  [[ -x "${CROSSPLANE_BIN:-}" && -x "${CROSSPLANE_CLI:-}" && -d "${CROSSPLANE_CRDS:-}" ]] \
    || fail "CROSSPLANE_BIN (core), CROSSPLANE_CLI (crank) and CROSSPLANE_CRDS (the release's cluster/crds) go together"
  command -v go >/dev/null || fail "Go is needed for the registry and the composition function (both Go modules)"
  tools="$(bash "$xp_here/build.sh" tools | tail -1)" || fail "hack/crossplane/build.sh tools failed"
  bin="$xp_dir/bin"
  mkdir -p "$bin"
  ln -sfn "$(realpath "$CROSSPLANE_BIN")" "$bin/crossplane"
  ln -sfn "$(realpath "$CROSSPLANE_CLI")" "$bin/crossplane-cli"
  ln -sfn "$(realpath "$CROSSPLANE_CRDS")" "$bin/crds"
  ln -sfn "$tools/registry" "$bin/registry"
  ln -sfn "$tools/function-compose-vms" "$bin/function-compose-vms"
elif command -v go >/dev/null; then
  bin="$(bash "$xp_here/build.sh" all | tail -1)" || fail "hack/crossplane/build.sh all failed"
else
  fail "no Crossplane: set CROSSPLANE_BIN, CROSSPLANE_CLI and CROSSPLANE_CRDS to a release's binaries and CRDs, or install Go to build it from source"
fi
core_version="$("$bin/crossplane-cli" version --client 2>/dev/null | head -1 || true)"
pass "${core_version:-crossplane-cli version: unknown}"

# --- 1. images and packages
step "images: the Dockerfile's (buildah) and the function's"
bash "$here/install.sh" >/dev/null || fail "hack/node/install.sh failed"
mkdir -p "$repo/.work"
read -r provider_tar sim_tar < <(IMAGE_BUILD_LOG="$repo/.work/node-image-build.log" \
  bash "$here/images.sh" project | tail -1) || fail "hack/node/images.sh project failed"
[[ -f "$provider_tar" && -f "$sim_tar" ]] || fail "hack/node/images.sh printed no archives"
mkdir -p "$xp_dir"
rm -f "$xp_dir"/{image,xpkg-build,push,core-init}.log
function_tar="$xp_dir/function-compose-vms.tar"
(
  # The same buildah setup as hack/node/images.sh (runc, ulimits, storage).
  export CONTAINERS_CONF="$cache_root/buildah/containers.conf" TMPDIR="$cache_root/buildah/tmp"
  b=(buildah --root "$cache_root/buildah/storage" --runroot "$cache_root/buildah/run" --storage-driver overlay)
  c="$("${b[@]}" from scratch)"
  "${b[@]}" copy --chmod 0755 "$c" "$(realpath "$bin/function-compose-vms")" /function >/dev/null
  "${b[@]}" config --user 65532:65532 --port 9443 --entrypoint '["/function"]' "$c"
  "${b[@]}" commit -q "$c" localhost/function-compose-vms:e2e >/dev/null
  "${b[@]}" rm "$c" >/dev/null
  rm -f "$function_tar"
  "${b[@]}" push -q localhost/function-compose-vms:e2e "docker-archive:$function_tar:function-compose-vms:e2e"
) >>"$xp_dir/image.log" 2>&1 || fail "building the function's image failed (see $xp_dir/image.log)"
pass

step "packages: xpkg build with the runtime image embedded"
mkdir -p "$xp_dir/path"
ln -sfn "$(realpath "$bin/crossplane-cli")" "$xp_dir/path/crossplane"
# The CLI writes its config under HOME; keep it out of the user's.
export CROSSPLANE_CONFIG="$xp_dir/crank-config.yaml"
PATH="$xp_dir/path:$PATH" bash "$repo/scripts/build-xpkg.sh" --image-tarball "$provider_tar" \
  --output "$xp_dir/provider-proxmox.xpkg" >"$xp_dir/xpkg-build.log" 2>&1 \
  || fail "scripts/build-xpkg.sh failed (see $xp_dir/xpkg-build.log)"
rm -rf "$xp_dir/function-package" && cp -r "$xp_here/function/package" "$xp_dir/function-package"
"$bin/crossplane-cli" xpkg build --package-root="$xp_dir/function-package" \
  --embed-runtime-image-tarball="$function_tar" --package-file="$xp_dir/function-compose-vms.xpkg" \
  >>"$xp_dir/xpkg-build.log" 2>&1 || fail "xpkg build of the function failed (see $xp_dir/xpkg-build.log)"
pass "$(du -h "$xp_dir/provider-proxmox.xpkg" | cut -f1) provider package"

# --- 2. control plane and node
step "control plane and real node (hack/node/up.sh)"
take_node_lock
# A node left behind by a killed run of this script.
stop_ours >/dev/null 2>&1 || true
kubeconfig="$(NODE_IMAGES="$sim_tar" NODE_REGISTRY="$registry" bash "$here/up.sh" 8>&- | tail -1)" \
  || fail "hack/node/up.sh failed (see $node_dir)"
[[ -f "$kubeconfig" ]] || fail "hack/node/up.sh printed no kubeconfig"
pass

# --- 3. registry, Crossplane core, RBAC manager
step "local OCI registry on $registry, packages pushed"
daemon registry "$bin/registry" -port "$port" 8>&-
wait_for "registry" 20 in_ns curl -sf "http://$registry/v2/"
cli xpkg push -f "$xp_dir/provider-proxmox.xpkg" "$provider_ref" >>"$xp_dir/push.log" 2>&1 \
  || fail "pushing the provider package failed (see $xp_dir/push.log)"
cli xpkg push -f "$xp_dir/function-compose-vms.xpkg" "$function_ref" >>"$xp_dir/push.log" 2>&1 \
  || fail "pushing the function package failed (see $xp_dir/push.log)"
pass

step "Crossplane core (core init, core start) and RBAC manager"
# Core resolves the Services of function packages (dns:///NAME.NAMESPACE:9443)
# through the cluster DNS: it runs with a resolv.conf naming CoreDNS,
# bind-mounted in a mount namespace of its own (nothing changes on the host).
cat >"$xp_dir/resolv.conf" <<EOF
nameserver ${NODE_IP:-10.99.0.1}
search svc.cluster.local cluster.local
options ndots:5
EOF
kubectl create namespace "$ns" >/dev/null 2>&1 || true
kubectl -n "$ns" create serviceaccount crossplane >/dev/null 2>&1 || true
# CRDS_PATH resolved: init walks it without following a symlinked root.
xp_env=(env KUBECONFIG="$node_dir/cluster/kubeconfig" POD_NAMESPACE="$ns" CRDS_PATH="$(realpath "$bin/crds")"
        TLS_CA_SECRET_NAME=crossplane-root-ca TLS_CLIENT_SECRET_NAME=crossplane-tls-client)
# A fresh apiserver serves the CRDs init just created later than init
# applies its Lock ("no matches for kind Lock"): once they are served, the
# next run completes.
init_ok=""
for _ in 1 2 3 4 5; do
  if in_ns "${xp_env[@]}" "$bin/crossplane" core init --enable-webhooks=false >>"$xp_dir/core-init.log" 2>&1; then
    init_ok=1; break
  fi
  wait_for "core's CRDs served" 60 kubectl get locks.pkg.crossplane.io
done
[[ -n "$init_ok" ]] || fail "core init failed (see $xp_dir/core-init.log)"
mkdir -p "$xp_dir/tls-client"
for k in ca.crt tls.crt tls.key; do
  kubectl -n "$ns" get secret crossplane-tls-client -o "jsonpath={.data.${k//./\\.}}" | base64 -d \
    >"$xp_dir/tls-client/$k" || fail "reading $k of Secret crossplane-tls-client"
done
# Core writes its package cache there but does not create the directories.
mkdir -p "$xp_dir/cache/xpkg" "$xp_dir/cache/xfn"
# daemon, with the mount namespace: unshare execs sh, which execs core, so
# the recorded PID is core's.
# shellcheck disable=SC2016 # "$0" and "$@" are that sh's
daemon crossplane-core unshare --mount --propagation private sh -c \
  'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$xp_dir/resolv.conf" \
  "${xp_env[@]}" TLS_CLIENT_CERTS_DIR="$xp_dir/tls-client" "$bin/crossplane" core start \
  --enable-webhooks=false --cache-dir="$xp_dir/cache/xpkg" --xfn-cache-dir="$xp_dir/cache/xfn" \
  --metrics-port=18080 --health-probe-port=18081 --debug 8>&-
daemon crossplane-rbac "${xp_env[@]}" "$bin/crossplane" rbac start \
  --leader-election=false 8>&-
wait_for "core /readyz" 60 in_ns curl -sf http://127.0.0.1:18081/readyz
pass

# --- 4. the provider package
step "Provider installed and Healthy (Crossplane's Deployment)"
kubectl apply -f - >/dev/null <<EOF || fail "applying the activation policy failed"
# The package declares safe-start: its kinds' CRDs exist once activated.
apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: proxmox
spec:
  activate:
    - "*.proxmox.m.crossplane.io"
EOF
kubectl apply -f "$repo/package/runtime-config.yaml" >/dev/null || fail "applying package/runtime-config.yaml failed"
install_package Provider provider-proxmox "$provider_ref" \
  '"runtimeConfigRef": {"name": "provider-proxmox"}'
wait_for "Provider provider-proxmox Healthy" 300 cond provider/provider-proxmox Healthy
wait_for "MRD proxmoxvms Established" 60 cond crd/proxmoxvms.proxmox.m.crossplane.io Established
pass "$(kubectl get managedresourcedefinitions --no-headers 2>/dev/null | grep -c Active) MRDs Active"

step "provider Pod Ready and serving /metrics"
wait_for "provider Pod Ready" 180 kubectl -n "$ns" wait pod -l pkg.crossplane.io/provider=provider-proxmox \
  --for=condition=Ready --timeout=5s
pod_ip="$(kubectl -n "$ns" get pod -l pkg.crossplane.io/provider=provider-proxmox \
  -o jsonpath='{.items[0].status.podIP}')"
image="$(kubectl -n "$ns" get pod -l pkg.crossplane.io/provider=provider-proxmox \
  -o jsonpath='{.items[0].spec.containers[0].image}')"
[[ "$image" == "$registry/"* ]] || fail "the provider Pod runs $image, not the package's image from $registry"
wait_for "GET http://$pod_ip:8080/metrics" 60 in_ns curl -sf "http://$pod_ip:8080/metrics"
in_ns curl -sf "http://$pod_ip:8080/metrics" >"$xp_dir/metrics.txt"
grep -q '^crossplane_managed_resource_exists' "$xp_dir/metrics.txt" \
  || fail "no crossplane_managed_resource_exists in the provider's metrics (see $xp_dir/metrics.txt)"
pass "$(grep -c '^[a-z]' "$xp_dir/metrics.txt") samples, image $image"

# --- 5. a ProxmoxVM against the in-cluster pve-sim
step "pve-sim in the cluster, examples/vm-100.yaml Ready"
bash "$repo/scripts/pve-sim-tls.sh" --namespace "$ns" | kubectl apply -f - >/dev/null \
  || fail "the pve-sim TLS Secret failed"
kubectl apply -k "$repo/deploy/pve-sim" >/dev/null || fail "kubectl apply -k deploy/pve-sim failed"
kubectl -n "$ns" rollout status deploy/pve-sim --timeout=120s >/dev/null || fail "pve-sim did not roll out"
kubectl -n default apply -f "$repo/examples/vm-100.yaml" >/dev/null || fail "applying examples/vm-100.yaml failed"
wait_for "ProxmoxVM vm-100 Ready" 180 cond proxmoxvm/vm-100 Ready default
pass

step "crossplane beta trace proxmoxvm vm-100"
cli beta trace proxmoxvm.proxmox.m.crossplane.io vm-100 -n default >"$xp_dir/trace-vm.txt" 2>&1 \
  || { cat "$xp_dir/trace-vm.txt" >&2; fail "beta trace failed"; }
cat "$xp_dir/trace-vm.txt"
grep -Eq '^ProxmoxVM/vm-100( \(default\))? +True +True' "$xp_dir/trace-vm.txt" \
  || fail "trace does not show ProxmoxVM/vm-100 Synced and Ready"
pass

# --- 6. a composition of ProxmoxVMs
step "Function function-compose-vms installed and Healthy"
install_package Function function-compose-vms "$function_ref"
wait_for "Function Healthy" 240 cond function/function-compose-vms Healthy
pass

step "examples/crossplane/: VMGroup composes two ProxmoxVMs, all Ready"
kubectl apply -f "$repo/examples/crossplane/xrd.yaml" >/dev/null || fail "applying the XRD failed"
wait_for "XRD Established" 60 cond xrd/vmgroups.platform.example.org Established
kubectl apply -f "$repo/examples/crossplane/composition.yaml" >/dev/null || fail "applying the Composition failed"
wait_for "VMGroup served" 60 kubectl get vmgroups -n default
kubectl -n default apply -f "$repo/examples/crossplane/vmgroup.yaml" >/dev/null || fail "applying the VMGroup failed"
wait_for "VMGroup web Ready" 300 cond vmgroup/web Ready default
composed="$(kubectl -n default get proxmoxvms -l crossplane.io/composite=web \
  -o jsonpath='{range .items[*]}{.spec.forProvider.vmid}={.status.conditions[?(@.type=="Ready")].status} {end}')"
[[ "$composed" =~ ^(30[01]=True\ ){2}$ && "$composed" == *300=True* && "$composed" == *301=True* ]] \
  || fail "composed ProxmoxVMs: '$composed', want vmids 300 and 301 Ready"
cli beta trace vmgroup web -n default >"$xp_dir/trace-xr.txt" 2>&1 || true
cat "$xp_dir/trace-xr.txt"
pass "vmid=Ready: ${composed% }"
