"""Shared fixtures: the example profiles and the --update-golden flag."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PROFILES = sorted((ROOT / "profiles").glob("*.yaml"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current render instead of comparing")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when the run was asked to refresh the golden trees."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(params=EXAMPLE_PROFILES, ids=[p.stem for p in EXAMPLE_PROFILES])
def example_profile(request: pytest.FixtureRequest) -> Path:
    """Each profile of profiles/ in turn."""
    return request.param

