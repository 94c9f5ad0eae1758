#!/usr/bin/env bash
# End-to-end test on a kind cluster, with the Proxmox VE API simulator in
# the cluster instead of a Proxmox server:
#
#   1. docker build the provider's image and the simulator's (the
#      Dockerfile's `pve-sim` target) and kind load them;
#   2. crossplane-system with the restricted Pod Security level enforced,
#      kubectl apply -k deploy/ (CRDs, RBAC, the provider), then the
#      simulator: its TLS Secret (scripts/pve-sim-tls.sh) and deploy/pve-sim/
#      (Deployment, Service, credentials, ClusterProviderConfig `default`);
#      the provider's pod holds the Lease;
#   3. examples/vm-100.yaml with a `kubectl rollout restart` of the provider
#      while its import runs: Ready, one create task; its metrics scraped
#      from the pod; then the other examples that run against the simulator,
#      until every ProxmoxVM is Ready; then delete them and wait until they
#      are gone;
#   4. on failure, collect logs, events and descriptions into $ARTIFACTS.
#
# tests/deploy/node.rs runs the same steps (and the Helm chart's) on a
# real kubelet without kind or Docker, with images buildah built from the
# same Dockerfile and imported into the node's containerd.
#
# Needs docker, kind, kubectl and openssl. Run from anywhere:
#
#   scripts/kind-e2e.sh
#
# Environment:
#   KIND_CLUSTER_NAME  cluster to create or reuse (crossplane-provider-proxmox-e2e)
#   IMAGE              image name (crossplane-provider-proxmox:latest, what deploy/ uses)
#   SIM_IMAGE          simulator image name (pve-sim:latest, what deploy/pve-sim/ uses)
#   SKIP_BUILD=1       use an IMAGE and SIM_IMAGE built already
#   KEEP_CLUSTER=1     leave the cluster running afterwards (it is deleted
#                      otherwise, unless it existed before)
#   TIMEOUT            kubectl wait timeout per step (10m)
#   ARTIFACTS          where diagnostics go on failure (.work/kind-e2e)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cluster="${KIND_CLUSTER_NAME:-crossplane-provider-proxmox-e2e}"
image="${IMAGE:-crossplane-provider-proxmox:latest}"
sim_image="${SIM_IMAGE:-pve-sim:latest}"
timeout="${TIMEOUT:-10m}"
artifacts="${ARTIFACTS:-$root/.work/kind-e2e}"
namespace=crossplane-system
vm_namespace=default
# The examples that run against the simulator, in order: vm-observe.yaml
# observes the VM that vm-100.yaml creates.
examples=(vm-100.yaml vm-clone.yaml vm-static-ip.yaml vm-orphan.yaml vm-observe.yaml)

log() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'kind-e2e: %s\n' "$*" >&2; exit 1; }

for tool in docker kind kubectl openssl; do
  command -v "$tool" >/dev/null || die "$tool is needed on PATH"
done

created_cluster=0
collect() {
  log "collecting diagnostics into $artifacts"
  mkdir -p "$artifacts"
  local kc=(kubectl --context "kind-$cluster")
  "${kc[@]}" get all,proxmoxvms,clusterproviderconfigs,providerconfigs -A -o wide >"$artifacts/objects.txt" 2>&1 || true
  "${kc[@]}" get proxmoxvms -A -o yaml >"$artifacts/proxmoxvms.yaml" 2>&1 || true
  "${kc[@]}" describe proxmoxvms -A >"$artifacts/proxmoxvms-describe.txt" 2>&1 || true
  "${kc[@]}" get events -A --sort-by=.lastTimestamp >"$artifacts/events.txt" 2>&1 || true
  "${kc[@]}" -n "$namespace" describe pods >"$artifacts/pods-describe.txt" 2>&1 || true
  for app in crossplane-provider-proxmox pve-sim; do
    "${kc[@]}" -n "$namespace" logs -l "app=$app" --all-containers --prefix --tail=-1 \
      >"$artifacts/$app.log" 2>&1 || true
    "${kc[@]}" -n "$namespace" logs -l "app=$app" --all-containers --prefix --tail=-1 --previous \
      >"$artifacts/$app.previous.log" 2>&1 || true
  done
  kind export logs "$artifacts/kind" --name "$cluster" >/dev/null 2>&1 || true
  # The provider's log is what explains most failures: show its end here too.
  tail -n 50 "$artifacts/crossplane-provider-proxmox.log" >&2 || true
}

finish() {
  local status=$?
  if [[ $status -ne 0 ]]; then
    collect
    log "FAILED (exit $status); diagnostics in $artifacts"
  else
    log "passed"
  fi
  if [[ $created_cluster == 1 && "${KEEP_CLUSTER:-0}" != 1 ]]; then
    kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
  fi
  exit "$status"
}
trap finish EXIT

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  log "building $image"
  docker build -t "$image" "$root"
  log "building $sim_image"
  docker build --target pve-sim -t "$sim_image" "$root"
fi

if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  log "reusing kind cluster $cluster"
else
  log "creating kind cluster $cluster"
  kind create cluster --name "$cluster" --wait 120s
  created_cluster=1
fi
kubectl config use-context "kind-$cluster" >/dev/null

log "loading $image and $sim_image into the cluster"
kind load docker-image "$image" --name "$cluster"
kind load docker-image "$sim_image" --name "$cluster"

log "installing the provider (kubectl apply -k deploy/), restricted Pod Security enforced"
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f -
kubectl label --overwrite namespace "$namespace" \
  pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest
kubectl apply -k "$root/deploy"
kubectl wait --for=condition=Established --timeout="$timeout" \
  crd/proxmoxvms.proxmox.m.crossplane.io \
  crd/providerconfigs.proxmox.m.crossplane.io \
  crd/clusterproviderconfigs.proxmox.m.crossplane.io

log "installing the simulator (deploy/pve-sim/)"
if ! kubectl -n "$namespace" get secret pve-sim-tls >/dev/null 2>&1; then
  "$root/scripts/pve-sim-tls.sh" --namespace "$namespace" | kubectl apply -f -
fi
kubectl apply -k "$root/deploy/pve-sim"

if [[ "$image" != crossplane-provider-proxmox:latest ]]; then
  kubectl -n "$namespace" set image deployment/crossplane-provider-proxmox "provider=$image"
fi
if [[ "$sim_image" != pve-sim:latest ]]; then
  kubectl -n "$namespace" set image deployment/pve-sim "pve-sim=$sim_image"
fi
kubectl -n "$namespace" rollout status deployment/pve-sim --timeout="$timeout"
kubectl -n "$namespace" rollout status deployment/crossplane-provider-proxmox --timeout="$timeout"

pod="$(kubectl -n "$namespace" get pods -l app=crossplane-provider-proxmox \
         --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}')"
for _ in $(seq 120); do
  holder="$(kubectl -n "$namespace" get lease crossplane-provider-proxmox \
              -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)"
  [[ "$holder" == "$pod"-* ]] && break
  sleep 0.5
done
[[ "$holder" == "$pod"-* ]] || die "the provider's pod $pod does not hold its Lease (holder: $holder)"

log "creating VMs from examples/ (a rollout restart during vm-100's import)"
for example in "${examples[@]}"; do
  kubectl -n "$vm_namespace" apply -f "$root/examples/$example"
  if [[ $example == vm-100.yaml ]]; then
    # VM 100 first: the observe-only example reads it, and VMIDs the
    # provider allocates for the others must not race for 100.
    for _ in $(seq 600); do
      task="$(kubectl -n "$vm_namespace" get proxmoxvm vm-100 -o jsonpath='{.status.atProvider.task.type}')"
      [[ "$task" == qmcreate ]] && break
      sleep 0.1
    done
    kubectl -n "$namespace" rollout restart deployment/crossplane-provider-proxmox
    kubectl -n "$namespace" rollout status deployment/crossplane-provider-proxmox --timeout="$timeout"
    kubectl -n "$vm_namespace" wait --for=condition=Ready proxmoxvm/vm-100 --timeout="$timeout"
    pod="$(kubectl -n "$namespace" get pods -l app=crossplane-provider-proxmox \
             --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}')"
    kubectl get --raw "/api/v1/namespaces/$namespace/pods/$pod:8080/proxy/metrics" \
      | grep -q '^proxmox_provider_reconcile' || die "no reconcile metrics from $pod"
  fi
done
kubectl -n "$vm_namespace" get proxmoxvms -o wide
kubectl -n "$vm_namespace" wait --for=condition=Ready proxmoxvm --all --timeout="$timeout"
kubectl -n "$vm_namespace" get proxmoxvms -o wide

log "deleting the VMs"
kubectl -n "$vm_namespace" delete proxmoxvm --all --wait --timeout="$timeout"
