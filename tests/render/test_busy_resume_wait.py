"""The busy prolog (PrologSlurmctld) returns only once the job's resumed nodes registered, so that
slurmctld starts the job at once instead of in its 30 s periodic pass (issue 17)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from slurmk8s.actions.render import render_file

ROOT = Path(__file__).resolve().parents[2]
KIND_DEV = ROOT / "profiles" / "kind-dev.yaml"


def busy_program(tmp_path: Path):
    configmap = render_file(KIND_DEV).find("ConfigMap", "dev-busy")
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)
    spec = importlib.util.spec_from_file_location("busy_hook_wait", tmp_path / "busy.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


class FakeSlurm:
    """sinfo answers from a script of node states per poll (nodestate's format); records when each pod was labelled."""

    def __init__(self, states_per_poll: list[dict[str, str]], job_state: str = "CONFIGURING"):
        self.states_per_poll = states_per_poll
        self.job_state = job_state
        self.node_polls = 0
        self.labelled_at: dict[str, int] = {}

    def run(self, argv, **kwargs):
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            out = "cpu-0 cpu-1"
        elif argv[0] == "sinfo":
            states = self.states_per_poll[min(self.node_polls, len(self.states_per_poll) - 1)]
            self.node_polls += 1
            asked = next(a for a in argv if a.startswith("--nodes=")).split("=", 1)[1].split(",")
            assert argv == ["sinfo", "--noheader", "--Node", f"--nodes={','.join(asked)}", "--format=%N|%T|%E"]
            out = "\n".join(f"{n}|{states[n]}|none" for n in asked)
        elif argv[:3] == ["scontrol", "show", "config"]:
            out = "ResumeTimeout           = 600 sec\nSuspendTime = 300 sec\n"
        elif argv[:3] == ["scontrol", "show", "job"]:
            out = f"JobId=7 JobState={self.job_state} Reason=None"
        else:
            raise AssertionError(argv)
        return type("R", (), {"returncode": 0, "stdout": out})()


@pytest.fixture
def prolog(tmp_path: Path, monkeypatch):
    script = busy_program(tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "cpu-[0-1]")
    monkeypatch.setattr(script, "POLL_S", 0)

    def start(slurm: FakeSlurm) -> FakeSlurm:
        monkeypatch.setattr(script.subprocess, "run", slurm.run)
        monkeypatch.setattr(script, "label", lambda pod, value: slurm.labelled_at.__setitem__(pod, slurm.node_polls))
        script.main("prolog")
        return slurm
    return start


# sinfo's long states (%T) with the flag suffixes: ALLOCATED+CLOUD, then +POWERED_DOWN, then powering up and
# not responding (sinfo shows one suffix: '#' or '*', whichever it prefers, both mean "not up yet").
UP = "allocated"
RESUMING = "allocated#"
NOT_RESPONDING = "allocated*"
NOT_YET_RESUMED = "allocated~"


def test_the_prolog_returns_once_the_resumed_node_registered(prolog) -> None:
    slurm = prolog(FakeSlurm([{"cpu-0": UP, "cpu-1": NOT_YET_RESUMED}, {"cpu-1": RESUMING},
                              {"cpu-1": NOT_RESPONDING}, {"cpu-1": UP}]))
    assert slurm.node_polls == 4  # asked until cpu-1 registered, then no more
    assert slurm.labelled_at == {"dev-cpu-0": 4, "dev-cpu-1": 4}  # the pods exist by then


def test_the_prolog_of_a_job_on_running_nodes_asks_once(prolog) -> None:
    slurm = prolog(FakeSlurm([{"cpu-0": UP, "cpu-1": "MIXED"}]))  # sinfo's case is not ours to rely on
    assert slurm.node_polls == 1
    assert set(slurm.labelled_at) == {"dev-cpu-0", "dev-cpu-1"}


def test_the_prolog_stops_waiting_when_the_resume_failed(prolog) -> None:
    # After ResumeTimeout slurmctld marks the node DOWN and requeues the job itself.
    slurm = prolog(FakeSlurm([{"cpu-0": UP, "cpu-1": RESUMING}, {"cpu-1": "down*"},
                              {"cpu-1": RESUMING}]))
    assert slurm.node_polls == 2


def test_the_prolog_stops_waiting_when_the_job_lost_its_nodes(prolog) -> None:
    slurm = prolog(FakeSlurm([{"cpu-0": UP, "cpu-1": RESUMING}], job_state="CANCELLED"))
    assert 1 < slurm.node_polls <= 1 + 10  # the job is checked every JOB_CHECK_EVERY polls
