"""`lab up|exec|down|verify`: a rendered profile booted with real Slurm daemons on this machine."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from slurmk8s.actions.render import render_file
from slurmk8s.lab import lifecycle, sandbox, teardown
from slurmk8s.lab.errors import LabError, LabUnavailable
from slurmk8s.lab.supervisor import FAILED, READY
from slurmk8s.lab.verify import Check, run_checks


def supervisor_log(lab_id: str) -> Path:
    """Where the `lab up` supervisor writes (kept after a failure, removed by `lab down`)."""
    return lifecycle.LAB_ROOT / f"{lab_id}.supervisor.log"


def lab_up(profile: str, rootfs_cache: str | None, log: Callable[[str], None] = print,
           deadline_s: float = 1800) -> str:
    """Boot the profile's lab in a supervisor process that keeps serving it; returns the lab id.

    The supervisor answers the scale API the lab's ResumeProgram/SuspendProgram call, so it
    must outlive this command; `lab down` stops it.
    """
    bundle = render_file(profile)
    sandbox.preflight()
    lifecycle.check_lab_version(bundle.version)  # refused here, before anything starts
    lab_id = lifecycle.lab_id_of(bundle)
    lifecycle.down(lab_id)
    log_path = supervisor_log(lab_id)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "slurmk8s.lab.supervisor", str(Path(profile).resolve()),
                                 rootfs_cache or ""], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    shown = 0
    while True:
        lines = log_path.read_text().splitlines()
        for line in lines[shown:]:
            if line == READY:
                log(f"lab {lab_id} up in {time.monotonic() - started:.1f} s")
                log(f"run Slurm commands with: slurmk8s lab exec {profile} -- sinfo")
                return lab_id
            if line.startswith(FAILED):
                error = LabUnavailable if proc.wait(timeout=60) == LabUnavailable.exit_code else LabError
                raise error(line.removeprefix(f"{FAILED}: "))
            log(line)
        shown = len(lines)
        if proc.poll() is not None:
            raise LabError(f"the lab supervisor exited {proc.returncode}; see {log_path}")
        if time.monotonic() - started > deadline_s:
            lifecycle.down(lab_id)
            raise LabError(f"the lab did not boot within {deadline_s:.0f} s; see {log_path}")
        time.sleep(0.1)


def lab_exec(profile: str, argv: list[str], pod: str | None = None, container: str | None = None):
    """Run a command in the running lab of this profile (default pod: login, else controller)."""
    bundle = render_file(profile)
    return lifecycle.exec_in_lab(lifecycle.lab_id_of(bundle), argv, pod, timeout=3600, container=container)


def lab_down(profile: str) -> list[str]:
    """Tear the profile's lab down; what could not be removed (empty when clean)."""
    lab_id = lifecycle.lab_id_of(render_file(profile))
    left = lifecycle.down(lab_id)
    if not left:
        supervisor_log(lab_id).unlink(missing_ok=True)
    return left


def lab_verify(profile: str, rootfs_cache: str | None, log: Callable[[str], None] = print) -> list[Check]:
    """Boot, run the smoke suite, tear down; the checks (teardown included) in order."""
    bundle = render_file(profile)
    lab_id = lifecycle.lab_id_of(bundle)
    try:
        lab = lifecycle.boot(bundle, Path(rootfs_cache) if rootfs_cache else None, log=log)
        results = run_checks(lab, bundle)
    finally:
        left = lifecycle.down(lab_id)
    left += teardown.leftovers(lab_id)
    results.append(Check("teardown leaves nothing", not left, "; ".join(left) or "no process, netns, link, mount or cgroup left"))
    return results
