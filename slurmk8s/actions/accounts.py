"""Apply the profile's accounts/users/QoS tree to slurmdbd with sacctmgr, idempotently.

One code path for `up` (commands exec'd in the controller pod) and the lab (Lab.exec):
the caller passes `run(argv) -> (returncode, stdout, stderr)`.
"""

from __future__ import annotations

import shlex
from typing import Callable

from slurmk8s.errors import ClusterError
from slurmk8s.profile.model import Profile
from slurmk8s.render.accounts import Tree, desired_tree, parse_tree, plan_accounts, read_commands

RunFn = Callable[[list[str]], tuple[int, str, str]]
# Moving an account changes what its associations inherit, so a second round may find more to do.
MAX_ROUNDS = 3


def _check(run: RunFn, argv: list[str]) -> str:
    code, out, err = run(argv)
    if code != 0:
        raise ClusterError(f"`{shlex.join(argv)}` exited {code}: {' '.join((err or out).split())[:300]}")
    return out


def read_tree(run: RunFn, cluster: str) -> Tree:
    """The live tree of one cluster, read with sacctmgr."""
    outputs = {what: _check(run, argv) for what, argv in read_commands(cluster).items()}
    return parse_tree(cluster, outputs["assoc"], outputs["user"], outputs["qos"])


def busy_accounts(run: RunFn) -> frozenset[str]:
    """Accounts with pending or running jobs (never deleted)."""
    return frozenset(a.strip() for a in _check(run, ["squeue", "-h", "-o", "%a"]).split() if a.strip())


def apply_accounts(profile: Profile, run: RunFn, delete: bool = False,
                   log: Callable[[str], None] = lambda line: None) -> list[list[str]]:
    """Bring slurmdbd to the profile's tree; returns the commands run (empty when nothing differed)."""
    if not profile.scheduling.manages_tree or not profile.accounting.enabled:
        return []
    desired = desired_tree(profile)
    done: list[list[str]] = []
    for _ in range(MAX_ROUNDS):
        busy = busy_accounts(run) if delete else frozenset()
        plan = plan_accounts(desired, read_tree(run, profile.name), delete=delete, busy_accounts=busy)
        if not plan:
            return done
        for argv in plan:
            log(f"  {shlex.join(argv)}")
            _check(run, argv)
        done += plan
    raise ClusterError(f"accounts of {profile.name}: still differing after {MAX_ROUNDS} rounds of sacctmgr")


def run_from_exec(exec_fn: Callable[[list[str]], str]) -> RunFn:
    """A RunFn over an exec that returns stdout and raises ClusterError on failure (kube.execpod)."""
    def run(argv: list[str]) -> tuple[int, str, str]:
        try:
            return 0, exec_fn(argv), ""
        except ClusterError as e:
            return 1, "", str(e)
    return run
