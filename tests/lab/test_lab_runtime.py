"""The lab's parts without a lab: waits on a fake clock, the one state file, the scale API's NotFound (no root)."""

from __future__ import annotations

import json
import stat

import pytest

from slurmk8s.lab import state
from slurmk8s.lab.errors import LabError
from slurmk8s.lab.runtime import wait_until
from slurmk8s.lab.scaleapi import NotFound


class FakeClock:
    """Time moves only when a wait sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_wait_polls_on_its_clock_until_the_condition_holds():
    clock = FakeClock()
    ready_at = clock.now + 2.5
    assert wait_until(lambda: clock.now >= ready_at and "up", 10, "thing", interval=0.5, clock=clock) == "up"
    assert clock.slept == [0.5] * 5


def test_a_wait_gives_up_at_its_deadline_on_its_clock_with_the_last_error():
    clock = FakeClock()

    def refused() -> bool:
        raise OSError("connection refused")

    with pytest.raises(LabError, match=r"(?s)slurmctld: not ready after 60 s.*last check failed: connection refused"):
        wait_until(refused, 60, "slurmctld", interval=1, clock=clock)
    assert clock.now == 1060.0 and len(clock.slept) == 60


def test_sandbox_and_lab_share_one_state_file_readable_by_another_process(tmp_path):
    writer = state.StateFile("lab-x", tmp_path)
    writer.put(state.SANDBOX, {"bridge": "skabcdefbr"})
    writer.put(state.LAB, {"pods": {"x-controller-0": {}}, "supervisor": 42})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab-x.json"]
    assert stat.S_IMODE((tmp_path / "lab-x.json").stat().st_mode) == 0o600  # it holds the admin token
    assert state.read_section("lab-x", state.SANDBOX, tmp_path) == {"bridge": "skabcdefbr"}
    assert state.read_section("lab-x", state.LAB, tmp_path)["supervisor"] == 42


def test_a_lab_booted_before_the_one_file_is_still_read(tmp_path):
    (tmp_path / "lab-old.json").write_text(json.dumps({"bridge": "sk123456br", "pods": {}}))
    lab_dir = tmp_path / "lab-old"
    lab_dir.mkdir()
    (lab_dir / "lab.json").write_text(json.dumps({"pods": {}, "supervisor": 7}))
    assert state.read_section("lab-old", state.SANDBOX, tmp_path) == {"bridge": "sk123456br", "pods": {}}
    assert state.read_section("lab-old", state.LAB, tmp_path, legacy_lab_dir=lab_dir) == {"pods": {}, "supervisor": 7}
    assert state.read_section("lab-none", state.LAB, tmp_path, legacy_lab_dir=tmp_path / "lab-none") is None


def test_a_missing_statefulset_is_its_own_error_not_a_key_error():
    error = NotFound("dev-gpu")
    assert isinstance(error, LabError) and not isinstance(error, KeyError)
    assert str(error) == "statefulset dev-gpu not found" and error.statefulset == "dev-gpu"


def test_batch_jobs_are_scheduled_at_once_in_the_lab_unless_the_bundle_says_otherwise():
    from slurmk8s.lab.adapt import adapt_slurm_files

    files, done = adapt_slurm_files({"slurm.conf": "A=1\nSchedulerParameters=bf_continue,bf_interval=30\nB=2\n"}, 8, 8192)
    assert files["slurm.conf"] == "A=1\nSchedulerParameters=bf_continue,bf_interval=30,batch_sched_delay=0\nB=2\n"
    assert [a.what for a in done] == ["slurm.conf: SchedulerParameters batch_sched_delay=0"]
    files, _ = adapt_slurm_files({"slurm.conf": "SchedulerType=sched/builtin\n"}, 8, 8192)
    assert files["slurm.conf"] == "SchedulerType=sched/builtin\nSchedulerParameters=batch_sched_delay=0\n"
    own = "SchedulerParameters=batch_sched_delay=5\n"
    assert adapt_slurm_files({"slurm.conf": own}, 8, 8192) == ({"slurm.conf": own}, [])
