#!/usr/bin/env bash
# `make demo`: the provider end to end on one machine, with nothing but this
# repository, Rust and Go.
#
#   1. builds what is missing: the workspace as `make test` builds it (so
#      after `make test` nothing is compiled), of which it runs
#      proxmox-provider, pve-sim and testenv; etcd, kube-apiserver and
#      kubectl from Go modules on the first run,
#   2. starts a local control plane (or, with DEMO_USE_CURRENT_CLUSTER=1, uses
#      the cluster of the current kubeconfig),
#   3. starts pve-sim on 127.0.0.1 at real-time speed,
#   4. installs the CRDs, a credentials Secret and the ClusterProviderConfig
#      `default` pinned to the simulator's certificate fingerprint,
#   5. runs `proxmox-provider run` (logs to a file),
#   6. applies examples/vm-100.yaml and shows its progress until it is Ready,
#   7. prints `kubectl get proxmoxvm -o wide` and how to keep using it, and
#      waits. Ctrl-C (or SIGTERM, SIGHUP) tears everything down and exits 0.
#
# Ctrl-C: the terminal sends SIGINT to its whole foreground process group.
# proxmox-provider and pve-sim run in process groups of their own, so it
# reaches only this script (and the command it waits for), which then stops
# them in order: the provider first (with DEMO_USE_CURRENT_CLUSTER=1 it must
# still run to delete the VM), then pve-sim, then the control plane. Under
# `make demo` on a terminal, make would get the SIGINT too; this script takes
# the terminal for itself first (see "the terminal" below), so make sees a
# clean exit 0.
#
# Environment (all optional):
#   DEMO_USE_CURRENT_CLUSTER=1  use $KUBECONFIG's current context instead of a
#                               local control plane (the CRDs stay installed)
#   DEMO_DIR                    where state and logs go (default .work/demo)
#   DEMO_SIM_LISTEN             pve-sim address (default 127.0.0.1:8006, or a
#                               free port when that one is taken)
#   DEMO_SIM_FLAGS              more pve-sim flags, e.g. "--time-scale 0.2"
#                               (default: none, i.e. real-time speed)
#   DEMO_METRICS_ADDR           provider's /metrics address (default
#                               127.0.0.1:8080, or a free port)
#   DEMO_MANIFEST               the VM to apply (default examples/vm-100.yaml)
#   DEMO_EXIT_WHEN_READY=1      tear down once the VM is Ready instead of
#                               waiting for Ctrl-C (for CI)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# --- Ctrl-C -------------------------------------------------------------------
# A shell started with SIGINT ignored (a background job of a script, some
# harnesses) cannot trap it: Ctrl-C, or a SIGINT to the process group, would
# not end the demo (it used to stop only the provider and pve-sim, which set
# their own handlers, and the demo then failed with "stopped unexpectedly").
# So run again with SIGINT at its default (GNU env): it is this script's
# teardown wherever it comes from. Where env cannot, a warning below says how
# to stop the demo.
if [[ "$(trap -p INT)" == "trap -- '' SIGINT" && -z "${DEMO_SIGINT_RESET:-}" ]] &&
  env --default-signal=INT true 2>/dev/null; then
  DEMO_SIGINT_RESET=1 exec env --default-signal=INT "$BASH" "${BASH_SOURCE[0]}" "$@"
fi

# --- the terminal -------------------------------------------------------------
# Under `make demo` make shares the terminal's foreground process group with
# this script, so Ctrl-C reaches make as well, and GNU make then waits for
# the recipe and kills itself with the same SIGINT however the recipe ended
# ("make: *** [demo] Interrupt", status 130). So when this script is on a
# terminal, in its foreground group and not that group's leader (started by
# make or another script, not by an interactive shell), it runs itself again
# as a foreground job: with job control on, bash gives the job a process
# group of its own and the terminal. Ctrl-C then reaches only the demo, and
# make sees its exit status 0. (Linux: read from /proc; elsewhere the demo
# runs as it is.)
foreground_but_not_leader() {
  local stat fields
  stat="$(cat "/proc/$$/stat" 2>/dev/null)" || return 1
  read -r -a fields <<<"${stat##*) }" # state ppid pgrp session tty_nr tpgid ...
  [[ "${fields[2]}" == "${fields[5]}" && "${fields[2]}" != "$$" ]]
}
if [[ -z "${DEMO_OWN_GROUP:-}" && -t 0 ]] && foreground_but_not_leader; then
  set -m
  status=0
  DEMO_OWN_GROUP=1 "$BASH" "${BASH_SOURCE[0]}" "$@" || status=$?
  exit "$status"
fi
if [[ -n "${DEMO_OWN_GROUP:-}" ]]; then
  # Ctrl-Z would stop this job while make, which cannot resume it, goes on.
  trap '' TSTP
fi
dir="${DEMO_DIR:-$root/.work/demo}"
manifest="${DEMO_MANIFEST:-examples/vm-100.yaml}"
cargo="${CARGO:-cargo}"
bin="${CARGO_TARGET_DIR:-$root/target}/debug"
current_cluster="${DEMO_USE_CURRENT_CLUSTER:-0}"
started=$SECONDS

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

# --- teardown -----------------------------------------------------------------
sim_pid="" provider_pid="" cluster_started=0 applied_vm=0 stopping=""
# shellcheck disable=SC2317 # called from the EXIT trap
stop_pid() { # PID NAME: SIGTERM, then SIGKILL after 15 s
  local pid="$1" name="$2"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }; sleep 0.1; done
  say "$name did not stop in 15 s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
  local status=$?
  # A second Ctrl-C must not cut the teardown short: it would leave the
  # provider and pve-sim running (they are not in this process group).
  trap '' INT TERM HUP
  trap - EXIT
  echo >&2
  say "${stopping:+$stopping; }tearing down"
  if [[ "$current_cluster" == 1 && "$applied_vm" == 1 && -n "$provider_pid" ]]; then
    # The provider is still up: let it destroy the VM and release the resource.
    "$kubectl" delete -f "$manifest" --wait --timeout=60s >/dev/null 2>&1 || true
    "$kubectl" delete clusterproviderconfig default --ignore-not-found >/dev/null 2>&1 || true
    "$kubectl" -n crossplane-system delete secret pve-sim-credentials --ignore-not-found >/dev/null 2>&1 || true
  fi
  stop_pid "$provider_pid" proxmox-provider
  stop_pid "$sim_pid" pve-sim
  # One started just before the interrupt, before its PID was recorded.
  local job
  for job in $(jobs -p); do stop_pid "$job" "process $job"; done
  if [[ "$cluster_started" == 1 ]]; then
    "$bin/testenv" down --dir "$dir/cluster" >/dev/null 2>&1 || say "testenv down failed; run: $bin/testenv down --dir $dir/cluster"
  fi
  say "done; logs are kept in $dir"
  exit "$status"
}
trap cleanup EXIT
# Ctrl-C is how the demo is meant to end: a clean exit, not an error.
trap 'stopping=interrupted; exit 0' INT
trap 'stopping=terminated; exit 0' TERM
trap 'stopping="hung up"; exit 0' HUP
if [[ "$(trap -p INT)" == "trap -- '' SIGINT" ]]; then
  # Inherited, and env could not reset it (see "Ctrl-C" above).
  say "SIGINT is ignored in this shell, so Ctrl-C cannot stop the demo; stop it with: kill -TERM $$"
fi
# in_own_group CMD...: runs CMD in the background in a process group of its
# own (job control on for just this command), with no terminal input, so the
# terminal's Ctrl-C does not reach it; cleanup stops it.
in_own_group() { set -m; "$@" </dev/null & set +m; }

# --- 1. build -----------------------------------------------------------------
[[ -f "$manifest" ]] || die "$manifest is missing (the examples come from the packaging branch)"
mkdir -p "$dir"
# The build of `make test` (BUILD in the Makefile): nothing to compile after
# it. A narrower cargo build would resolve other features and compile much
# of the dependency tree again, for minutes.
say "building the workspace as make test does (nothing to do after make test)"
"$cargo" build --quiet --workspace --all-targets
if [[ "$current_cluster" == 1 ]]; then
  kubectl="${KUBECTL:-kubectl}"
  command -v "$kubectl" >/dev/null || die "DEMO_USE_CURRENT_CLUSTER=1 needs kubectl on PATH (or KUBECTL)"
else
  say "building the control plane if it is not cached (the first time takes minutes)"
  bin_dir="$(bash hack/control-plane/build.sh | tail -1)"
  kubectl="$bin_dir/kubectl"
fi

# --- 2. the cluster -------------------------------------------------------------
if [[ "$current_cluster" == 1 ]]; then
  say "using the current cluster: $("$kubectl" config current-context)"
  kubeconfig="${KUBECONFIG:-$HOME/.kube/config}"
else
  say "starting etcd and kube-apiserver"
  "$bin/testenv" down --dir "$dir/cluster" >/dev/null 2>&1 || true
  cluster_started=1
  kubeconfig="$(CONTROL_PLANE_BIN_DIR="$bin_dir" "$bin/testenv" up --dir "$dir/cluster" | tail -1)"
fi
export KUBECONFIG="$kubeconfig"

# --- 3. pve-sim ------------------------------------------------------------------
port_taken() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
sim_listen="${DEMO_SIM_LISTEN:-127.0.0.1:8006}"
if port_taken "$sim_listen"; then sim_listen="127.0.0.1:0"; fi
token_secret="$(cat /proc/sys/kernel/random/uuid 2>/dev/null || echo "demo-$RANDOM$RANDOM")"
token_id='root@pam!demo'
say "starting pve-sim on $sim_listen"
# shellcheck disable=SC2086 # DEMO_SIM_FLAGS is a list of flags
in_own_group "$bin/pve-sim" --listen "$sim_listen" --api-token "$token_id=$token_secret" \
  ${DEMO_SIM_FLAGS:-} --ca-out "$dir/pve-sim-ca.pem" \
  >"$dir/pve-sim.out" 2>"$dir/pve-sim.log"
sim_pid=$!
for _ in $(seq 100); do
  grep -q '^fingerprint ' "$dir/pve-sim.out" 2>/dev/null && break
  kill -0 "$sim_pid" 2>/dev/null || die "pve-sim exited: $(cat "$dir/pve-sim.log")"
  sleep 0.1
done
sim_url="$(sed -n 's/^listening on //p' "$dir/pve-sim.out")"
fingerprint="$(sed -n 's/^fingerprint //p' "$dir/pve-sim.out")"
[[ -n "$sim_url" && -n "$fingerprint" ]] || die "pve-sim did not report its address and fingerprint"

# --- 4. CRDs, Secret, ClusterProviderConfig ----------------------------------------
say "installing the CRDs, the credentials Secret and ClusterProviderConfig default"
"$kubectl" apply --server-side -f crds/ >/dev/null
"$kubectl" wait --for=condition=Established --timeout=60s -f crds/ >/dev/null
"$kubectl" create namespace crossplane-system --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata: {name: pve-sim-credentials, namespace: crossplane-system}
stringData: {tokenId: "$token_id", secret: "$token_secret"}
---
apiVersion: proxmox.m.crossplane.io/v1alpha1
kind: ClusterProviderConfig
metadata: {name: default}
spec:
  endpoint: $sim_url
  credentials:
    source: Secret
    secretRef: {name: pve-sim-credentials, namespace: crossplane-system}
  tls: {fingerprint: "$fingerprint"}
  tasks: {pollInterval: 2s}
EOF

# --- 5. the provider ------------------------------------------------------------------
metrics_addr="${DEMO_METRICS_ADDR:-127.0.0.1:8080}"
if port_taken "$metrics_addr"; then metrics_addr="127.0.0.1:0"; fi
say "starting proxmox-provider run (logs: $dir/provider.log)"
POD_NAMESPACE=crossplane-system in_own_group "$bin/proxmox-provider" run \
  --kubeconfig "$kubeconfig" --metrics-addr "$metrics_addr" --log-format text \
  >"$dir/provider.log" 2>&1
provider_pid=$!
for _ in $(seq 100); do
  grep -q 'serving /metrics' "$dir/provider.log" 2>/dev/null && break
  kill -0 "$provider_pid" 2>/dev/null || die "proxmox-provider exited: $(tail -5 "$dir/provider.log")"
  sleep 0.1
done
metrics_addr="$(sed -n 's/.*serving \/metrics.* addr=\([^ ]*\).*/\1/p' "$dir/provider.log" | tail -1)"
[[ -n "$metrics_addr" ]] || die "cannot find the provider's metrics address in $dir/provider.log"

# --- 6. the VM ------------------------------------------------------------------------------
say "applying $manifest"
"$kubectl" apply -f "$manifest" >/dev/null
applied_vm=1
applied_at=$SECONDS
vm_name="$("$kubectl" get -f "$manifest" -o jsonpath='{.metadata.name}')"
jsonpath='{.status.atProvider.task.summary}|{.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].reason}|{.status.conditions[?(@.type=="Synced")].status}|{.status.conditions[?(@.type=="Synced")].reason}|{.status.atProvider.state}|{.status.atProvider.ipAddress}|{.metadata.annotations.crossplane\.io/external-name}|{.status.conditions[?(@.type=="Synced")].message}'
tty=0; [[ -t 1 ]] && tty=1
last_phase="" ready_at=""
while :; do
  kill -0 "$provider_pid" 2>/dev/null || die "proxmox-provider exited; see $dir/provider.log"
  line="$("$kubectl" get -f "$manifest" -o jsonpath="$jsonpath" 2>/dev/null || true)"
  IFS='|' read -r task ready ready_reason synced synced_reason state ip vmid message <<<"$line"
  message="${message//UPID:*:/…}"
  (( ${#message} > 90 )) && message="${message:0:87}..."
  progress="$(printf '[%4ss] VM %-4s %-16s Ready=%-5s %-10s Synced=%-5s %-15s %s' \
    "$((SECONDS - started))" "${vmid:--}" "${task:-${state:--}}" "${ready:--}" \
    "${ready_reason:-}" "${synced:--}" "${synced_reason:-}" "$message")"
  phase="$ready_reason/$synced_reason/${task%% *}"
  if [[ "$tty" == 1 ]]; then
    [[ "$phase" != "$last_phase" && -n "$last_phase" ]] && printf '\n'
    printf '\r\033[K%s' "$progress"
  elif [[ "$phase" != "$last_phase" ]]; then
    printf '%s\n' "$progress"
  fi
  last_phase="$phase"
  if [[ "$ready" == True && -z "$ready_at" ]]; then
    ready_at=$SECONDS
    [[ "$tty" == 1 ]] && printf '\n'
    say "$vm_name is Ready after $((ready_at - applied_at)) s; waiting for the guest agent's address"
    last_phase=""
  fi
  # Once Ready, give the guest agent up to 40 s to report the address.
  if [[ -n "$ready_at" ]] && { [[ -n "$ip" ]] || (( SECONDS - ready_at > 40 )); }; then break; fi
  sleep 2
done
[[ "$tty" == 1 ]] && printf '\n'
say "the guest agent reports ${ip:-no address yet}; $((SECONDS - started)) s since the demo started"
"$kubectl" get proxmoxvm -o wide

# --- 7. keep using it ------------------------------------------------------------------------
path_hint=""
[[ "$kubectl" == */* ]] && path_hint=" PATH=$(dirname "$kubectl"):\$PATH   # a kubectl matching the API server"
cat <<EOF

The demo keeps running. In another terminal:

  export KUBECONFIG=$kubeconfig$path_hint
  kubectl get proxmoxvm -o wide
  kubectl describe proxmoxvm $vm_name                 # conditions and events
  kubectl patch proxmoxvm $vm_name --type merge -p '{"spec":{"forProvider":{"powerState":"Stopped"}}}'
  kubectl delete proxmoxvm $vm_name                   # destroys the VM on the simulator

  # The simulated Proxmox API:
  curl -s --cacert $dir/pve-sim-ca.pem -H 'Authorization: PVEAPIToken=$token_id=$token_secret' \\
    $sim_url/api2/json/nodes/pve/qemu/${vmid:-100}/config
  curl -s --cacert $dir/pve-sim-ca.pem $sim_url/_sim/requests   # every request the provider made

  curl -s http://$metrics_addr/metrics                     # Prometheus metrics
  tail -f $dir/provider.log                                  # provider logs
  # pve-sim logs: $dir/pve-sim.log

Press Ctrl-C to tear everything down.
EOF
if [[ "${DEMO_EXIT_WHEN_READY:-0}" == 1 ]]; then exit 0; fi
while kill -0 "$provider_pid" 2>/dev/null && kill -0 "$sim_pid" 2>/dev/null; do sleep 1; done
die "proxmox-provider or pve-sim stopped unexpectedly; see $dir/provider.log and $dir/pve-sim.log"
