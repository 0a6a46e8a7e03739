"""What every slurmd pod shares: configless start, and the hooks that tell slurmctld a pod comes and goes.

A slurmd pod holds no Slurm files: `slurmd --conf-server` fetches them from slurmctld
(SlurmctldParameters=enable_configless), which pushes them again on `scontrol reconfigure`.
So a change Slurm takes in place reaches every slurmd without restarting its pod.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import Obj
from slurmk8s.render.slurmfiles import SLURM_KEY_PATH

# How long a deleted slurmd pod may take: its preStop hook waits for the node's jobs for all
# but the last STOP_MARGIN_SECONDS of it, which slurmd keeps to stop.
GRACE_SECONDS = 120
STOP_MARGIN_SECONDS = 15
# The reason the preStop hook drains a node with; postStart resumes only nodes drained with it.
DRAIN_REASON = "slurmk8s: pod stopping"
# Where configless slurmd keeps what it fetched: the run directory link (22.05+), else the spool cache.
FETCHED_CONF = ("/run/slurm/conf/slurm.conf", "/var/spool/slurmd/conf-cache/slurm.conf")
SLURMCTLD_PORT = 6817


def conf_server(profile: Profile) -> str:
    """--conf-server: every slurmctld (primary first), host:port."""
    return ",".join(f"{addr}:{SLURMCTLD_PORT}" for _, addr in naming.controller_hosts(profile.name, profile.controller_replicas))


def slurmd_command(profile: Profile) -> list[str]:
    """slurmd in the foreground, configless. -b: a pod's start is the node's boot; without it
    slurmd reports the host's boot time and Slurm keeps a resumed CLOUD node powering up."""
    return ["slurmd", "-D", "-b", "--conf-server", conf_server(profile)]


def _find_node() -> list[str]:
    """Shell: $node is this pod's Slurm node ($NODE_NAME when set, else the node whose NodeHostName is
    the pod's hostname), with the configless copy of slurm.conf as the clients' config."""
    return [
        f"for c in {' '.join(FETCHED_CONF)}; do [ -f \"$c\" ] && export SLURM_CONF=\"$c\" && break; done",
        # auth/slurm looks for its key next to slurm.conf unless told (as configless slurmd itself is)
        f"[ ! -f {SLURM_KEY_PATH} ] || export SLURM_SACK_KEY={SLURM_KEY_PATH}",
        'node=${NODE_NAME:-}',
        '[ -n "$node" ] || node=$(sinfo -h -N -o "%N %n" 2>/dev/null | awk -v h="$(hostname)" \'$2 == h { print $1; exit }\')',
    ]


def prestop_script() -> str:
    """Drain the node, wait for its jobs (within the grace period), then mark it DOWN, so slurmctld
    neither starts jobs here nor waits out SlurmdTimeout for a pod that is gone.

    A node that is already drained, down or powering down (power saving scaled the pool) is left
    as it is: its reason belongs to whoever set it. Always exits 0: the pod stops either way.
    """
    wait = GRACE_SECONDS - STOP_MARGIN_SECONDS
    return "\n".join(_find_node() + [
        '[ -n "$node" ] || exit 0',
        'state=$(sinfo -h -n "$node" -o %T 2>/dev/null | head -n1)',
        # idle~ / idle% / idle#: powered down, powering down or up (power saving scales the pool).
        'case "$state" in ""|*drain*|*down*|*power*|*fail*|*"~"|*"%"|*"#") exit 0 ;; esac',
        f'scontrol update nodename="$node" state=drain reason="{DRAIN_REASON}" || exit 0',
        f"deadline=$(( $(date +%s) + {wait} ))",
        'while [ -n "$(squeue -h -w "$node" -o %i 2>/dev/null)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 2; done',
        f'scontrol update nodename="$node" state=down reason="{DRAIN_REASON}" || true',
        "exit 0",
    ]) + "\n"


def poststart_script() -> str:
    """Resume the node if a preStop hook of an earlier pod drained it (recognised by its reason).

    Waits (bounded) for slurmd to have fetched its config; a DOWN node comes back on its own at
    registration (ReturnToService=2), a drained one only when resumed. Always exits 0: a failing
    postStart hook would kill the container.
    """
    return "\n".join([
        "i=0",
        "while [ $i -lt 60 ]; do",
        "  i=$((i + 1))",
    ] + ["  " + line for line in _find_node()] + [
        # Registered (not down, not "*" not responding): resume it if our preStop drained it, then done.
        '  state=$([ -n "$node" ] && [ -n "${SLURM_CONF:-}" ] && sinfo -h -n "$node" -o %T 2>/dev/null | head -n1)',
        '  case "$state" in',
        '    ""|*"*"|down*) ;;',
        "    *)",
        '      reason=$(scontrol show node "$node" 2>/dev/null | sed -n \'s/^ *Reason=\\(.*\\) \\[.*$/\\1/p\')',
        f'      [ "$reason" != "{DRAIN_REASON}" ] || scontrol update nodename="$node" state=resume || true',
        "      exit 0 ;;",
        "  esac",
        "  sleep 2",
        "done",
        "exit 0",
    ]) + "\n"


def lifecycle() -> Obj:
    """The slurmd container's lifecycle hooks."""
    return {"postStart": {"exec": {"command": ["/bin/sh", "-c", poststart_script()]}},
            "preStop": {"exec": {"command": ["/bin/sh", "-c", prestop_script()]}}}
