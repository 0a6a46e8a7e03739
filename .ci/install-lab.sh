#!/bin/bash
# Install what the pod lab needs and build its Slurm rootfs cache. Idempotent: a second run
# installs nothing new and reuses the cached rootfs (their marker files record the versions).
#   bash .ci/install-lab.sh            # cache: $SLURMK8S_LAB_ROOTFS_CACHE or /var/cache/slurmk8s/rootfs
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${SLURMK8S_LAB_ROOTFS_CACHE:-/var/cache/slurmk8s/rootfs}
PACKAGES="slurmctld slurmd slurm-client slurmdbd munge mariadb-server openssh-server openssl python3 debootstrap iproute2 util-linux procps"

if [ "$(id -u)" != 0 ]; then echo "install-lab.sh: needs root" >&2; exit 2; fi
missing=$(dpkg-query -W -f '${Package} ${db:Status-Abbrev}\n' $PACKAGES 2>/dev/null | awk '$2 != "ii" {print $1}' || true)
installed=$(dpkg-query -W -f '${Package}\n' $PACKAGES 2>/dev/null | wc -l || true)
if [ -n "$missing" ] || [ "$installed" -lt "$(echo $PACKAGES | wc -w)" ]; then
  apt-get update -q
  # policy-rc.d: the packages' services must not start (no systemd here; the lab starts daemons itself)
  policy=/usr/sbin/policy-rc.d; added_policy=
  if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' > $policy; chmod +x $policy; added_policy=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES
  [ -z "$added_policy" ] || rm -f $policy
fi
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 -m slurmk8s.lab.rootfs build 24.11 26.05 --cache "$CACHE"
