"""Apply the profile's accounts/users/QoS tree to slurmdbd with sacctmgr, idempotently.

One applier (slurmk8s/podside/sacctmgr.py) for `up`, `slurmk8s accounts apply`, the lab and
the GitOps Job: the caller passes `run(argv) -> (returncode, stdout, stderr)`.
"""

from __future__ import annotations


from typing import Callable

from slurmk8s.actions.interface import header
from slurmk8s.errors import ClusterError
from slurmk8s.profile.files import read_profile
from slurmk8s.profile.model import Profile
from slurmk8s.render import render
from slurmk8s.render.k8s.accounts import desired_tree, manages_accounts
from slurmk8s.podside.sacctmgr import AccountsError, Tree, apply_tree
from slurmk8s.podside.sacctmgr import busy_accounts as _busy_accounts
from slurmk8s.podside.sacctmgr import read_tree as _read_tree

RunFn = Callable[[list[str]], tuple[int, str, str]]


def read_tree(run: RunFn, cluster: str) -> Tree:
    """The live tree of one cluster, read with sacctmgr."""
    try:
        return _read_tree(run, cluster)
    except AccountsError as e:
        raise ClusterError(str(e)) from None


def busy_accounts(run: RunFn) -> frozenset[str]:
    """Accounts with pending or running jobs (never deleted)."""
    try:
        return _busy_accounts(run)
    except AccountsError as e:
        raise ClusterError(str(e)) from None


def apply_accounts(profile: Profile, run: RunFn, delete: bool = False,
                   log: Callable[[str], None] = lambda line: None) -> list[list[str]]:
    """Bring slurmdbd to the profile's tree; returns the commands run (empty when nothing differed)."""
    if not manages_accounts(profile):
        return []
    try:
        return apply_tree(desired_tree(profile), run, delete=delete, log=log)
    except AccountsError as e:
        raise ClusterError(str(e)) from None


def run_from_exec(exec_fn: Callable[[list[str]], str]) -> RunFn:
    """A RunFn over an exec that returns stdout and raises ClusterError on failure (a cluster's `slurm`)."""
    def run(argv: list[str]) -> tuple[int, str, str]:
        try:
            return 0, exec_fn(argv), ""
        except ClusterError as e:
            return 1, "", str(e)
    return run


def run_in_controller(cluster, bundle) -> RunFn:
    """A RunFn over the cluster's Slurm commands in slurmctld's pod."""
    return run_from_exec(lambda argv: cluster.slurm(bundle, argv))


def run_accounts_apply(profile_path: str, cluster, *, delete: bool = False,
                       echo: Callable[[str], None] = print, namespace: str | None = None) -> list[list[str]]:
    """`slurmk8s accounts apply`: the profile's tree into the running cluster's slurmdbd, through slurmctld's pod."""
    profile = read_profile(profile_path, namespace)
    if not manages_accounts(profile):
        reason = "accounting is disabled" if not profile.accounting.enabled else "it has no spec.scheduling accounts, users or QoS"
        echo(f"{profile_path}: nothing to apply: {reason}")
        return []
    bundle = render(profile)
    echo(header(bundle, cluster))
    done = apply_accounts(profile, run_in_controller(cluster, bundle), delete=delete, log=echo)
    echo(f"accounts: {len(done)} sacctmgr command(s) applied" if done
         else f"accounts: cluster {profile.name} already has the profile's tree")
    return done


__all__ = ["apply_accounts", "busy_accounts", "read_tree", "run_accounts_apply", "run_from_exec", "run_in_controller"]

