"""`slurmk8s rollout` (and the rollout `up` runs): replace stale slurmd pods drain-first, and keep Slurm
upgrades in Slurm's order (slurmdbd, then slurmctld, then slurmd) and within its window.

The driver is podside/rollout_core.py, the one the GitOps hook Job runs too; here its effects go through the
API and an exec in slurmctld.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Callable

from slurmk8s import naming
from slurmk8s.actions.interface import header
from slurmk8s.errors import ClusterError, FieldError, ProfileError, UsageError
from slurmk8s.profile.files import read_profile
from slurmk8s.progress import Progress
from slurmk8s.render import render
from slurmk8s.podside.rollout_core import Effects, RolloutStopped, Settings, pods_waiting, run_rollout
from slurmk8s.versions import upgrade_refusal

# Workloads held back in the first pass of a Slurm upgrade: they follow once slurmdbd runs the new release.
AFTER_SLURMDBD = (naming.CONTROLLER, naming.WORKER, naming.LOGIN, naming.RESTAPI)


def rollout_settings(profile, ready_timeout: float, interval: float = 5):
    return Settings(max_unavailable=profile.rollout.max_unavailable, drain_timeout=profile.rollout.drain_timeout,
                    ready_timeout=ready_timeout, interval=interval)


def roll_pools(cluster, bundle, profile, *, pool: str | None = None, ready_timeout: float = 600,
               interval: float = 5, say: Callable[[str], None] = print,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
    """Replace every stale slurmd pod (of one pool, or all), drain first; ClusterError when it stops."""
    effects = Effects(statefulsets=lambda: cluster.pool_workloads(bundle),
                      pods=lambda: cluster.worker_pods(bundle),
                      delete_pod=lambda name: cluster.delete_pod(bundle, name),
                      slurm=lambda argv: cluster.slurm(bundle, argv), clock=clock, sleep=sleep, say=say)
    try:
        return run_rollout(effects, rollout_settings(profile, ready_timeout, interval), pool)
    except RolloutStopped as e:
        raise ClusterError(str(e)) from e


def waiting_pods(cluster, bundle) -> int:
    """How many slurmd pods wait for a rollout."""
    return pods_waiting(cluster.pool_workloads(bundle), cluster.worker_pods(bundle))


def check_upgrade(cluster, bundle, profile) -> dict[str, str]:
    """The live Slurm release per component; ProfileError (exit 2, one line) when the profile's release
    is a step Slurm does not support from any of them."""
    live = cluster.slurm_versions(bundle)
    problem = upgrade_refusal(live.values(), profile.version)
    if problem:
        raise ProfileError(profile.source, [FieldError(0, 0, "spec.slurm.version", problem)])
    return live


def upgrade_slurmdbd_first(cluster, bundle, live: dict[str, str], apply: Callable, *, timeout: float,
                           progress: Callable[[str], None]) -> bool:
    """When the release changes and slurmdbd runs, apply everything but slurmctld, slurmd and the clients
    first and wait for slurmdbd on the new release (Slurm's order). True when it did."""
    if not any(v != bundle.version for v in live.values()) or naming.ACCOUNTING not in live:
        return False
    held = [o for o in bundle.objects if o["kind"] in ("StatefulSet", "Deployment", "DaemonSet", "ScaledObject")
            and o["metadata"]["labels"].get(naming.LABEL_COMPONENT) in AFTER_SLURMDBD]
    first = dataclasses.replace(bundle, objects=tuple(o for o in bundle.objects if o not in held))
    progress(f"slurm upgrade {live.get(naming.ACCOUNTING)} -> {bundle.version}: slurmdbd first")
    apply(first)
    cluster.wait_until_usable(first, timeout=timeout, progress=progress, ask_slurm=False)
    return True


def waiting_reporter(progress: Progress, sleep: Callable[[float], None] = time.sleep
                     ) -> tuple[Callable[[str], None], Callable[[float], None]]:
    """(say, sleep) for the rollout driver: each line it says stays, and while it sleeps between polls the
    last line is what it waits for (a live line on a terminal, a timestamped line now and then in a log)."""
    last = [""]

    def say(line: str) -> None:
        progress.done(line)
        last[0] = line

    def wait(seconds: float) -> None:
        progress.update(last[0] or "rollout: waiting")
        sleep(seconds)
    return say, wait


def run_rollout_command(profile_path: str, cluster, *, pool: str | None = None, timeout: float = 600,
                        echo: Callable[[str], None] = print, progress: Callable[[str], None] | None = None,
                        interval: float = 5, namespace: str | None = None):
    """`slurmk8s rollout PROFILE [--pool P]`."""
    profile = read_profile(profile_path, namespace)
    if pool is not None and pool not in {p.name for p in profile.pools}:
        raise UsageError(f"--pool {pool}: the profile has no such pool (pools: {', '.join(p.name for p in profile.pools)})")
    bundle = render(profile)
    echo(header(bundle, cluster))
    sleep: Callable[[float], None]
    if progress is not None:
        say, sleep = progress, time.sleep
    else:
        say, sleep = waiting_reporter(Progress(sys.stderr))
    outcome = roll_pools(cluster, bundle, profile, pool=pool, ready_timeout=timeout, interval=interval, say=say,
                         sleep=sleep)
    if not outcome.replaced:
        echo("rollout: every slurmd pod is on its StatefulSet's current revision")
    return outcome
