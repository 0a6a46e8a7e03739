"""Shared fixtures: the example profiles, --update-golden, the CLI in-process; no lab, e2e or images test under -n."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slurmk8s import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PROFILES = sorted((ROOT / "profiles").glob("*.yaml"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current render instead of comparing")


SERIAL_ONLY = ("lab", "e2e", "images")  # share podman networks, kind clusters and image stores


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The fast tier may run in parallel (pytest-xdist's -n); the tiers on shared machinery may not: such a
    test fails before any of its fixtures start anything."""
    if hasattr(item.config, "workerinput") and any(item.get_closest_marker(m) for m in SERIAL_ONLY):
        pytest.fail(f"marked {'/'.join(SERIAL_ONLY)}: must not run in parallel; run it without -n, or deselect "
                    '(-m "not lab and not e2e and not images")', pytrace=False)


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when the run was asked to refresh the golden trees."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(params=EXAMPLE_PROFILES, ids=[p.stem for p in EXAMPLE_PROFILES])
def example_profile(request: pytest.FixtureRequest) -> Path:
    """Each profile of profiles/ in turn."""
    return request.param


@pytest.fixture
def slurmk8s(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """Run `slurmk8s ARGS...` in-process through cli.main; return (exit code, stdout, stderr)."""
    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["slurmk8s", *args])
        try:
            cli.main()
            code = 0
        except SystemExit as e:
            code = e.code or 0
        out, err = capsys.readouterr()
        return code, out, err
    return run
