"""Which slurm.conf changes need a daemon restart, and which Slurm takes with `scontrol reconfigure`.

Each pod template hashes only the settings whose change needs a restart of its pod
(``slurmk8s.io/config-hash``); everything else in slurm.conf, cgroup.conf's companions and
topology reaches the running daemons in place. Source: slurm.conf(5), whose entries say
"requires a restart" of slurmctld, of slurmd, or of every daemon and client.
"""

from __future__ import annotations

import re

from slurmk8s import versions
from slurmk8s.profile.slurm import option_name

CONTROLLER, SLURMD, CLIENT = "slurmctld", "slurmd", "client"
ALL = frozenset({CONTROLLER, SLURMD, CLIENT})
BOTH = frozenset({CONTROLLER, SLURMD})

# slurm.conf key (lower case) -> the daemons a change restarts. CLIENT: every pod that reads
# slurm.conf (login, slurmrestd, slurmdbd): how to reach and authenticate to slurmctld.
RESTART_KEYS: dict[str, frozenset[str]] = {
    "authtype": ALL, "authalttypes": ALL, "authaltparameters": ALL, "authinfo": ALL, "credtype": ALL,
    "clustername": ALL, "slurmctldhost": ALL, "slurmctldport": ALL, "slurmdport": BOTH,
    "slurmuser": ALL, "slurmduser": frozenset({SLURMD}),
    "statesavelocation": frozenset({CONTROLLER}), "slurmctldpidfile": frozenset({CONTROLLER}),
    "slurmdspooldir": frozenset({SLURMD}), "slurmdpidfile": frozenset({SLURMD}),
    "proctracktype": BOTH, "taskplugin": frozenset({SLURMD}), "jobacctgathertype": BOTH,
    "selecttype": frozenset({CONTROLLER}), "selecttypeparameters": frozenset({CONTROLLER}),
    "grestypes": BOTH, "switchtype": BOTH, "topologyplugin": BOTH, "mpidefault": frozenset(),
    "schedulertype": frozenset({CONTROLLER}), "prioritytype": frozenset({CONTROLLER}),
    "preempttype": frozenset({CONTROLLER}),
    "accountingstoragetype": frozenset({CONTROLLER}), "accountingstoragehost": frozenset({CONTROLLER}),
    "accountingstorageport": frozenset({CONTROLLER}),
}
NODE_SET = "the set of nodes"
# SchedulerParameters and SlurmctldParameters (the profile adds options to both) are taken by `scontrol
# reconfigure`. Of their options, slurm.conf(5) of 22.05-23.02 says two need slurmctld restarted:
# SlurmctldParameters' enable_configless, which the generator always writes, and SchedulerParameters'
# no_backup_scheduling. From 23.11 reconfigure restarts slurmctld in place, which takes both.
RESTART_OPTIONS: dict[str, frozenset[str]] = {"schedulerparameters": frozenset({"no_backup_scheduling"})}


def settings(slurm_conf: str) -> list[tuple[str, str]]:
    """(key, value) of each top-level `Key=Value` line, in file order; NodeName/PartitionName lines as whole."""
    out = []
    for line in slurm_conf.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        out.append((key.strip(), value.strip()))
    return out


def node_names(slurm_conf: str) -> list[str]:
    """The NodeName= values (one hostlist expression per line), in file order."""
    return [value.split()[0] for key, value in settings(slurm_conf) if key.lower() == "nodename"]


def adds_nodes_in_place(version: str) -> bool:
    """From 23.11 `scontrol reconfigure` restarts slurmctld in place, which takes added or removed nodes;
    before, a changed node set needs slurmctld restarted."""
    return versions.Dialect(version).at_least("23.11")


def restart_settings(slurm_conf: str, daemon: str, version: str) -> list[str]:
    """The lines of slurm.conf whose change needs daemon restarted (its pod's hash input)."""
    lines = [f"{k}={v}" for k, v in settings(slurm_conf) if daemon in RESTART_KEYS.get(k.lower(), ())]
    if daemon == CONTROLLER and not adds_nodes_in_place(version):
        lines += [f"NodeName={n}" for n in node_names(slurm_conf)]
        lines += [f"{k}={o}" for k, v in settings(slurm_conf) if k.lower() in RESTART_OPTIONS
                  for o in v.split(",") if option_name(o) in RESTART_OPTIONS[k.lower()]]
    return lines


# Files slurmd reads, and Slurm re-reads on reconfigure: they are no start input of a pod.
LIVE_FILES = ("slurm.conf", "topology.conf", "topology.yaml")
# `NodeName=<pool>-[0-63]` / `<pool>-7`: the hostlist's index part, which a pool's maxReplicas sets.
_NODE_INDEX = re.compile(r"^(NodeName=\S+)-(?:\[[0-9,-]+\]|[0-9]+)(?=\s|$)")


def slurmd_start_files(files: dict[str, str]) -> dict[str, str]:
    """The files a slurmd pod reads only at start (its hash input): cgroup.conf, gres.conf, scripts.

    gres.conf goes in without its node indices: a pool's node count changes no running node's
    devices, and a new node reads the file when it starts, so raising maxReplicas restarts no pod.
    """
    out = {k: v for k, v in files.items() if k not in LIVE_FILES}
    if "gres.conf" in out:
        out["gres.conf"] = "\n".join(_NODE_INDEX.sub(r"\1", line) for line in out["gres.conf"].splitlines())
    return out


def restart_reasons(old_conf: str, new_conf: str, daemon: str, version: str) -> list[str]:
    """Why a change from old_conf to new_conf restarts daemon, as "AuthType changed" lines ([] when in place)."""
    def by_key(text: str) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for line in restart_settings(text, daemon, version):
            key = line.split("=", 1)[0]
            found.setdefault(key if key != "NodeName" else NODE_SET, []).append(line)
        return found
    old, new = by_key(old_conf), by_key(new_conf)
    return [f"{key} changed" for key in sorted(set(old) | set(new), key=str.lower) if old.get(key) != new.get(key)]


def in_place_changes(old_conf: str, new_conf: str) -> list[str]:
    """The slurm.conf keys (or NodeName/PartitionName entries) that differ: what `scontrol reconfigure` applies."""
    def entries(text: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in settings(text):
            name = f"{key}={value.split()[0]}" if key.lower() in ("nodename", "partitionname") else key
            out[name] = value
        return out
    old, new = entries(old_conf), entries(new_conf)
    return sorted((k for k in set(old) | set(new) if old.get(k) != new.get(k)), key=str.lower)
