#!/usr/bin/env bash
# Runs what `cargo test --workspace --all-targets` runs, the same binaries
# with the same arguments, in three lanes at once: the deploy suite (mostly
# waiting: a real node, image imports, Helm), the chaos suite (its own
# control plane, which it restarts; mostly waiting on kills and Leases),
# and every other test binary, one after the other. Cargo itself runs test binaries one at a
# time and holds the build directory's lock meanwhile, so a second `cargo
# test` cannot run beside it; the binaries can.
#
#   bash hack/test-suites.sh LOG [-- ARGS...]
#
# Builds nothing new (the binaries are those `cargo build --workspace
# --all-targets` built: `--no-run` only lists them). Each binary runs in its
# package's directory, as under cargo. LOG gets every binary's output with
# cargo's `Running` line before it (make test's timing table reads them);
# the exit status is non-zero if any binary failed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log="${1:?usage: test-suites.sh LOG [-- ARGS...]}"
shift
[[ "${1:-}" == "--" ]] && shift
cargo="${CARGO:-cargo}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One line per test binary: package directory, source path, executable.
(cd "$repo" && "$cargo" test --workspace --all-targets --no-run --message-format=json 2>/dev/null) \
  | python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test"):
        continue
    exe = m.get("executable")
    if not exe:
        continue
    pkg = os.path.dirname(m["manifest_path"])
    src = os.path.relpath(m["target"]["src_path"], pkg)
    kind = m["target"]["kind"][0]
    label = src if kind == "test" else "unittests " + src
    print("\t".join([pkg, label, exe]))
' >"$work/binaries"
[[ -s "$work/binaries" ]] || { echo "test-suites.sh: cargo listed no test binaries" >&2; exit 1; }

# lane NAME FILTER: runs the binaries whose line matches FILTER (grep -E),
# or does not when FILTER starts with "!".
lane() {
  local name="$1" filter="$2" failed=0 pkg label exe
  shift 2
  local pick=(grep -E "$filter")
  if [[ "$filter" == !* ]]; then pick=(grep -vE "${filter#!}"); fi
  while IFS=$'\t' read -r pkg label exe; do
    echo "     Running $label ($exe)" >>"$work/$name.log"
    local start=$SECONDS
    if (cd "$pkg" && "$exe" "$@") >>"$work/$name.log" 2>&1; then
      echo "==> ok     $(basename "$exe") ($((SECONDS - start)) s)"
    else
      echo "==> FAILED $(basename "$exe") ($((SECONDS - start)) s)"
      failed=1
    fi
  done < <("${pick[@]}" "$work/binaries" || true)
  return "$failed"
}

deploy='/deploy-[0-9a-f]+$'
chaos='/chaos-[0-9a-f]+$'
status=0
lane deploy "$deploy" "$@" &
deploy_pid=$!
lane chaos "$chaos" "$@" &
chaos_pid=$!
lane rest "!($deploy|$chaos)" "$@" || status=1
wait "$deploy_pid" || status=1
wait "$chaos_pid" || status=1
cat "$work/rest.log" "$work/chaos.log" "$work/deploy.log" 2>/dev/null >"$log"
cat "$log"
exit "$status"
