"""`down`: remove the cluster's workloads; PVCs and Secrets stay unless --delete-data (confirmed)."""

from __future__ import annotations

import sys
from typing import Callable

from slurmk8s.actions.interface import header
from slurmk8s.actions.render import render_file
from slurmk8s.errors import UsageError
from slurmk8s.kube.teardown import DELETED, WOULD_DELETE


def confirm_data_deletion(cluster: str, namespace: str, yes: bool, ask: Callable[[str], bool] | None,
                          interactive: bool) -> None:
    """Refuse --delete-data unless --yes was given or the user confirms at a terminal."""
    if yes:
        return
    if not interactive or ask is None:
        raise UsageError("--delete-data deletes the Slurm state, the accounting database and the keys: "
                         "add --yes to confirm when not running at a terminal")
    if not ask(f"delete the PVCs and Secrets of cluster {cluster} in namespace {namespace}? "
               f"Job state, accounting data and keys are lost"):
        raise UsageError("not confirmed; nothing deleted")


def run_down(profile_path: str, cluster, *, delete_data: bool = False, yes: bool = False, wait: bool = True,
             timeout: float = 300, dry_run: bool = False, echo: Callable[[str], None] = print,
             ask: Callable[[str], bool] | None = None, interactive: bool | None = None, namespace: str | None = None):
    """Delete the profile's cluster from Kubernetes; returns the Plan of deletions."""
    bundle = render_file(profile_path, namespace)
    if delete_data and not dry_run:
        confirm_data_deletion(bundle.cluster, bundle.namespace, yes, ask,
                              sys.stdin.isatty() if interactive is None else interactive)
    echo(f"{'dry run: ' if dry_run else ''}{header(bundle, cluster)}")
    plan, kept = cluster.tear_down(bundle, delete_data=delete_data, wait_timeout=timeout if wait else None,
                                   dry_run=dry_run, progress=echo)
    deleted = plan.count(WOULD_DELETE if dry_run else DELETED)
    echo(f"{'dry run: would delete' if dry_run else 'deleted'} {deleted} object(s) of cluster {bundle.cluster}")
    if kept:
        hint = "" if delete_data else " (--delete-data removes the PVCs and Secrets)"
        echo(f"kept: {', '.join(kept)}{hint}")
    return plan
