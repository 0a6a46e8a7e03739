#!/usr/bin/env bash
# A real Kubernetes cluster on this machine: kind on podman, with every image built here.
#
#   tools/kind-cluster.sh up [KIND_CONFIG]   # default kind-configs/dev.yaml; last line: the kubeconfig path
#   tools/kind-cluster.sh down               # removes the cluster, its kubeconfig and (when unused) the network
#   tools/kind-cluster.sh load IMAGE...      # loads more local images into the cluster's nodes
#
# Environment:
#   SLURMK8S_KIND_NAME     cluster name (default slurmk8s)
#   SLURMK8S_KIND_SLURM    Slurm series whose images are built and loaded (default "26.05"; several:
#                          "24.11 26.05"; empty: none)
#   SLURMK8S_KIND_STATE    where kubeconfigs live (default /var/lib/slurmk8s/kind)
#   SLURMK8S_KIND_NODE_IMAGE  a node image to use instead of building one (e.g. kind's published
#                          kindest/node:v1.34.x where Docker Hub is reachable; "kind" for kind's default)
#   SLURMK8S_KIND_ENGINE   podman (default) or docker
# Addresses stay inside 198.19.0.0/16 (the lab uses 198.18.0.0/16): podman network 198.19.0.0/24,
# services 198.19.16.0/20, pods 198.19.128.0/17.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
NAME=${SLURMK8S_KIND_NAME:-slurmk8s}
SLURM_SERIES=${SLURMK8S_KIND_SLURM-26.05}
STATE=${SLURMK8S_KIND_STATE:-/var/lib/slurmk8s/kind}/$NAME
NETWORK=slurmk8s-kind
NETWORK_SUBNET=198.19.0.0/24
SERVICE_SUBNET=198.19.16.0/20
POD_SUBNET=198.19.128.0/17
SLURM_REGISTRY=localhost/slurmk8s
ENGINE=${SLURMK8S_KIND_ENGINE:-podman}
case "$ENGINE" in
  podman) export KIND_EXPERIMENTAL_PROVIDER=podman KIND_EXPERIMENTAL_PODMAN_NETWORK=$NETWORK ;;
  docker) export KIND_EXPERIMENTAL_PROVIDER=docker KIND_EXPERIMENTAL_DOCKER_NETWORK=$NETWORK ;;
  *) echo "kind-cluster: SLURMK8S_KIND_ENGINE must be podman or docker, not '$ENGINE'" >&2; exit 2 ;;
esac

log() { echo "[kind-cluster $(date +%T)] $*" >&2; }
die() { echo "kind-cluster: $*" >&2; exit 1; }
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

kind_binary() {
  local cache=${SLURMK8S_KIND_CACHE:-/var/cache/slurmk8s/kind}
  [ -f "$cache/kind-binary" ] && cat "$cache/kind-binary" || command -v kind || die "no kind binary: run tools/kind/build.sh"
}

# The user's kind config with this machine's networking: the pod and service subnets inside
# 198.19.0.0/16 (refused when the config sets others), the API server on loopback only.
prepare_config() {
  python3 - "$1" "$2" "$POD_SUBNET" "$SERVICE_SUBNET" <<'PY'
import ipaddress, sys, yaml
source, target, pods, services = sys.argv[1:]
with open(source) as f:
    config = yaml.safe_load(f) or {}
net = config.setdefault("networking", {})
allowed = ipaddress.ip_network("198.18.0.0/15")
for key, value in (("podSubnet", pods), ("serviceSubnet", services)):
    given = net.get(key)
    if given and not ipaddress.ip_network(given).subnet_of(allowed):
        sys.exit(f"kind-cluster: {source}: networking.{key} {given} lies outside 198.18.0.0/15")
    net.setdefault(key, value)
net.setdefault("apiServerAddress", "127.0.0.1")
with open(target, "w") as f:
    yaml.safe_dump(config, f, sort_keys=False)
PY
}

ensure_network() {
  if ! "$ENGINE" network inspect "$NETWORK" >/dev/null 2>&1; then
    log "creating $ENGINE network $NETWORK ($NETWORK_SUBNET)"
    "$ENGINE" network create --subnet "$NETWORK_SUBNET" "$NETWORK" >/dev/null
  fi
  # podman 4 with CNI reports the subnet under plugins[].ipam; podman 5 and docker elsewhere
  local subnets
  subnets=$("$ENGINE" network inspect "$NETWORK" | python3 -c 'import json, sys, re; print(" ".join(sorted(set(re.findall(r"\"[Ss]ubnet\": \"([0-9.]+/[0-9]+)\"", json.dumps(json.load(sys.stdin)))))))')
  [ "$subnets" = "$NETWORK_SUBNET" ] || die "$ENGINE network $NETWORK has subnets '$subnets', expected only $NETWORK_SUBNET"
}

# podman 4's DNS server for a network (aardvark-dns) is started by the first container that
# joins it; when kind starts every node at once, it was seen to die, and kubeadm join then
# hangs on the control plane's name. One container that joins first and stays keeps it up.
DNS_ANCHOR=$NETWORK-dns-anchor
ensure_dns_anchor() {
  [ "$ENGINE" = podman ] || return 0
  [ "$(podman inspect --format '{{.State.Running}}' "$DNS_ANCHOR" 2>/dev/null)" = true ] && return 0
  podman rm -f -t 0 "$DNS_ANCHOR" >/dev/null 2>&1 || true
  podman run -d --name "$DNS_ANCHOR" --network "$NETWORK" --entrypoint sleep "$1" infinity >/dev/null
}

# The node containers must resolve each other (kubeadm join dials <cluster>-control-plane).
check_node_dns() {
  local nodes node
  nodes=$("$ENGINE" ps --filter "label=io.x-k8s.kind.cluster=$NAME" --format '{{.Names}}')
  for node in $nodes; do
    "$ENGINE" exec "$node" getent hosts "$NAME-control-plane" >/dev/null \
      || die "node $node cannot resolve $NAME-control-plane on $ENGINE network $NETWORK (is its DNS server running?)"
  done
}

# Slurm images of the requested series, built (or reused from cache) by slurmk8s itself.
slurm_images() {
  local series
  for series in $SLURM_SERIES; do
    (cd "$REPO" && python3 -m slurmk8s.cli images build --slurm "$series" --registry "$SLURM_REGISTRY" \
       --engine "$ENGINE" >&2) \
      || die "slurmk8s images build --slurm $series failed"
  done
  "$ENGINE" images --format '{{.Repository}}:{{.Tag}}' | grep "^$SLURM_REGISTRY/" | while read -r ref; do
    for series in $SLURM_SERIES; do case "${ref##*:}" in "$series"-*) echo "$ref" ;; esac; done
  done | sort -u
}

load_images() {
  [ $# -gt 0 ] || return 0
  local archive; archive=$(mktemp /var/tmp/slurmk8s-kind-images.XXXXXX.tar)
  log "loading $# images into $NAME"
  if [ "$ENGINE" = podman ]; then
    podman save -q --format docker-archive -m -o "$archive" "$@" >/dev/null
  else
    docker save -o "$archive" "$@"
  fi
  "$(kind_binary)" load image-archive --name "$NAME" "$archive" || { rm -f "$archive"; die "kind load failed"; }
  rm -f "$archive"
}

cmd_up() {
  local config=${1:-$REPO/kind-configs/dev.yaml}
  [ -f "$config" ] || die "no kind config $config"
  [ "$(id -u)" = 0 ] || [ "$ENGINE" = docker ] || die "needs root (rootful podman)"
  # kind mounts the host's /lib/modules into every node; some VM kernels ship none
  [ -d /lib/modules ] || { log "creating an empty /lib/modules (kind mounts it)"; mkdir -p /lib/modules; }
  local node_image=${SLURMK8S_KIND_NODE_IMAGE:-}
  [ -n "$node_image" ] || node_image=$(bash "$REPO/tools/kind/build.sh" | tail -n 1)
  local image_flag=(--image "$node_image")
  [ "$node_image" != kind ] || image_flag=()
  local kind; kind=$(kind_binary)
  mkdir -p "$STATE"
  prepare_config "$config" "$STATE/kind-config.yaml"
  ensure_network
  [ "$node_image" = kind ] || ensure_dns_anchor "$node_image"
  if "$kind" get clusters 2>/dev/null | grep -qx "$NAME"; then
    die "cluster $NAME exists already: tools/kind-cluster.sh down first (or set SLURMK8S_KIND_NAME)"
  fi
  log "creating cluster $NAME from $config with $node_image"
  "$kind" create cluster --name "$NAME" "${image_flag[@]}" --config "$STATE/kind-config.yaml" \
    --kubeconfig "$STATE/kubeconfig" --wait 5m >&2 || { check_node_dns; die "kind create cluster failed"; }
  local images; images=$(slurm_images) || die "building the Slurm images failed"
  # shellcheck disable=SC2086 # one image reference per word
  load_images $images
  echo "$STATE/kubeconfig"
}

cmd_down() {
  local kind; kind=$(kind_binary)
  if "$kind" get clusters 2>/dev/null | grep -qx "$NAME"; then
    "$kind" delete cluster --name "$NAME" --kubeconfig "$STATE/kubeconfig" >&2
  fi
  rm -rf "$STATE"
  # the network is shared by every cluster of this script: remove it (and its DNS anchor) once
  # no kind node uses it
  if "$ENGINE" network inspect "$NETWORK" >/dev/null 2>&1 \
     && [ -z "$("$ENGINE" ps -aq --filter "network=$NETWORK" --filter "label=io.x-k8s.kind.cluster")" ]; then
    "$ENGINE" rm -f -t 0 "$DNS_ANCHOR" >/dev/null 2>&1 || true
    "$ENGINE" network rm "$NETWORK" >/dev/null
  fi
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  load) shift; load_images "$@" ;;
  *) usage ;;
esac
