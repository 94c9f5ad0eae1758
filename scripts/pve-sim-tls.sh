#!/usr/bin/env bash
# Prints a Kubernetes Secret `pve-sim-tls` holding a fresh CA (`ca.crt`) and
# a server certificate and key signed by it (`tls.crt`, `tls.key`) for the
# in-cluster simulator of deploy/pve-sim/:
#
#   scripts/pve-sim-tls.sh | kubectl apply -f -
#
# The server certificate names the Service (pve-sim, pve-sim.<ns>,
# pve-sim.<ns>.svc, pve-sim.<ns>.svc.cluster.local), so the provider verifies
# it against `ca.crt` host name included, as it would a Proxmox cluster's CA.
# Keys are ECDSA P-256; nothing is written outside a temporary directory.
#
# Options:
#   --namespace NS   namespace of the Secret and the Service (crossplane-system)
#   --service NAME   Service name (pve-sim)
#   --days N         validity of the server certificate (825)
set -euo pipefail

namespace=crossplane-system
service=pve-sim
days=825

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --namespace) namespace="${2:?--namespace needs a value}"; shift 2 ;;
    --service) service="${2:?--service needs a value}"; shift 2 ;;
    --days) days="${2:?--days needs a value}"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "pve-sim-tls.sh: unknown argument $1" >&2; usage ;;
  esac
done

command -v openssl >/dev/null || { echo "pve-sim-tls.sh: openssl is needed" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

host="$service.$namespace.svc"
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -days 3650 -subj "/O=pve-sim/CN=pve-sim test CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/O=pve-sim/CN=$host" -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
cat >"$work/server.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:$service,DNS:$service.$namespace,DNS:$host,DNS:$host.cluster.local
EOF
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
  -CAcreateserial -days "$days" -sha256 -extfile "$work/server.ext" \
  -out "$work/tls.crt" 2>/dev/null

b64() { base64 <"$1" | tr -d '\n'; }

cat <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: pve-sim-tls
  namespace: $namespace
  labels:
    app: pve-sim
type: kubernetes.io/tls
data:
  ca.crt: $(b64 "$work/ca.crt")
  tls.crt: $(b64 "$work/tls.crt")
  tls.key: $(b64 "$work/tls.key")
EOF
