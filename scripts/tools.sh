#!/usr/bin/env bash
# Build the Go tools the chart's tests need (deploy/helm/samvad, tests/test_helm_chart.py) from their
# Go modules, pinned, into var/tools/bin; a second run finds them there and does nothing.
#   helm   `helm lint --strict` and `helm template` (the chart has no dependencies: nothing is fetched)
# Prints the folder of the binaries. Needs the Go that helm's go.mod names (1.26): `go` on PATH or
# /usr/local/go/bin/go (Debian's golang-go, 1.19, is too old).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
HELM_VERSION="v3.22.0"
bin="$root/var/tools/bin"
mkdir -p "$bin"

have() {  # $1 the binary, $2 the version its stamp must name (a go-installed binary prints none)
  [ -x "$bin/$1" ] && [ -f "$bin/.$1-version" ] && [ "$(cat "$bin/.$1-version")" = "$2" ]
}

if ! have helm "$HELM_VERSION"; then
  go="$(command -v go || true)"
  [ -n "$go" ] || go=/usr/local/go/bin/go
  [ -x "$go" ] || { echo "tools: Go 1.26 is needed to build helm" >&2; exit 1; }
  echo "tools: building helm $HELM_VERSION from its Go module (once; cached in var/tools)" >&2
  # Go's own module and build caches (shared by every clone on the machine: a fresh CI clone reuses them).
  GOBIN="$bin" GOFLAGS=-modcacherw "$go" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  echo "$HELM_VERSION" >"$bin/.helm-version"
fi
echo "$bin"
