#!/usr/bin/env bash
# Install podman from Debian (12, as root) and make `podman run` work on these machines; idempotent.
# The drop-in keeps default ulimits within the hard limit (podman's nofile 1048576 is refused here)
# and picks runc (crun refuses this cgroup v1 host) and the netavark network backend: its DNS server
# (aardvark-dns) lets kind's node containers resolve each other; the CNI backend Debian falls back to
# without it gives them the host's resolver, and `kubeadm join` cannot find the control plane.
set -euo pipefail
PACKAGES="podman runc containernetworking-plugins netavark aardvark-dns fuse-overlayfs slirp4netns uidmap iptables catatonit"
DROPIN=/etc/containers/containers.conf.d/50-slurmk8s.conf

if [ "$(id -u)" != 0 ]; then echo "install-podman.sh: needs root" >&2; exit 2; fi
missing=$(dpkg-query -W -f '${Package} ${db:Status-Abbrev}\n' $PACKAGES 2>/dev/null | awk '$2 != "ii" {print $1}' || true)
installed=$(dpkg-query -W -f '${Package}\n' $PACKAGES 2>/dev/null | wc -l || true)
if [ -n "$missing" ] || [ "$installed" -lt "$(echo $PACKAGES | wc -w)" ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES
fi

want='# slurmk8s test machines: the hard nofile limit is 20000 and the host is cgroup v1 (crun refuses it)
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
[network]
network_backend = "netavark"'
if [ "$(cat "$DROPIN" 2>/dev/null)" != "$want" ]; then
  mkdir -p "$(dirname "$DROPIN")"
  printf '%s\n' "$want" > "$DROPIN.tmp" && mv "$DROPIN.tmp" "$DROPIN"
  echo "wrote $DROPIN"
fi
runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}')
[ "$runtime" = runc ] || { echo "install-podman.sh: podman uses $runtime, not runc: another containers.conf overrides $DROPIN" >&2; exit 1; }
backend=$(podman info --format '{{.Host.NetworkBackend}}')
[ "$backend" = netavark ] || { echo "install-podman.sh: podman uses the $backend network backend, not netavark (another containers.conf overrides $DROPIN?)" >&2; exit 1; }
echo "podman $(podman version --format '{{.Client.Version}}') with $runtime and $backend: ready"
