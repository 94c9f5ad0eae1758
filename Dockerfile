# syntax=docker/dockerfile:1
# check=error=true

# Container image of crossplane-provider-proxmox: the controller
# (`proxmox-provider`, the entrypoint) and the Proxmox VE API simulator
# (`pve-sim`, for kind-based end-to-end tests), both release builds.
#
#   docker build -t crossplane-provider-proxmox:latest .
#
# Both binaries are linked statically against musl, and the final image is
# `scratch` plus the CA certificates of the build stage: no shell, no
# package manager, nothing to patch. It runs as the numeric non-root user
# 65532 and writes nothing to its filesystem, so it runs with
# readOnlyRootFilesystem. Linted without a Docker engine by
# hack/tools/ensure.sh dockerfile-lint (BuildKit's own checks).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-slim-bookworm AS build
# musl-tools gives the C compiler that ring's assembly needs for the musl
# target; the target name follows the build machine (amd64 or arm64).
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add "$(uname -m)-unknown-linux-musl"
WORKDIR /src
# Only what the two binaries are built from (.dockerignore allows no more).
COPY Cargo.toml Cargo.lock ./
COPY src/ src/
COPY crates/ crates/
COPY hack/testenv/ hack/testenv/
# The cargo registry and target directory live in BuildKit cache mounts, so
# rebuilds after a source change recompile only this crate. The binaries are
# copied out of the cache mount in the same step.
RUN --mount=type=cache,id=cargo-registry,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,id=cargo-git,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,id=provider-target,target=/src/target,sharing=locked \
    target="$(uname -m)-unknown-linux-musl" \
    && cargo build --release --locked --target "$target" --workspace --bin proxmox-provider --bin pve-sim \
    && install -D -m 0755 "target/$target/release/proxmox-provider" /out/proxmox-provider \
    && install -D -m 0755 "target/$target/release/pve-sim" /out/pve-sim

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
