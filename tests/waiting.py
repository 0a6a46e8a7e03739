"""Waiting in tests: poll a condition until a deadline, and fail saying what was last seen.

Tests never sleep a fixed time and then assert: a loaded machine makes any fixed time too
short sometimes, and an idle one makes it too long always.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest


def wait_for(what: str, observe: Callable[[], Any], until: Callable[[Any], object] = bool,
             deadline_s: float = 60, every_s: float = 0.2, explain: Callable[[], str] | None = None) -> Any:
    """Poll observe() until until(value) holds; return that value.

    Past the deadline the test fails with `what`, the last value seen, the last error
    observe() raised (an error is "not yet": a daemon still starting answers with one) and
    what explain() adds (a daemon's log, say).
    """
    end = time.monotonic() + deadline_s
    seen: Any = "nothing (every poll failed)"
    error: BaseException | None = None
    while True:
        try:
            seen = observe()
            if until(seen):
                return seen
        except Exception as e:  # noqa: BLE001 (kept for the failure message)
            error = e
        if time.monotonic() >= end:
            detail = f"; last error: {type(error).__name__}: {error}" if error is not None else ""
            if explain is not None:
                detail += "\n" + explain()
            pytest.fail(f"{what}: not within {deadline_s:g} s; last seen: {seen!r}{detail}", pytrace=False)
        time.sleep(min(every_s, max(0.0, end - time.monotonic())))
