#!/usr/bin/env bash
# Builds everything a kind cluster needs on a machine that reaches no container registry:
# the kind binary, the Kubernetes components (Go modules), their images with the names kubeadm
# expects, the CNI and storage images, and the node image. Versions: tools/kind/versions.env.
#
#   bash tools/kind/build.sh          # prints the node image reference as its last line
#   SLURMK8S_KIND_REBUILD=1 bash ...  # rebuild every image even when its key is unchanged
#
# Every piece is cached under a key made of its inputs (versions, go.sum, files), so a warm
# run only checks keys. Cache: $SLURMK8S_KIND_CACHE (default /var/cache/slurmk8s/kind) for
# binaries and root file systems, podman's image store for images.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$HERE/versions.env"
CACHE=${SLURMK8S_KIND_CACHE:-/var/cache/slurmk8s/kind}
BIN=$CACHE/bin
IMAGE_PREFIX=localhost/slurmk8s-kind
NODE_IMAGE_REPO=localhost/slurmk8s/kind-node
KEY_LABEL=io.slurmk8s.build-key
export CGO_ENABLED=0 GOFLAGS=-trimpath

log() { echo "[kind build $(date +%T)] $*" >&2; }
die() { echo "kind build: $*" >&2; exit 1; }
key_of() { sha256sum | cut -c1-16; }  # stdin -> short content key
files_key() { (cd "$HERE" && find "$@" -type f -print0 | sort -z | xargs -0 sha256sum) | key_of; }

[ "$(id -u)" = 0 ] || die "needs root (podman, debootstrap)"
for tool in go podman debootstrap; do command -v $tool >/dev/null || die "no $tool on PATH (tools/install-kind-deps.sh installs it)"; done
mkdir -p "$BIN"

# SLURMK8S_KIND_REBUILD=1 builds every image again (bench/kind.py --cold)
image_key() {
  [ "${SLURMK8S_KIND_REBUILD:-}" != 1 ] || return 0
  podman image inspect --format "{{ index .Labels \"$KEY_LABEL\" }}" "$1" 2>/dev/null || true
}

# go_build NAME MODULE_DIR VERSION LDFLAGS PACKAGE... : binaries into $BIN/NAME-VERSION-KEY/
go_build() {
  local name=$1 dir=$HERE/go/$2 version=$3 ldflags=$4; shift 4
  local key; key=$( { go version; cat "$dir/go.mod" "$dir/go.sum"; echo "$ldflags $*"; } | key_of)
  local out=$BIN/$name-$version-$key
  if [ ! -f "$out/.done" ]; then
    log "building $name $version (go build $*; cold builds take minutes)"
    rm -rf "$out.tmp" && mkdir -p "$out.tmp"
    local target=$out.tmp/  # one package: the binary is named NAME
    [ $# -gt 1 ] || target=$out.tmp/$name
    (cd "$dir" && go build -ldflags "$ldflags" -o "$target" "$@") || die "go build of $name failed"
    touch "$out.tmp/.done" && rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# debootstrap_image NAME PACKAGES : a Debian $NODE_SUITE root file system imported as an image
MIRROR=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -n1)
[ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[ -n "$MIRROR" ] || die "no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
debootstrap_image() {
  local name=$1 packages=$2
  local key; key=$(echo "$NODE_SUITE $packages" | key_of)
  local image=$IMAGE_PREFIX/$name-rootfs:$key
  if [ "${SLURMK8S_KIND_REBUILD:-}" = 1 ] || ! podman image exists "$image"; then
    local dir; dir=$(mktemp -d "$CACHE/.rootfs-$name.XXXXXX")
    log "debootstrap $NODE_SUITE for $name (about a minute)"
    debootstrap --variant=minbase --include="$packages" "$NODE_SUITE" "$dir" "$MIRROR" >"$dir.log" 2>&1 \
      || { tail -n 20 "$dir.log" >&2; die "debootstrap for $name failed (log: $dir.log)"; }
    # the image must not carry this machine's apt caches or a machine-id
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir/etc/machine-id"
    tar -C "$dir" -c . | podman import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
    rm -rf "$dir" "$dir.log"
  fi
  echo "$image"
}
NODE_PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,conntrack,ethtool,socat,util-linux,mount,kmod,ca-certificates,procps,bash,libseccomp2,ebtables,e2fsprogs,catatonit
UTILS_PACKAGES=python3,iproute2,iptables,conntrack,ca-certificates,procps
BASES=$(mktemp -d "$CACHE/.bases.XXXXXX")
( debootstrap_image node "$NODE_PACKAGES" > "$BASES/node" && debootstrap_image utils "$UTILS_PACKAGES" > "$BASES/utils" ) &
BASES_PID=$!
trap 'kill "$BASES_PID" 2>/dev/null || true' EXIT  # a failed go build stops the subshell (a debootstrap already started finishes)

MINOR=${KUBERNETES_VERSION#v1.}; MINOR=${MINOR%%.*}
K8S_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
K8S_BIN=$(go_build kubernetes kubernetes "$KUBERNETES_VERSION" "$K8S_LDFLAGS" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl)
ETCD_BIN=$(go_build etcd etcd "$ETCD_VERSION" "-s -w" go.etcd.io/etcd/server/v3)
COREDNS_BIN=$(go_build coredns coredns "$COREDNS_VERSION" "-s -w" github.com/coredns/coredns)
LOCAL_PATH_BIN=$(go_build local-path-provisioner local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSION" "-s -w" \
  github.com/rancher/local-path-provisioner)
CRICTL_BIN=$(go_build crictl cri-tools "$CRI_TOOLS_VERSION" "-s -w" sigs.k8s.io/cri-tools/cmd/crictl)
if [ ! -x "$BIN/kind-$KIND_VERSION/kind" ]; then
  log "installing kind $KIND_VERSION (go install, kind's documented way)"
  GOBIN="$BIN/kind-$KIND_VERSION" go install "sigs.k8s.io/kind@$KIND_VERSION" || die "go install kind failed"
fi

# the two Debian bases were debootstrapped while Go compiled (downloads beside the CPU-bound builds)
wait "$BASES_PID" || die "debootstrap of the node or utils base failed (see above)"
NODE_BASE=$(cat "$BASES/node"); UTILS_BASE=$(cat "$BASES/utils"); rm -rf "$BASES"

# build_image REF KEY CONTEXT_DIR : podman build of CONTEXT_DIR/Containerfile unless REF has KEY
build_image() {
  local ref=$1 key=$2 context=$3
  if [ "$(image_key "$ref")" != "$key" ]; then
    log "building image $ref"
    podman build -q --label "$KEY_LABEL=$key" -t "$ref" -f "$context/Containerfile" "$context" >/dev/null \
      || die "podman build of $ref failed"
  fi
}

WORK=$(mktemp -d "$CACHE/.work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# static_image REF BINARY_PATH... [-- ENTRYPOINT_JSON] : FROM scratch with binaries in /usr/local/bin
static_image() {
  local ref=$1 entrypoint=$2; shift 2
  local context=$WORK/$(echo "$ref" | tr '/:' '__')
  mkdir -p "$context/bin"
  cp "$@" "$context/bin/"
  {
    echo "FROM scratch"
    echo "COPY bin/ /usr/local/bin/"
    echo 'ENV PATH=/usr/local/bin:/usr/bin:/bin'
    [ -z "$entrypoint" ] || echo "ENTRYPOINT $entrypoint"
  } > "$context/Containerfile"
  build_image "$ref" "$( (cd "$context" && find . -type f | sort | xargs sha256sum) | key_of)" "$context"
}

K8S_IMAGES=()
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  static_image "registry.k8s.io/$component:$KUBERNETES_VERSION" "" "$K8S_BIN/$component"
  K8S_IMAGES+=("registry.k8s.io/$component:$KUBERNETES_VERSION")
done
static_image "registry.k8s.io/etcd:$ETCD_IMAGE_TAG" "" "$ETCD_BIN/etcd"
static_image "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" '["/usr/local/bin/coredns"]' "$COREDNS_BIN/coredns"
K8S_IMAGES+=("registry.k8s.io/etcd:$ETCD_IMAGE_TAG" "registry.k8s.io/coredns/coredns:$COREDNS_VERSION")

# images on the Debian utils base: kube-proxy (iptables, conntrack), the CNI, storage helper pods
utils_image() {
  local ref=$1 name=$2; shift 2
  local context=$WORK/$name
  mkdir -p "$context/bin"
  cp "$@" "$context/bin/"
  printf 'FROM %s\nCOPY bin/ /usr/local/bin/\n' "$UTILS_BASE" > "$context/Containerfile"
  build_image "$ref" "$( { echo "$UTILS_BASE"; cd "$context" && find . -type f | sort | xargs sha256sum; } | key_of)" "$context"
  echo "$ref"
}
K8S_IMAGES+=("$(utils_image "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" kube-proxy "$K8S_BIN/kube-proxy")")
CNI_TAG=$(key_of < "$HERE/cni/slurmk8s-cni.py")
K8S_IMAGES+=("$(utils_image "$IMAGE_PREFIX/cni:$CNI_TAG" cni "$HERE/cni/slurmk8s-cni.py")")
K8S_IMAGES+=("$(utils_image "$IMAGE_PREFIX/local-path-provisioner:$LOCAL_PATH_PROVISIONER_VERSION" local-path \
  "$LOCAL_PATH_BIN/local-path-provisioner")")

# the sandbox ("pause") image: Debian's catatonit in pause mode, copied out of the node rootfs
PAUSE_CONTEXT=$WORK/pause && mkdir -p "$PAUSE_CONTEXT/bin"
podman run --rm --entrypoint cat "$NODE_BASE" /usr/bin/catatonit > "$PAUSE_CONTEXT/bin/catatonit"
chmod 755 "$PAUSE_CONTEXT/bin/catatonit"
printf 'FROM scratch\nCOPY bin/catatonit /pause\nENTRYPOINT ["/pause", "-P"]\n' > "$PAUSE_CONTEXT/Containerfile"
build_image "registry.k8s.io/pause:$PAUSE_IMAGE_TAG" "$(key_of < "$PAUSE_CONTEXT/bin/catatonit")" "$PAUSE_CONTEXT"
K8S_IMAGES+=("registry.k8s.io/pause:$PAUSE_IMAGE_TAG")

# the node image: base + files + binaries, then the images imported into its containerd
NODE_CONTEXT=$WORK/node
mkdir -p "$NODE_CONTEXT/bin"
cp -a "$HERE/node/." "$NODE_CONTEXT/files/"
for b in kubelet kubeadm kubectl; do cp "$K8S_BIN/$b" "$NODE_CONTEXT/bin/"; done
cp "$CRICTL_BIN/crictl" "$NODE_CONTEXT/bin/"
sed -i "s/@PAUSE_IMAGE_TAG@/$PAUSE_IMAGE_TAG/" "$NODE_CONTEXT/files/etc/containerd/config.toml"
sed -i "s/@CNI_IMAGE_TAG@/$CNI_TAG/" "$NODE_CONTEXT/files/kind/manifests/default-cni.yaml"
sed -i "s|@UTILS_IMAGE@|$IMAGE_PREFIX/local-path-provisioner:$LOCAL_PATH_PROVISIONER_VERSION|g" \
  "$NODE_CONTEXT/files/kind/manifests/default-storage.yaml"
echo -n "$KUBERNETES_VERSION" > "$NODE_CONTEXT/files/kind/version"
cat > "$NODE_CONTEXT/Containerfile" <<EOF
FROM $NODE_BASE
COPY files/ /
COPY bin/kubelet bin/kubeadm bin/kubectl /usr/bin/
COPY bin/crictl /usr/local/bin/
RUN chmod 755 /usr/local/bin/entrypoint \\
 && mkdir -p /opt/cni && ln -sfn /usr/lib/cni /opt/cni/bin \\
 && mkdir -p /etc/kubernetes/manifests /etc/cni/net.d \\
 && rm -f /etc/systemd/system/*.wants/* /lib/systemd/system/multi-user.target.wants/* \\
 && systemctl enable containerd.service kubelet.service \\
 && systemctl mask systemd-binfmt.service systemd-modules-load.service getty.target console-getty.service \\
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf
ENV container=podman
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
EOF
IMAGES_KEY=$(for i in "${K8S_IMAGES[@]}"; do podman image inspect --format '{{.Id}}' "$i"; done | key_of)
NODE_KEY=$( { echo "$IMAGES_KEY"; cd "$NODE_CONTEXT" && find . -type f | sort | xargs sha256sum; } | key_of)
NODE_IMAGE=$NODE_IMAGE_REPO:$KUBERNETES_VERSION
if [ "$(image_key "$NODE_IMAGE")" != "$NODE_KEY" ]; then
  build_image "$NODE_IMAGE-files" "$NODE_KEY" "$NODE_CONTEXT"
  log "importing ${#K8S_IMAGES[@]} images into the node image's containerd"
  podman save -q --format docker-archive -m -o "$WORK/images.tar" "${K8S_IMAGES[@]}" >/dev/null
  builder=slurmk8s-kind-build-$$
  podman run -d --name "$builder" --privileged --entrypoint sleep -v "$WORK/images.tar:/images.tar:ro" \
    "$NODE_IMAGE-files" infinity >/dev/null
  trap 'podman rm -f "$builder" >/dev/null 2>&1; rm -rf "$WORK"' EXIT
  # content store only (no unpack): the node's /var is a volume at run time, where the
  # overlay snapshotter unpacks on first use
  podman exec "$builder" bash -c '
    set -e
    containerd >/tmp/containerd.log 2>&1 &
    for i in $(seq 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
    ctr -n k8s.io images import --no-unpack --all-platforms --digests /images.tar >/dev/null
    ctr -n k8s.io images ls -q | sort
    kill %1; wait || true
  ' >&2 || die "importing images into the node image failed"
  podman commit -q --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
    --change "LABEL $KEY_LABEL=$NODE_KEY" "$builder" "$NODE_IMAGE" >/dev/null
  podman rm -f -t 0 "$builder" >/dev/null
  podman rmi "$NODE_IMAGE-files" >/dev/null 2>&1 || true
fi
echo "$BIN/kind-$KIND_VERSION/kind" > "$CACHE/kind-binary"
# kind and a kubectl of the cluster's own version, for scripts and tests: PATH=$CACHE/bin/current:$PATH
mkdir -p "$BIN/current"
ln -sfn "$BIN/kind-$KIND_VERSION/kind" "$BIN/current/kind"
ln -sfn "$K8S_BIN/kubectl" "$BIN/current/kubectl"
echo "$NODE_IMAGE"
