#!/usr/bin/env bash
# pve-sim and fakepve 0.5.0 side by side: probes of PVE behaviour and of the
# calls common clients make, the GETs of the PVE 9 schema each answers,
# start-up time, server CPU per request and memory with 1,000 VMs, measured
# the same way for both (hack/compare-fakepve/compare.py). Prints a Markdown
# table; docs/pve-sim.md has the figures of the last run and this command.
#
#   scripts/compare-fakepve.sh                 # release build of pve-sim, 5,000 requests per figure
#   scripts/compare-fakepve.sh --requests 1000 # quicker, coarser CPU figures
#
# Arguments go to compare.py (--requests N, --vms N, --time-scale F,
# --json FILE). Needs cargo and python3; fakepve and its dependencies are
# installed, hash-checked, into a cached venv by hack/tools/ensure.sh fakepve.
# Both servers listen on loopback only.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"

echo "building pve-sim (release)" >&2
cargo build --quiet --release --package pve-sim --manifest-path "$root/Cargo.toml"
python="$(bash "$root/hack/tools/ensure.sh" fakepve | tail -n 1)"
schema="$(bash "$root/hack/tools/ensure.sh" pve-api-schema | tail -n 1)"

exec "$python" "$root/hack/compare-fakepve/compare.py" \
  --pve-sim "$target_dir/release/pve-sim" --schema "$schema" "$@"
