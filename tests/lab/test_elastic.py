"""Elastic pools on real Slurm: the rendered ResumeProgram/SuspendProgram scale the pool through
the lab's statefulsets/scale API, and `scale` never kills a running job."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmk8s.actions.files import read_profile
from slurmk8s.actions.scale import PoolAccess, scale_pool
from slurmk8s.errors import UsageError
from slurmk8s.lab import cluster, sandbox, verify
from slurmk8s.lab.access import lab_pool_access
from slurmk8s.render import render

from labenv import lab_unavailable

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "tests/lab/profiles/elastic.yaml"
STS = "elastic-cpu"

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab():
    bundle = render(read_profile(PROFILE))
    reason = lab_unavailable(bundle.version)
    if reason:
        pytest.skip(reason)
    booted = cluster.boot(bundle, log=lambda line: None)
    booted.publish_admin_access()
    yield booted
    assert booted.down() == [] and sandbox.leftovers(booted.lab_id) == []


def pods_running(lab) -> list[str]:
    return sorted(p.name for p in lab.pods if p.owner == STS)


def test_a_job_needing_more_nodes_resumes_them_and_completes_within_resume_timeout(lab):
    assert pods_running(lab) == ["elastic-cpu-0"]
    started = time.monotonic()
    job = verify.submit(lab, "-N3", "--wrap", "srun hostname")
    state = verify.wait_state(lab, job, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"}, deadline_s=120)
    took = time.monotonic() - started
    assert state == "COMPLETED", f"job {job} {state}"
    assert "ResumeTimeout=120" in lab.bundle.files["slurm.conf"] and took < 120
    assert ("patch", STS, 200) in lab.api.calls  # the real slurmctld ran the rendered ResumeProgram
    assert pods_running(lab) == ["elastic-cpu-0", "elastic-cpu-1", "elastic-cpu-2"]


def test_idle_nodes_are_suspended_after_suspend_time_and_their_pods_stop(lab):
    if lab.replicas[STS] < 3:
        lab.scale(STS, 3)
    end = time.monotonic() + 120  # SuspendTime 30 s plus Slurm's power-save polling
    while time.monotonic() < end and lab.replicas[STS] > 1:
        time.sleep(1)
    assert lab.replicas[STS] == 1, lab.api.calls
    assert pods_running(lab) == ["elastic-cpu-0"]  # minReplicas stays: SuspendExcNodes
    states = lab.exec(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout.split("\n")
    assert any(line.startswith("cpu-2 idle~") or line.startswith("cpu-2 idle%") for line in states), states


def test_scale_down_waits_for_the_job_on_the_highest_node(lab):
    get, put, slurm = lab_pool_access(lab.bundle)
    access = PoolAccess(get, put, slurm)
    # Nodes Slurm just suspended stay POWERING_DOWN for SuspendTimeout (10 s here) before they can return.
    time.sleep(12)
    scale_pool(lab.bundle, "cpu", 3, access, log=lambda line: None)
    cluster.wait_nodes_idle(lab)
    job = verify.submit(lab, "-w", "cpu-2", "--wrap", "sleep 8")
    assert verify.wait_state(lab, job, {"RUNNING"}, deadline_s=30) == "RUNNING"
    sizes: list[int] = []
    access.set_replicas = lambda sts, n: (sizes.append(get(sts)), put(sts, n))[1]
    scale_pool(lab.bundle, "cpu", 1, access, poll_s=0.5, log=lambda line: None)
    assert verify.wait_state(lab, job, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"}) == "COMPLETED"
    assert sizes == [3]  # the pool shrank once, after the job ended
    assert pods_running(lab) == ["elastic-cpu-0"]


def test_scale_outside_min_max_is_refused_with_exit_2():
    with pytest.raises(UsageError, match=r"pool cpu: 4 is outside minReplicas..maxReplicas \(1..3\)"):
        scale_pool(render(read_profile(PROFILE)), "cpu", 4, PoolAccess(None, None, None))
    done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "scale", str(PROFILE), "cpu", "0", "--lab"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "pool cpu: 0 is outside minReplicas..maxReplicas (1..3)"
