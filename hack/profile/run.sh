#!/usr/bin/env bash
# `make profile`: where the provider's CPU and memory go, under the bench's
# workload. Runs provider-bench (batched variant only) with the provider
# wrapped in `perf record` (DWARF call stacks, 199 Hz) or in `heaptrack`,
# from the `profiling` build profile (release with line tables and symbols),
# and writes the results under .work/profile/:
#
#   perf:  perf.data, folded.txt (inferno's collapsed stacks), flame.svg
#   heap:  heaptrack.<pid>.zst (open with heaptrack_print or heaptrack_gui)
#
# Environment: PROFILE_TOOL=perf|heap (default perf), BENCH_VMS (default
# 1000), BENCH_IDLE (default 60). perf and heaptrack come from Debian's
# packages (linux-perf, heaptrack) and inferno from crates.io (pinned).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tool="${PROFILE_TOOL:-perf}"
vms="${BENCH_VMS:-1000}"
idle="${BENCH_IDLE:-60}"
target="${CARGO_TARGET_DIR:-$root/target}"
out="$root/.work/profile/$tool"
inferno_version=0.12.8

case "$tool" in
  perf) need=perf; package=linux-perf ;;
  heap) need=heaptrack; package=heaptrack ;;
  *) echo "profile: PROFILE_TOOL must be perf or heap, not $tool" >&2; exit 2 ;;
esac
if ! command -v "$need" >/dev/null; then
  echo "==> installing $package (Debian)" >&2
  apt-get install -y -qq "$package" >&2
fi
if [[ "$tool" == perf ]] && ! command -v inferno-flamegraph >/dev/null; then
  echo "==> installing inferno $inferno_version" >&2
  cargo install --quiet --locked "inferno@$inferno_version" >&2
fi

cargo build --quiet --profile profiling --workspace \
  --bin proxmox-provider --bin pve-sim --bin provider-bench
bin="$target/profiling"

rm -rf "$out" && mkdir -p "$out/bin"
ln -s "$bin/pve-sim" "$out/bin/pve-sim"
# The bench starts `proxmox-provider` from its binary directory: this one
# starts it under the profiler. (The bench's own CPU and memory figures are
# then the profiler's and mean nothing in this run.)
# perf record ends its workload when it is told to stop; heaptrack's
# launcher does not pass the bench's SIGTERM on, so the wrapper does.
case "$tool" in
  perf)
    {
      echo '#!/usr/bin/env bash'
      printf 'exec perf record -F 199 --call-graph dwarf,16384 -o %q -- %q "$@"\n' \
        "$out/perf.data" "$bin/proxmox-provider"
    } ;;
  heap)
    {
      echo '#!/usr/bin/env bash'
      printf 'heaptrack -o %q %q "$@" &\n' "$out/heaptrack" "$bin/proxmox-provider"
      echo 'launcher=$!'
      printf 'trap %q TERM INT\n' "pkill -TERM -P \$launcher -f proxmox-provider"
      # shellcheck disable=SC2016 # written for the wrapper, expanded there
      echo 'wait "$launcher"; wait "$launcher"'
    } ;;
esac >"$out/bin/proxmox-provider"
chmod +x "$out/bin/proxmox-provider"

BENCH_BIN_DIR="$out/bin" "$bin/provider-bench" run --vms "$vms" --variants batched \
  --idle "$idle" --label "profile-$tool" --work-dir "$out/bench" --results "$out" >&2

if [[ "$tool" == perf ]]; then
  perf script -i "$out/perf.data" 2>/dev/null | inferno-collapse-perf >"$out/folded.txt"
  inferno-flamegraph --title "proxmox-provider, $vms VMs" "$out/folded.txt" >"$out/flame.svg"
  echo "$out/flame.svg"
else
  ls "$out"/heaptrack*
fi
