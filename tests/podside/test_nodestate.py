"""The one reader of Slurm node states (podside/nodestate.py): every state and flag suffix the CLI and the
pods act on, read from sinfo's one format."""

from __future__ import annotations

import pytest

from slurmk8s.podside import nodestate
from slurmk8s.podside.nodestate import NodeState


def test_the_command_asks_for_the_one_format() -> None:
    assert nodestate.command() == ["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"]
    assert nodestate.command(["cpu-0", "cpu-1"]) == ["sinfo", "--noheader", "--Node", "--nodes=cpu-0,cpu-1",
                                                     "--format=%N|%T|%E"]
    assert nodestate.command("cpu-[0-3]") == ["sinfo", "--noheader", "--Node", "--nodes=cpu-[0-3]", "--format=%N|%T|%E"]


def test_parse_splits_the_flags_keeps_the_first_line_of_a_node_and_skips_what_is_not_a_line() -> None:
    text = ("cpu-0|IDLE~|none\n"
            "cpu-0|idle|listed again for its second partition\n"
            "cpu-1|draining|slurmk8s rollout\n"
            "cpu-2|drained|admin: a|b\n"  # a reason may hold the separator
            "\n|idle|none\nnot a line\n")
    assert nodestate.parse(text) == {
        "cpu-0": NodeState("cpu-0", "idle", "~", ""),
        "cpu-1": NodeState("cpu-1", "draining", "", "slurmk8s rollout"),
        "cpu-2": NodeState("cpu-2", "drained", "", "admin: a|b"),
    }
    assert nodestate.parse("") == {}


FIELDS = ("registered", "drained", "down", "powered_down", "powering_up", "powering_down", "not_responding",
          "holds_jobs", "may_run_jobs")


@pytest.mark.parametrize("text, true", [
    ("idle", {"registered", "may_run_jobs"}),
    ("allocated", {"registered", "holds_jobs", "may_run_jobs"}),
    ("mixed", {"registered", "holds_jobs", "may_run_jobs"}),
    ("completing", {"registered", "may_run_jobs"}),
    ("allocated+", {"holds_jobs", "may_run_jobs"}),  # a completing job: not counted as registered (kube/wait's rule)
    ("draining", {"registered", "drained", "holds_jobs", "may_run_jobs"}),
    ("drained", {"registered", "drained", "may_run_jobs"}),
    ("planned", {"registered", "may_run_jobs"}),
    ("reserved", {"registered", "may_run_jobs"}),
    ("blocked", {"registered", "may_run_jobs"}),
    ("idle$", {"registered", "may_run_jobs"}),  # maintenance
    ("idle@", {"registered", "may_run_jobs"}),  # reboot pending
    ("idle^", {"registered", "may_run_jobs"}),  # reboot issued
    ("mixed-", {"registered", "holds_jobs", "may_run_jobs"}),  # planned by backfill
    ("idle~", {"powered_down"}),
    ("drained~", {"drained", "powered_down"}),
    ("idle#", {"powering_up", "may_run_jobs"}),
    ("allocated#", {"powering_up", "holds_jobs", "may_run_jobs"}),
    ("idle%", {"powering_down"}),
    ("idle!", {"powering_down", "may_run_jobs"}),  # power down asked, not started: jobs may still land
    ("idle*", {"not_responding", "may_run_jobs"}),
    ("down*", {"down", "not_responding"}),
    ("down", {"down"}),
    ("unknown", {"may_run_jobs"}),
    ("future", {"may_run_jobs"}),
], ids=lambda v: v if isinstance(v, str) else None)
def test_each_state_and_flag(text: str, true: set[str]) -> None:
    state = nodestate.parse(f"n-0|{text.upper()}|none\n")["n-0"]
    assert state.text == text
    assert {f for f in FIELDS if getattr(state, f)} == true


@pytest.mark.parametrize("text, base", [("idle+drain", "idle"), ("fail", "fail"), ("inval", "inval"),
                                        ("not_responding", "not_responding")])
def test_base_is_the_first_of_a_combined_state(text: str, base: str) -> None:
    state = nodestate.state_of("n-0", text)
    assert state.base == base and (base in nodestate.BAD) == (base != "idle")


def test_no_state_is_neither_registered_nor_running_jobs() -> None:
    """An empty state (sinfo printed nothing for it) may not be replaced as if idle."""
    state = nodestate.state_of("n-0", "")
    assert not state.registered and not state.may_run_jobs
