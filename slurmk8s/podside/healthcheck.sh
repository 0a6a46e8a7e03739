# The checks and the drain/resume logic of slurmk8s's HealthCheckProgram (docs/health-checks.md),
# and the cordon check (docs/rollout.md). The rendered script for each pool sets the variables above
# this part and defines pool_checks. slurmd runs it as root every HealthCheckInterval with only
# SLURMD_NODENAME in its environment.
set -u
PATH=$PATH:/usr/sbin:/usr/bin:/sbin:/bin
PREFIX="slurmk8s-health:"
node=${SLURMD_NODENAME:-}
if [ -z "$node" ]; then
  echo "$PREFIX SLURMD_NODENAME is not set; not run by slurmd?" >&2
  exit 0
fi
failed=""

fail() {
  failed="${failed:+$failed; }$1"
}

check_gpus() {
  [ "$GPU_COUNT" -gt 0 ] || return 0
  tool=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    tool=nvidia-smi
    if ! listed=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null); then
      fail "nvidia-smi failed"
    else
      found=$(printf '%s\n' "$listed" | grep -c '[0-9]')
      [ "$found" -ge "$GPU_COUNT" ] || fail "nvidia-smi sees $found of $GPU_COUNT GPUs"
    fi
  fi
  if command -v dcgmi >/dev/null 2>&1; then
    tool=dcgmi
    dcgmi diag -r 1 >/dev/null 2>&1 || fail "dcgmi diag -r 1 failed"
  fi
  if [ -z "$tool" ]; then
    # No tool in the image: the device files the device plugin hands the pod must be there.
    found=$(ls /dev 2>/dev/null | grep -c '^nvidia[0-9][0-9]*$')
    [ "$found" -ge "$GPU_COUNT" ] || fail "$found of $GPU_COUNT /dev/nvidiaN devices"
  fi
}

check_mounts() {
  for m in $MOUNTS; do
    awk -v m="$m" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts || fail "$m not mounted"
  done
}

check_disk() {
  for p in $DISK_PATHS; do
    [ -d "$p" ] || { fail "$p missing"; continue; }
    free=$(df -Pk "$p" 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [ -z "$free" ]; then
      fail "df $p failed"
    elif [ "$free" -lt "$MIN_FREE_KIB" ]; then
      fail "$p has $((free / 1024)) MiB free, needs $((MIN_FREE_KIB / 1024))"
    fi
  done
}

run_check() {  # NAME FUNCTION: a pool's own check, in a subshell so it cannot change ours
  if ! ( "$2" ) >/dev/null 2>&1; then
    fail "check $1 failed"
  fi
}

# Prints yes or no: is this pod's Kubernetes node cordoned (spec.unschedulable)? Nothing when it cannot
# tell. slurmd's own environment holds the node's name (downward API) and the API's address. The API
# client is the pods' one (kubeapi.py, in KUBE_DIR beside the token and the CA): it verifies the API
# server's certificate for kubernetes.default.svc.
kube_cordoned() {
  pid=$(pgrep -o -x slurmd 2>/dev/null) || pid=1
  python3 - "/proc/$pid/environ" "$KUBE_DIR" "$KUBE_NODE_ENV" <<'EOF'
import sys, urllib.parse
environ, kube, node_env = sys.argv[1:4]
sys.path.insert(0, kube)
try:
    import kubeapi
    with open(environ, "rb") as fh:
        env = dict(kv.split("=", 1) for kv in fh.read().decode("utf-8", "replace").split("\0") if "=" in kv)
    node = env.get(node_env)
    if not node:
        sys.exit(f"slurmk8s-health: cordon check: {node_env} is not in slurmd's environment")
    api = kubeapi.Api(sa_dir=kube, host=env.get("KUBERNETES_SERVICE_HOST"), port=env.get("KUBERNETES_SERVICE_PORT"),
                      timeout=10, attempts=1, say=lambda line: None)
    found = api.get(f"/api/v1/nodes/{urllib.parse.quote(node)}")
    if found is None:
        sys.exit(f"slurmk8s-health: cordon check: node {node} not found")
    spec = found.get("spec") or {}
except (ImportError, OSError, ValueError) as e:
    sys.exit(f"slurmk8s-health: cordon check: {e}")
print("yes" if spec.get("unschedulable") else "no")
EOF
}

if [ "$CHECKS_ON" = 1 ]; then
  check_gpus
  check_mounts
  check_disk
  pool_checks
fi
cordoned=""
[ "$CORDON_ON" != 1 ] || cordoned=$(kube_cordoned)

# Slurm's view of this node, in the one format of podside/nodestate.py: its state (long form, lowercased,
# with sinfo's flag suffixes) and the reason it was drained with.
line=$(sinfo --noheader --Node --nodes="$node" --format='%N|%T|%E' 2>/dev/null | head -n 1)
state=$(printf '%s\n' "$line" | cut -d '|' -f 2 | tr '[:upper:]' '[:lower:]')
reason=$(printf '%s\n' "$line" | cut -d '|' -f 3-)
# Whose drain is it: a failing check's (ours), a cordon's, or someone else's (left alone).
ours=no
case "$reason" in "$PREFIX"*) ours=yes ;; esac
cordon_drain=no
[ "$reason" != "$CORDON_REASON" ] || cordon_drain=yes
drained=no
case "$state" in drain*) drained=yes ;; esac  # drained, draining
others=no
[ "$drained" = no ] || [ "$ours" = yes ] || [ "$cordon_drain" = yes ] || others=yes

drain() {  # REASON: drain the node with it, or bring a drain of ours up to date
  [ "$others" = no ] || exit 0
  if [ "$reason" != "$1" ]; then
    scontrol update nodename="$node" state=drain reason="$1" || echo "$PREFIX could not drain $node" >&2
  fi
}

if [ -n "$failed" ]; then
  want="$PREFIX $failed"
  want=$(printf '%s' "$want" | cut -c 1-200)
  drain "$want"
  echo "$want" >&2
elif [ "$cordoned" = yes ]; then
  drain "$CORDON_REASON"
elif [ "$cordon_drain" = yes ] && [ "$cordoned" != no ]; then
  :  # the Kubernetes node cannot be read now: the cordon's drain stays until it is known to be lifted
elif [ "$drained" = yes ] && { [ "$ours" = yes ] || [ "$cordon_drain" = yes ]; }; then
  scontrol update nodename="$node" state=resume || echo "$PREFIX could not resume $node" >&2
fi
exit 0
