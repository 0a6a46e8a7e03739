"""`lab up|exec|down|verify`: a rendered profile booted with real Slurm daemons on this machine."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from slurmk8s.actions.render import render_file
from slurmk8s.lab import cluster, sandbox
from slurmk8s.lab.verify import Check, run_checks


def lab_up(profile: str, rootfs_cache: str | None, log: Callable[[str], None] = print) -> cluster.Lab:
    """Render the profile and boot the bundle; the daemons keep running after we return."""
    bundle = render_file(profile)
    started = time.monotonic()
    lab = cluster.boot(bundle, Path(rootfs_cache) if rootfs_cache else None, log=log)
    log(f"lab {lab.lab_id} up in {time.monotonic() - started:.1f} s: {len(lab.pods)} pods")
    log(f"run Slurm commands with: slurmk8s lab exec {profile} -- sinfo")
    return lab


def lab_exec(profile: str, argv: list[str], pod: str | None = None):
    """Run a command in the running lab of this profile (default pod: login, else controller)."""
    bundle = render_file(profile)
    return cluster.exec_in_lab(cluster.lab_id_of(bundle), argv, pod, timeout=3600)


def lab_down(profile: str) -> list[str]:
    """Tear the profile's lab down; what could not be removed (empty when clean)."""
    return cluster.down(cluster.lab_id_of(render_file(profile)))


def lab_verify(profile: str, rootfs_cache: str | None, log: Callable[[str], None] = print) -> list[Check]:
    """Boot, run the smoke suite, tear down; the checks (teardown included) in order."""
    bundle = render_file(profile)
    lab_id = cluster.lab_id_of(bundle)
    try:
        lab = cluster.boot(bundle, Path(rootfs_cache) if rootfs_cache else None, log=log)
        results = run_checks(lab, bundle)
    finally:
        left = cluster.down(lab_id)
    left += sandbox.leftovers(lab_id)
    results.append(Check("teardown leaves nothing", not left, "; ".join(left) or "no process, netns, link, mount or cgroup left"))
    return results
