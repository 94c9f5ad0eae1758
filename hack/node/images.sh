#!/usr/bin/env bash
# The images a local node runs, as docker-archive files for
# `ctr images import` (hack/node/up.sh imports them), cached outside the
# repository:
#
#   bash hack/node/images.sh pause     # the sandbox image (hack/node/pause)
#   bash hack/node/images.sh project   # the Dockerfile's two images
#
# `project` builds the repository's real Dockerfile with buildah, as
# `docker build` would: the provider (default target) and `--target pve-sim`.
# Its `FROM rust:...` base is made here, not pulled: Debian from this
# machine's apt sources (mmdebstrap), this machine's Rust toolchain with the
# musl target (hack/node/install.sh) and its CA certificates (the RUN steps
# fetch Debian packages and crates through this machine's network). The
# build's cargo registry and target directory live in buildah cache mounts,
# so a rebuild after a change recompiles only what changed; when nothing in
# the build context or the Dockerfile changed, nothing is built at all.
# The last line on stdout names the archive(s), space-separated.
#
# Environment: NODE_CACHE (see env.bash); IMAGE_BUILD_LOG, a file for
# buildah's output (default: stderr).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=env.bash source-path=SCRIPTDIR
source "$here/env.bash"

images="$cache_root/images"
build_root="$cache_root/buildah"
mkdir -p "$images" "$build_root"
# crun refuses this kind of machine's hybrid cgroup layout: runc. The
# default ulimits exceed the hard limits of a process without
# CAP_SYS_RESOURCE.
cat >"$build_root/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$build_root/containers.conf"
# buildah's storage and its cache mounts (under TMPDIR) stay in the cache.
mkdir -p "$build_root/tmp"
export TMPDIR="$build_root/tmp"
buildah=(buildah --root "$build_root/storage" --runroot "$build_root/run" --storage-driver overlay)
out_log="${IMAGE_BUILD_LOG:-/dev/stderr}"

command -v buildah >/dev/null || die "buildah is missing: run hack/node/install.sh"

# archive IMAGE FILE NAME: IMAGE as a docker-archive FILE, tagged NAME.
archive() {
  rm -f "$2.tmp"
  "${buildah[@]}" push -q "$1" "docker-archive:$2.tmp:$3" >>"$out_log" 2>&1 \
    || die "saving $1 to $2 failed"
  mv "$2.tmp" "$2"
}

pause_image() {
  local bin key file
  bin="$(bash "$here/build.sh" | tail -1)"
  key="$(content_key "$bin/pause" "${BASH_SOURCE[0]}")"
  file="$images/pause-$key.tar"
  if [[ ! -f "$file" ]]; then
    lock images
    local c
    c="$("${buildah[@]}" from scratch)"
    "${buildah[@]}" copy --chmod 0755 "$c" "$bin/pause" /pause >/dev/null
    "${buildah[@]}" config --user 65535:65535 --entrypoint '["/pause"]' "$c"
    "${buildah[@]}" commit -q "$c" "$pause_ref" >/dev/null
    "${buildah[@]}" rm "$c" >/dev/null
    archive "$pause_ref" "$file" "$pause_ref"
    log "sandbox image: $file"
  fi
  echo "$file"
}

# The Dockerfile's base, named as its FROM line names it (short names
# resolve to local images under localhost/).
base_image() {
  local version base toolchain key
  version="$(sed -n 's/^ARG RUST_VERSION=//p' "$repo/Dockerfile")"
  [[ -n "$version" ]] || die "no ARG RUST_VERSION in the Dockerfile"
  base="rust:$version-slim-bookworm"
  toolchain="$(rustc --print sysroot)"
  local rustc_version
  rustc_version="$(rustc --version | awk '{print $2}')"
  [[ "$rustc_version" == "$version" || "$rustc_version" == "$version".* ]] \
    || die "the active Rust toolchain ($rustc_version) is not the Dockerfile's $version"
  [[ -d "$toolchain/lib/rustlib/$(uname -m)-unknown-linux-musl" ]] \
    || die "the musl target is missing from $toolchain: run hack/node/install.sh"
  # Keyed by the toolchain, the CA bundle and this recipe, not the whole script.
  key="$(printf '%s\n' "$(rustc -vV)" "$(declare -f base_image)" | cat - /etc/ssl/certs/ca-certificates.crt \
         | sha256sum | cut -c1-16)"
  if [[ "$("${buildah[@]}" inspect --type image --format '{{index .ImageAnnotations "build-key"}}' \
          "localhost/$base" 2>/dev/null)" == "$key" ]]; then
    echo "$base"
    return
  fi
  log "making the build base $base (Debian bookworm + the host's Rust toolchain; once)"
  local tar="$build_root/bookworm.tar" c mnt dest
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,gcc,libc6-dev \
    --format=tar bookworm "$tar" >>"$out_log" 2>&1 || die "mmdebstrap failed"
  c="$("${buildah[@]}" from scratch)"
  "${buildah[@]}" add "$c" "$tar" / >/dev/null
  rm -f "$tar"
  mnt="$("${buildah[@]}" mount "$c")"
  dest="$mnt/usr/local/rustup/toolchains/$(basename "$toolchain")"
  mkdir -p "$dest" "$mnt/usr/local/cargo/bin"
  cp -a "$toolchain"/{bin,lib,libexec} "$dest/"
  cp "$(command -v rustup)" "$mnt/usr/local/cargo/bin/rustup"
  for b in cargo rustc rustdoc; do ln "$mnt/usr/local/cargo/bin/rustup" "$mnt/usr/local/cargo/bin/$b"; done
  printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\n' "$(basename "$toolchain")" \
    >"$mnt/usr/local/rustup/settings.toml"
  # The host's CA bundle: its outbound HTTPS may go through a proxy that
  # only the host's bundle trusts.
  cp /etc/ssl/certs/ca-certificates.crt "$mnt/etc/ssl/certs/ca-certificates.crt"
  "${buildah[@]}" umount "$c" >/dev/null
  "${buildah[@]}" config --annotation "build-key=$key" \
    --env RUSTUP_HOME=/usr/local/rustup --env CARGO_HOME=/usr/local/cargo \
    --env PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  "${buildah[@]}" commit -q "$c" "localhost/$base" >/dev/null
  "${buildah[@]}" rm "$c" >/dev/null
  echo "$base"
}

project_images() {
  local files key provider sim
  # Unoptimised binaries (see the Dockerfile's CARGO_PROFILE):
  # IMAGE_PROFILE=release builds what users get.
  local profile="${IMAGE_PROFILE:-image-test}"
  # The build context as the Dockerfile sees it: every file .dockerignore
  # lets through (the COPY sources), plus the two files that steer the build.
  mapfile -t files < <(cd "$repo" && find Cargo.toml Cargo.lock src crates hack/testenv \
    -type f \( -path '*/target/*' -prune -o -print \) | LC_ALL=C sort)
  key="$(cd "$repo" && content_key Dockerfile .dockerignore "${files[@]}" \
           <(declare -f project_images archive; echo "$profile"))"
  provider="$images/provider-$key.tar"
  sim="$images/pve-sim-$key.tar"
  if [[ -f "$provider" && -f "$sim" ]]; then
    echo "$provider $sim"
    return
  fi
  lock images
  if [[ ! -f "$provider" || ! -f "$sim" ]]; then
    local base start
    base="$(base_image)"
    [[ -n "$base" ]] || die "no build base"
    # --network host: the RUN steps fetch Debian packages and crates.
    # --pull=never: the base is the local one, nothing comes from a registry.
    for target in pve-sim runtime; do
      start=$SECONDS
      log "buildah bud --target $target (the Dockerfile; cargo's caches persist between builds)"
      (cd "$repo" && "${buildah[@]}" bud --quiet --pull=never --network host --layers \
          --build-arg "CARGO_PROFILE=$profile" \
          --target "$target" -t "localhost/build-$target:latest" . >>"$out_log" 2>&1) \
        || die "building the Dockerfile's $target target failed (IMAGE_BUILD_LOG has buildah's output)"
      log "$target built in $((SECONDS - start)) s"
    done
    archive localhost/build-pve-sim:latest "$sim" pve-sim:latest
    archive localhost/build-runtime:latest "$provider" crossplane-provider-proxmox:latest
    # Older archives of these images are stale now.
    find "$images" -maxdepth 1 \( -name 'provider-*.tar' -o -name 'pve-sim-*.tar' \) \
      ! -name "*-$key.tar" -delete
  fi
  echo "$provider $sim"
}

case "${1:-}" in
  pause) pause_image ;;
  project) project_images ;;
  *) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
