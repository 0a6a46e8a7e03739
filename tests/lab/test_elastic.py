"""Elastic pools on real Slurm: the rendered ResumeProgram/SuspendProgram scale the pool through
the lab's statefulsets/scale API, and `scale` never kills a running job."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmk8s.profile.files import read_profile
from slurmk8s.actions.converge import resume_own_drains
from slurmk8s.actions.scale import DRAIN_REASON, scale_pool
from slurmk8s.errors import ClusterError, UsageError
from slurmk8s.lab import lifecycle, teardown, verify
from slurmk8s.lab.access import LabCluster
from slurmk8s.render import render

import slurmfacts
from labenv import lab_unavailable
from waiting import wait_for

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
    booted = lifecycle.boot(bundle, log=lambda line: None)
    booted.publish_admin_access()
    yield booted
    assert booted.down() == [] and teardown.leftovers(booted.lab_id) == []


def scale(lab, replicas: int, cluster: LabCluster | None = None, **options) -> int:
    """`scale_pool` of pool cpu through the lab's own scale API and controller pod."""
    return scale_pool(read_profile(PROFILE), lab.bundle, "cpu", replicas, cluster or LabCluster(), **options)


def slurm(lab, argv: list[str]) -> str:
    return LabCluster().slurm(lab.bundle, argv)


class RecordingLab(LabCluster):
    """The lab's client, noting each replicas change with the size it replaced and when."""

    def __init__(self) -> None:
        self.shrinks: list[tuple[int, float]] = []

    def set_replicas(self, bundle, statefulset: str, replicas: int) -> None:
        self.shrinks.append((self.get_replicas(bundle, statefulset), time.time()))
        super().set_replicas(bundle, statefulset, replicas)


def pods_running(lab) -> list[str]:
    return sorted(p.name for p in lab.pods if p.owner == STS)


def job_record(lab, job: str) -> dict[str, str]:
    """The job as slurmdbd recorded it (sacct), with its nodes as Slurm expands them, comma-joined."""
    record = slurmfacts.jobs(lab, job).get(job, {})
    return {**record, "Nodes": ",".join(sorted(slurmfacts.hostnames(lab, record.get("NodeList", ""))))}


def test_a_job_needing_more_nodes_resumes_them_and_completes_within_resume_timeout(lab):
    assert pods_running(lab) == ["elastic-cpu-0"]
    states = slurmfacts.node_states(lab)
    assert (states["cpu-0"], states["cpu-1"], states["cpu-2"]) == ("idle", "idle~", "idle~"), states
    started = time.monotonic()
    job = verify.submit(lab, "-N3", "--wrap", "srun hostname")
    state = verify.wait_state(lab, job, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"}, deadline_s=120)
    took = time.monotonic() - started
    assert state == "COMPLETED", f"job {job} {state}"
    assert "ResumeTimeout=120" in lab.bundle.files["slurm.conf"] and took < 120
    assert ("patch", STS, 200) in lab.api.calls  # the real slurmctld ran the rendered ResumeProgram
    record = wait_for(f"job {job} in sacct", lambda: job_record(lab, job), until=lambda r: r.get("State") == "COMPLETED")
    assert (record["ExitCode"], record["Nodes"]) == ("0:0", "cpu-0,cpu-1,cpu-2"), record
    assert lab.scale_of(STS) == (3, 3) and pods_running(lab) == ["elastic-cpu-0", "elastic-cpu-1", "elastic-cpu-2"]
    # The busy prolog waited for the resumed nodes, so its end started the job, not slurmctld's 30 s pass.
    assert f"prolog_running_decr: Configuration for JobId={job} is complete" in controller_log(lab)


def controller_log(lab) -> str:
    pod = next(p for p in lab.pods if p.name.endswith("controller-0"))
    return lab.log_path(pod, "slurmctld").read_text(errors="replace")


def test_idle_nodes_are_suspended_after_suspend_time_and_their_pods_stop(lab):
    if lab.scale_of(STS)[0] < 3:
        lab.scale(STS, 3)
        lifecycle.wait_nodes_idle(lab)
    # SuspendTime 30 s plus Slurm's power-save polling; the pods stop after the SuspendProgram's patch.
    seen = wait_for("cpu-1 and cpu-2 suspended by Slurm and their pods stopped",
                    lambda: (lab.scale_of(STS), pods_running(lab), slurmfacts.node_states(lab)),
                    until=lambda s: s[0] == (1, 1) and s[1] == ["elastic-cpu-0"]
                    and s[2]["cpu-1"] in ("idle~", "idle%") and s[2]["cpu-2"] in ("idle~", "idle%"),
                    deadline_s=180, every_s=1)
    assert seen[2]["cpu-0"] == "idle", seen  # minReplicas stays up: SuspendExcNodes
    assert [c for c in lab.api.calls if c[0] == "patch"][-1] == ("patch", STS, 200)


def test_scaling_up_while_slurm_powers_nodes_down_waits_for_it_and_the_nodes_then_run_jobs(lab):
    scale(lab, 3, log=lambda line: None)
    lifecycle.wait_nodes_idle(lab)
    # Slurm powers cpu-1 and cpu-2 down now: its SuspendProgram stops their pods, and the nodes stay
    # POWERING_DOWN for SuspendTimeout (10 s here). A slurmd that registers meanwhile is overruled.
    slurm(lab, ["scontrol", "update", "nodename=cpu-[1-2]", "state=power_down"])
    lines: list[str] = []
    scale(lab, 3, log=lines.append)
    assert lines[0].startswith("pool cpu: waiting for Slurm to finish powering down cpu-"), lines
    # read after the SuspendProgram had taken the pool down
    assert lines[-1] == "pool cpu: 1 -> 3 replicas", f"{lines}; scale API calls {lab.api.calls}; {slurmfacts.node_states(lab)}"
    lifecycle.wait_nodes_idle(lab)
    job = verify.submit(lab, "-N2", "-w", "cpu-[1-2]", "--wrap", "srun hostname")
    state = verify.wait_state(lab, job, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"}, deadline_s=60)
    assert state == "COMPLETED", f"job {job} {state}: {slurmfacts.node_states(lab)}"
    record = wait_for(f"job {job} in sacct", lambda: job_record(lab, job), until=lambda r: r.get("State") == "COMPLETED")
    assert record["Nodes"] == "cpu-1,cpu-2", record


def test_scale_down_waits_for_the_job_on_the_highest_node(lab):
    scale(lab, 3, log=lambda line: None)
    lifecycle.wait_nodes_idle(lab)
    job = verify.submit(lab, "-w", "cpu-2", "--wrap", "sleep 8")
    assert verify.wait_state(lab, job, {"RUNNING"}, deadline_s=30) == "RUNNING"
    recording = RecordingLab()
    scale(lab, 1, recording, poll_s=0.5, log=lambda line: None)
    shrinks = recording.shrinks
    assert verify.wait_state(lab, job, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"}) == "COMPLETED"
    assert [size for size, _ in shrinks] == [3]  # the pool shrank once, after the job ended
    record = wait_for(f"job {job} in sacct", lambda: job_record(lab, job), until=lambda r: r.get("State") == "COMPLETED")
    ended = int(record["End"])
    assert record["Nodes"] == "cpu-2" and ended <= shrinks[0][1], (record, shrinks)  # Slurm's end time: before the shrink
    assert lab.scale_of(STS) == (1, 1) and pods_running(lab) == ["elastic-cpu-0"]
    # handed back to power saving: Slurm powers them down (idle! queued, idle% under way), not drained
    wait_for("cpu-1 and cpu-2 powered down", lambda: slurmfacts.node_states(lab),
             until=lambda s: s["cpu-1"] == "idle~" and s["cpu-2"] == "idle~", deadline_s=90)


def test_up_resumes_the_drains_an_unfinished_scale_down_left_and_no_other(lab):
    """The step `up` runs after its wait (actions/converge.py), on real Slurm: its sinfo reasons and states.

    `up` itself needs a Kubernetes API the lab does not serve (server-side apply, pods); the
    lab's statefulsets/scale stand-in is what this step reads.
    """
    scale(lab, 3, log=lambda line: None)
    lifecycle.wait_nodes_idle(lab)
    job = verify.submit(lab, "-w", "cpu-2", "--wrap", "sleep 300")
    assert verify.wait_state(lab, job, {"RUNNING"}, deadline_s=30) == "RUNNING"
    with pytest.raises(ClusterError, match=r"^pool cpu: jobs still running on cpu-1,cpu-2 after 1 s"):
        scale(lab, 1, timeout_s=1, poll_s=0.5, log=lambda line: None)
    slurm(lab, ["scontrol", "update", "nodename=cpu-0", "state=drain", "reason=disk swap"])  # an administrator's drain
    try:
        states = slurmfacts.node_states(lab)
        assert (states["cpu-0"], states["cpu-1"], states["cpu-2"]) == ("drain", "drain", "drng"), states
        lines: list[str] = []
        assert resume_own_drains(read_profile(PROFILE), lab.bundle, LabCluster(), log=lines.append) == ["cpu-1", "cpu-2"]
        assert lines == ["pool cpu: cpu-1,cpu-2 left drained by slurmk8s; resumed"]
        # slurmctld pings a resumed node before it counts as responding again ('*' meanwhile)
        wait_for("cpu-1 idle and cpu-2 running its job, cpu-0 still drained",
                 lambda: slurmfacts.node_states(lab),
                 until=lambda s: (s["cpu-0"], s["cpu-1"], s["cpu-2"]) == ("drain", "idle", "alloc"), deadline_s=60)
        assert lab.scale_of(STS) == (3, 3)
    finally:
        slurm(lab, ["scancel", job])
        slurm(lab, ["scontrol", "update", "nodename=cpu-0", "state=resume"])
    lifecycle.wait_nodes_idle(lab)
    # A scale that died after it removed cpu-2's pod, before it handed the node back: drained, no pod.
    slurm(lab, ["scontrol", "update", "nodename=cpu-2", "state=drain", f"reason={DRAIN_REASON}"])
    LabCluster().set_replicas(lab.bundle, STS, 2)
    wait_for("elastic-cpu-2 gone", lambda: pods_running(lab), until=lambda p: "elastic-cpu-2" not in p, deadline_s=60)
    assert resume_own_drains(read_profile(PROFILE), lab.bundle, LabCluster(), log=lambda line: None) == ["cpu-2"]
    wait_for("cpu-2 powered down, not drained", lambda: slurmfacts.node_states(lab),
             until=lambda s: s["cpu-2"] == "idle~", deadline_s=90)


def test_the_cli_scales_the_labs_pool_through_the_client_it_builds(lab):
    """`scale --lab` end to end: the CLI's one factory gives the lab's client, and the action never asks which."""
    def cli_scale(replicas: int) -> str:
        done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "scale", str(PROFILE), "cpu", str(replicas), "--lab"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert re.fullmatch(r"pool cpu: [123] -> 3 replicas", cli_scale(3))
    assert lab.scale_of(STS)[0] == 3  # read before Slurm's SuspendTime (30 s) can lower it again
    lifecycle.wait_nodes_idle(lab)
    assert cli_scale(1) == "pool cpu: 3 -> 1 replicas; cpu-1,cpu-2 powered down"
    wait_for("elastic-cpu-1 and -2 gone", lambda: (lab.scale_of(STS), pods_running(lab)),
             until=lambda s: s == ((1, 1), ["elastic-cpu-0"]), deadline_s=60)


def test_scale_outside_min_max_is_refused_with_exit_2():
    with pytest.raises(UsageError, match=r"pool cpu: 4 is outside minReplicas..maxReplicas \(1..3\)"):
        profile = read_profile(PROFILE)
        scale_pool(profile, render(profile), "cpu", 4, LabCluster())  # refused before the lab is asked
    done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "scale", str(PROFILE), "cpu", "0", "--lab"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "pool cpu: 0 is outside minReplicas..maxReplicas (1..3)"
