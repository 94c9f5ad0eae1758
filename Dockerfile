# syntax=docker/dockerfile:1
# check=error=true

# Container images of crossplane-provider-proxmox, release builds:
#
#   docker build -t crossplane-provider-proxmox:latest .      # the provider (default target)
#   docker build --target pve-sim -t pve-sim:latest .          # the Proxmox VE API simulator alone
#
# The provider image holds the controller (`proxmox-provider`, the
# entrypoint) and the simulator (`pve-sim`); the `pve-sim` image holds only
# the simulator, which is what deploy/pve-sim/ runs and what anyone's CI can
# run (`docker run -p 127.0.0.1:8006:8006 pve-sim:latest`). The binaries are
# linked statically against musl, and both images are `scratch` plus the
# binaries (and, for the provider, the CA certificates of the build stage):
# no shell, no package manager, nothing to patch. They run as the numeric
# non-root user 65532 and write nothing to their filesystem, so they run
# with readOnlyRootFilesystem. Linted without a Docker engine by
# hack/tools/ensure.sh dockerfile-lint (BuildKit's own checks).

ARG RUST_VERSION=1.95
# The cargo profile of the binaries: release for every image anyone runs.
# The repository's own node test (hack/node/images.sh) builds `image-test`,
# an unoptimised profile, so that a source change costs seconds there
# rather than minutes of optimisation and LTO; the Dockerfile is the same.
ARG CARGO_PROFILE=release

FROM rust:${RUST_VERSION}-slim-bookworm AS toolchain
# musl-tools gives the C compiler that ring's assembly needs for the musl
# target; the target name follows the build machine (amd64 or arm64).
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add "$(uname -m)-unknown-linux-musl"
WORKDIR /src
# Only what the two binaries are built from (.dockerignore allows no more);
# cargo needs every workspace member's manifest even to build one of them.
COPY Cargo.toml Cargo.lock ./
COPY src/ src/
COPY crates/ crates/
COPY hack/testenv/ hack/testenv/
# The target directory below is a cache shared by every build of this
# machine, and COPY keeps the files' modification times: sources older than
# the cache's last build (another checkout's, built later) would look up to
# date to cargo, and the image would carry that other checkout's binaries.
# This layer is rebuilt only when the files above changed; it gives them
# the time of this build.
RUN find src crates hack/testenv -type f -exec touch {} +

# The simulator alone, for `--target pve-sim`: it depends on neither the
# provider nor Kubernetes crates, so this builds a fraction of the workspace.
FROM toolchain AS sim-build
ARG CARGO_PROFILE
RUN --mount=type=cache,id=cargo-registry,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,id=cargo-git,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,id=provider-target,target=/src/target,sharing=locked \
    target="$(uname -m)-unknown-linux-musl" \
    && dir="$(if [ "$CARGO_PROFILE" = dev ]; then echo debug; else echo "$CARGO_PROFILE"; fi)" \
    && cargo build --profile "$CARGO_PROFILE" --locked --target "$target" --package pve-sim --bin pve-sim \
    && install -D -m 0755 "target/$target/$dir/pve-sim" /out/pve-sim

FROM toolchain AS build
ARG CARGO_PROFILE
# The cargo registry and target directory live in BuildKit cache mounts, so
# rebuilds after a source change recompile only this crate. The binaries are
# copied out of the cache mount in the same step.
RUN --mount=type=cache,id=cargo-registry,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,id=cargo-git,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,id=provider-target,target=/src/target,sharing=locked \
    target="$(uname -m)-unknown-linux-musl" \
    && dir="$(if [ "$CARGO_PROFILE" = dev ]; then echo debug; else echo "$CARGO_PROFILE"; fi)" \
    && cargo build --profile "$CARGO_PROFILE" --locked --target "$target" --workspace --bin proxmox-provider --bin pve-sim \
    && install -D -m 0755 "target/$target/$dir/proxmox-provider" /out/proxmox-provider \
    && install -D -m 0755 "target/$target/$dir/pve-sim" /out/pve-sim

# The simulator's image: pve-sim serves HTTPS on 8006 like pveproxy (with a
# generated certificate unless --tls-cert/--tls-key name mounted files) and
# makes no outbound connections, so it needs no CA certificates. Arguments
# given to the container replace the default listen address.
FROM scratch AS pve-sim
LABEL org.opencontainers.image.title="pve-sim" \
      org.opencontainers.image.description="Proxmox VE API simulator for tests and CI" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=sim-build /out/pve-sim /usr/local/bin/pve-sim
USER 65532:65532
EXPOSE 8006
ENTRYPOINT ["/usr/local/bin/pve-sim"]
CMD ["--listen=0.0.0.0:8006"]

# The provider's image, the default target (the last stage).
# Static binaries need no libc; the CA certificates let
# `proxmox-provider` verify a Proxmox endpoint with a public certificate
# when no CA bundle or fingerprint pin is configured.
FROM scratch AS runtime
LABEL org.opencontainers.image.title="crossplane-provider-proxmox" \
      org.opencontainers.image.description="Crossplane-style Kubernetes provider for Proxmox VE virtual machines" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/proxmox-provider /out/pve-sim /usr/local/bin/
USER 65532:65532
# Metrics (/metrics) and probes (/healthz, /readyz) share one port.
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/proxmox-provider"]
CMD ["run"]
