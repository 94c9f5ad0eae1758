# Helpers shared by hack/control-plane/build.sh and hack/tools/ensure.sh.
# Sourced, not run. The caller sets `log_tag` (the prefix of its progress
# lines) and `cache_root` (where its locks live) first. Every script that
# sources this file counts it in its cache keys: what is built depends on it.
# shellcheck shell=bash

# Progress and errors go to stderr; stdout is for the path the caller prints.
log() { printf '[%s] %s\n' "${log_tag:?}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The version of a required module, from a go.mod `require` line (inside a
# block or not). Fails loudly rather than producing an empty cache key.
required_version() {
  local module="$1" gomod="$2" version
  version="$(awk -v m="$module" '
    $1 == "require" && $2 == m { print $3; exit }
    $1 == m && $2 ~ /^v/        { print $2; exit }' "$gomod")"
  [[ -n "$version" ]] || die "no version of $module in $gomod"
  printf '%s' "$version"
}

# content_key FILE...: a short hash of the files' contents, for cache keys.
content_key() {
  cat "$@" | sha256sum | cut -c1-16
}

# need_go WHAT: fails unless the Go toolchain is on PATH.
need_go() {
  command -v go >/dev/null || die "the Go toolchain (go) is not on PATH; it is needed once to $1"
}

# lock NAME: holds an exclusive lock on $cache_root/NAME.lock for the rest
# of the script, so concurrent callers wait for the first one instead of
# doing the same work twice.
lock() {
  mkdir -p "${cache_root:?}"
  exec 9>"$cache_root/$1.lock"
  if ! flock -n 9; then
    log "another process is preparing $1; waiting for it"
    flock 9
  fi
}
