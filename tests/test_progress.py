"""slurmk8s.progress: a live line on a terminal, timestamped lines in a log."""

from __future__ import annotations

import io
import time

import pytest

from slurmk8s.progress import CLEAR_LINE, Progress, elapsed_text


class Clock:
    def __init__(self, t: float = 1_800_000_000.0):  # 2027-01-15T08:00:00Z
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (42.9, "42s"), (185, "3m05s"), (3720, "1h02m"), (-1, "0s")])
def test_elapsed_text(seconds, text) -> None:
    assert elapsed_text(seconds) == text


def test_off_a_terminal_each_change_is_one_timestamped_line_and_a_repeat_waits_for_the_heartbeat() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress(out, terminal=False, heartbeat=60, now=clock)
    p.update("waiting for jobs on cpu-1")
    clock.t += 5
    p.update("waiting for jobs on cpu-1")  # same text, before the heartbeat: nothing
    clock.t += 55
    p.update("waiting for jobs on cpu-1")  # the heartbeat: the line again, with how long
    clock.t += 1
    p.update("waiting for pod dev-cpu-1")
    p.done("rollout: done")
    assert out.getvalue().splitlines() == [
        "2027-01-15T08:00:00Z waiting for jobs on cpu-1",
        "2027-01-15T08:01:00Z waiting for jobs on cpu-1 (waiting 1m00s)",
        "2027-01-15T08:01:01Z waiting for pod dev-cpu-1 (waiting 1m01s)",
        "2027-01-15T08:01:01Z rollout: done",
    ]
    assert CLEAR_LINE not in out.getvalue()


def test_on_a_terminal_one_line_is_redrawn_with_since_and_elapsed_and_done_clears_it() -> None:
    out, clock = io.StringIO(), Clock()
    since = time.strftime("%H:%M:%S", time.localtime(clock.t))  # the terminal shows local time
    p = Progress(out, terminal=True, now=clock)
    p.update("waiting for jobs on cpu-1")
    clock.t += 65
    p.update("waiting for jobs on cpu-1")
    p.done("rollout: drained cpu-1")
    text = out.getvalue()
    assert "\n" not in text.removesuffix("rollout: drained cpu-1\n")
    assert text.split(CLEAR_LINE) == ["", f"waiting for jobs on cpu-1 (since {since}, 0s)",
                                      f"waiting for jobs on cpu-1 (since {since}, 1m05s)", "rollout: drained cpu-1\n"]


def test_since_is_the_start_of_the_wait_and_done_starts_a_new_one() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress(out, terminal=False, now=clock)
    p.update("1 of 3 pods Ready")
    clock.t += 30
    p.update("2 of 3 pods Ready")  # new text, same wait
    p.done()
    clock.t += 30
    p.update("next wait")
    assert out.getvalue().splitlines() == ["2027-01-15T08:00:00Z 1 of 3 pods Ready",
                                           "2027-01-15T08:00:30Z 2 of 3 pods Ready (waiting 30s)",
                                           "2027-01-15T08:01:00Z next wait"]


def test_a_stream_that_is_not_a_terminal_is_detected() -> None:
    assert Progress(io.StringIO()).terminal is False


def test_a_write_error_reaches_the_caller() -> None:
    """The CLI's one error path reports it; Progress does not swallow it."""
    class Full(io.StringIO):
        def write(self, s: str) -> int:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        Progress(Full(), terminal=False).update("x")


def test_a_wait_after_done_with_the_same_text_is_not_repeated_in_a_log_until_the_heartbeat() -> None:
    """rollout says "drained cpu-1; waiting for their jobs to end", then waits on that very line."""
    out, clock = io.StringIO(), Clock()
    p = Progress(out, terminal=False, heartbeat=60, now=clock)
    p.done("rollout: drained cpu-1; waiting for their jobs to end")
    clock.t += 5
    p.update("rollout: drained cpu-1; waiting for their jobs to end")
    clock.t += 60
    p.update("rollout: drained cpu-1; waiting for their jobs to end")
    assert out.getvalue().splitlines() == [
        "2027-01-15T08:00:00Z rollout: drained cpu-1; waiting for their jobs to end",
        "2027-01-15T08:01:05Z rollout: drained cpu-1; waiting for their jobs to end (waiting 1m00s)"]
