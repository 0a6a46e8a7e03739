#!/usr/bin/env bash
# Everything the tests need beyond pip (run as root on Debian 12; idempotent):
# jq and unzip; the pod lab's tools, podman and the project's Slurm images for 22.05, 24.11 and
# 26.05 (built once, then reused in seconds while Debian's packages stay the same) with their
# trees exported for the lab (.ci/install-lab.sh); helm (from npm), checkov (own virtualenv);
# kind on podman with a node image built here (tools/kind/build.sh: Kubernetes, etcd, CoreDNS,
# the storage provisioner and kind from Go modules, the node image from Debian).
#
# After the packages, the long steps run side by side: the Slurm images (downloads and dpkg),
# the kind build (downloads, then compiles on every core), helm and checkov (downloads). Each
# writes its own log, $SLURMK8S_INSTALL_LOGS/<step>.log (default /var/cache/slurmk8s/install-logs),
# printed whole once it ends; a table of every step's wall time closes the run, failed or not.
set -euo pipefail
cd "$(dirname "$0")/.."
LOGS=${SLURMK8S_INSTALL_LOGS:-/var/cache/slurmk8s/install-logs}
command -v go >/dev/null || { echo "install-test-deps.sh: the e2e suite builds Kubernetes from Go modules: install Go 1.26" >&2; exit 1; }
mkdir -p "$LOGS"
TIMES=$(mktemp)
STARTED=$(date +%s.%N)

seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# timed ORDER NAME CMD... : run CMD and record its wall time (steps side by side record into the same file)
timed() {
  local order=$1 name=$2 t0 rc=0; shift 2; t0=$(date +%s.%N)
  "$@" || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$order" "$name" "$(seconds_since "$t0")" "$rc" >> "$TIMES"
  return "$rc"
}
table() {
  echo
  echo "install-test-deps.sh: wall time per step (| ran side by side; logs in $LOGS)"
  sort -n "$TIMES" | awk -F'\t' '{ printf "  %-68s %7s s  %s\n", $2, $3, ($4 == 0 ? "ok" : "FAILED (exit " $4 ")") }'
  printf '  %-68s %7s s\n' "total" "$(seconds_since "$STARTED")"
  rm -f "$TIMES"
}
trap table EXIT

apt_tools() {
  local missing="" p
  for p in jq unzip; do dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
  fi
}
timed 1 "apt: jq, unzip" apt_tools
timed 2 "lab packages and podman (.ci/install-lab.sh packages)" bash .ci/install-lab.sh packages

slurm_images() {
  timed 3 "| Slurm images, 3 series x 6 (.ci/install-lab.sh images)" bash .ci/install-lab.sh images &&
    timed 4 "| their lab trees (.ci/install-lab.sh trees)" bash .ci/install-lab.sh trees
}
kind_build() { bash tools/kind/build.sh >/dev/null; }  # stdout: the node image's name
declare -A PID
side_by_side() {
  local key
  for key in "$@"; do
    case $key in
      images) slurm_images ;;
      kind) timed 5 "| kind: Kubernetes from Go modules, node image (tools/kind/build.sh)" kind_build ;;
      helm) timed 6 "| helm (tools/install-helm.sh)" bash tools/install-helm.sh ;;
      checkov) timed 7 "| checkov (tools/install-checkov.sh)" bash tools/install-checkov.sh ;;
    esac >"$LOGS/$key.log" 2>&1 &
    PID[$key]=$!
  done
  echo "side by side: $* (logs in $LOGS, each printed when it ends)"
  local failed=""
  for key in "$@"; do
    wait "${PID[$key]}" || failed="$failed $key"
    echo "--- $key ($LOGS/$key.log)"
    cat "$LOGS/$key.log"
  done
  [ -z "$failed" ] || { echo "install-test-deps.sh: failed:$failed (see the logs above)" >&2; return 1; }
}
timed 8 "side by side, wall" side_by_side images kind helm checkov
