"""Slurm's own view of a lab, read with its client commands and parsed here, for the lab tests to
assert on: a check of the product's smoke suite passes only when Slurm's records agree with it."""

from __future__ import annotations

EPOCH = ["env", "SLURM_TIME_FORMAT=%s"]  # times as epoch seconds, whatever the pods' time zone
JOB_FIELDS = ("JobID", "Partition", "NodeList", "State", "ExitCode", "AllocTRES", "Submit", "Start", "End")


def run(lab, *argv: str) -> str:
    """stdout of a Slurm client command in the lab's login (or controller) pod; fails the test otherwise."""
    done = lab.exec(list(argv), timeout=60)
    assert done.returncode == 0, f"{' '.join(argv)}: exit {done.returncode}: {done.stderr or done.stdout}"
    return done.stdout


def hostnames(lab, hostlist: str) -> list[str]:
    """Slurm's expansion of a host list (empty for Slurm's "None assigned")."""
    if not hostlist or hostlist.startswith("None"):
        return []
    return run(lab, "scontrol", "show", "hostnames", hostlist).split()


def node_states(lab) -> dict[str, str]:
    """Node -> state as sinfo abbreviates it (idle, idle~ powered down, idle% powering down, alloc ...)."""
    return dict(line.split() for line in run(lab, "sinfo", "-h", "-N", "-o", "%N %t").splitlines() if line.strip())


def node(lab, name: str) -> dict[str, str]:
    """`scontrol -o show node NAME` as key -> value (values without spaces)."""
    return dict(kv.split("=", 1) for kv in run(lab, "scontrol", "-o", "show", "node", name).split() if "=" in kv)


def partitions(lab) -> dict[str, list[str]]:
    """Partition -> its nodes, from `scontrol show partition`."""
    out = {}
    for line in run(lab, "scontrol", "-o", "show", "partition").splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        out[fields["PartitionName"]] = hostnames(lab, fields["Nodes"])
    return out


def jobs(lab, *ids: str) -> dict[str, dict[str, str]]:
    """Job id -> what slurmdbd recorded (sacct, allocations only), Submit/Start/End in epoch seconds.

    Without ids: the jobs that became eligible (a held job never does, so only asking for it by id shows it).
    """
    which = ["-j", ",".join(ids)] if ids else ["-S", "2020-01-01"]
    out = run(lab, *EPOCH, "sacct", "-X", "-n", "-P", "-a", *which, "-o", ",".join(JOB_FIELDS))
    rows = [dict(zip(JOB_FIELDS, line.split("|"), strict=True)) for line in out.splitlines() if line.strip()]
    return {r["JobID"]: r for r in rows}
