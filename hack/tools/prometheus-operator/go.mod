// Pins the prometheus-operator module only for the ServiceMonitor CRD in its
// example/ directory: tests install the real CRD to apply the Helm chart's
// optional ServiceMonitor with --dry-run=server. Nothing is compiled.
module localbuild/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
