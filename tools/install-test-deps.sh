#!/usr/bin/env bash
# Everything the tests need beyond pip (run as root on Debian 12; idempotent):
# jq and unzip; the pod lab's tools, podman and the project's Slurm images for 22.05, 24.11 and
# 26.05 (built once, then reused in seconds while Debian's packages stay the same) with their
# trees exported for the lab (.ci/install-lab.sh); helm (from npm), checkov (own virtualenv).
# Then kind on podman with a node image built here (tools/kind/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=""
for p in jq unzip; do dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing="$missing $p"; done
if [ -n "$missing" ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi
bash .ci/install-lab.sh
bash tools/install-helm.sh
bash tools/install-checkov.sh
# kind on podman for the e2e suite: Kubernetes, etcd, CoreDNS, the storage provisioner and kind
# from Go modules, the node image from Debian (cold: about 10 minutes; warm: seconds).
command -v go >/dev/null || { echo "install-test-deps.sh: the e2e suite builds Kubernetes from Go modules: install Go 1.26" >&2; exit 1; }
bash tools/kind/build.sh >/dev/null
