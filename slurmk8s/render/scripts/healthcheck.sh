# The checks and the drain/resume logic of slurmk8s's HealthCheckProgram (docs/health-checks.md).
# The rendered script for each pool sets the variables above this part and defines pool_checks.
# slurmd runs it as root every HealthCheckInterval with SLURMD_NODENAME set.
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

check_gpus
check_mounts
check_disk
pool_checks

# Slurm's view of this node: its state, and the reason it was drained with.
state=$(sinfo -h -N -n "$node" -o '%t' 2>/dev/null | head -n 1)
reason=$(sinfo -h -N -n "$node" -o '%E' 2>/dev/null | head -n 1)
ours=no
case "$reason" in "$PREFIX"*) ours=yes ;; esac
if [ -n "$failed" ]; then
  want="$PREFIX $failed"
  want=$(printf '%s' "$want" | cut -c 1-200)
  # An admin's drain stays the admin's; ours is kept up to date with what fails now.
  case "$state" in
    drain*|drng*) [ "$ours" = yes ] || exit 0 ;;
  esac
  if [ "$reason" != "$want" ]; then
    scontrol update nodename="$node" state=drain reason="$want" || echo "$PREFIX could not drain $node" >&2
  fi
  echo "$want" >&2
elif [ "$ours" = yes ]; then
  case "$state" in
    drain*|drng*) scontrol update nodename="$node" state=resume || echo "$PREFIX could not resume $node" >&2 ;;
  esac
fi
exit 0
