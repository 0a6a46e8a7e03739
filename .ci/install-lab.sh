#!/bin/bash
# Install what the pod lab needs: its namespace tools, podman, the project's images of every
# Slurm series it runs (22.05, 24.11, 26.05) and their exported trees. Idempotent: a second run
# installs nothing new, reuses the images while Debian's packages stay the same (seconds), and
# exports only images whose id changed.
#   bash .ci/install-lab.sh            # cache: $SLURMK8S_LAB_ROOTFS_CACHE or /var/cache/slurmk8s/rootfs
#   bash .ci/install-lab.sh packages   # only the Debian packages and podman
#   bash .ci/install-lab.sh images     # only the images
#   bash .ci/install-lab.sh trees      # only the exported trees of the built images
set -euo pipefail
PHASE=${1:-all}
case "$PHASE" in all|packages|images|trees) ;; *) echo "install-lab.sh: unknown phase $PHASE (all, packages, images or trees)" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
CACHE=${SLURMK8S_LAB_ROOTFS_CACHE:-/var/cache/slurmk8s/rootfs}
# iproute2 util-linux: namespaces, bridges; openssl: the scale API's certificate; tar: image exports;
# debootstrap: the base of the images (slurmk8s images build)
PACKAGES="openssl python3 debootstrap iproute2 util-linux procps tar"

if [ "$(id -u)" != 0 ]; then echo "install-lab.sh: needs root" >&2; exit 2; fi
missing=$(dpkg-query -W -f '${Package} ${db:Status-Abbrev}\n' $PACKAGES 2>/dev/null | awk '$2 != "ii" {print $1}' || true)
installed=$(dpkg-query -W -f '${Package}\n' $PACKAGES 2>/dev/null | wc -l || true)
if [ "$PHASE" = all ] || [ "$PHASE" = packages ]; then
  if [ -n "$missing" ] || [ "$installed" -lt "$(echo $PACKAGES | wc -w)" ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES
  fi
  bash tools/install-podman.sh
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ "$PHASE" = all ] || [ "$PHASE" = images ]; then
  python3 -m slurmk8s.cli images build --slurm 22.05 --slurm 24.11 --slurm 26.05
fi
if [ "$PHASE" = all ] || [ "$PHASE" = trees ]; then
  python3 -m slurmk8s.lab.rootfs build 22.05 24.11 26.05 --cache "$CACHE"
  # exports of images no longer tagged (a rebuild replaced them), and the debootstrapped trees of earlier labs
  python3 -m slurmk8s.lab.rootfs prune --cache "$CACHE"
fi
