#!/usr/bin/env bash
# Regenerates go.mod/go.sum here for KUBERNETES_VERSION of ../../versions.env. Run it after a bump
# and commit the result.
#
# k8s.io/kubernetes requires every k8s.io/* staging module at v0.0.0 and satisfies that with
# replace directives pointing into its own tree, which Go ignores in a dependency. So this module
# maps each of them to the matching v0.MINOR.PATCH release; the list comes from upstream's own
# go.mod, so modules added in a new minor are never missed.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=../../versions.env
source ../../versions.env
K=$KUBERNETES_VERSION
S=v0.${K#v1.}
upstream=$(go mod download -json "k8s.io/kubernetes@$K" | python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')
rm -f go.mod go.sum
go mod init example.invalid/slurmk8s-kind-kubernetes >/dev/null 2>&1
for module in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$upstream"); do
  go mod edit -replace="$module=$module@$S"
done
# upstream's GODEBUG defaults apply to its binaries only when the main module repeats them
godebug=$(sed -n 's/^godebug[[:space:]]\+default=\(.*\)$/\1/p' "$upstream")
[ -z "$godebug" ] || go mod edit -godebug "default=$godebug"
go mod edit -require="k8s.io/kubernetes@$K"
for cmd in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl; do
  go mod edit -tool="k8s.io/kubernetes/cmd/$cmd"
done
go mod tidy
echo "go.mod: k8s.io/kubernetes $K with $(grep -c '=>' go.mod) staging modules at $S"
