// Pins Flux's kustomize-controller module only for the Kustomization CRD in
// its config/crd/bases/: tests install the real CRD to apply
// deploy/flux/ with --dry-run=server. Nothing is compiled. (v1.10 needs a
// newer Go than the project's toolchain to be downloaded.)
module localbuild/fluxcd

go 1.26.0

require github.com/fluxcd/kustomize-controller v1.9.6
