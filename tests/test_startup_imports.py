"""`--help` and the render of a valid profile never load the Kubernetes client or rich.

kubernetes is for cluster commands only; rich would format help (typer loads it unless told not to).
Each costs tens of milliseconds at every start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("rich", "kubernetes")


def loaded_after(argv: list[str], kubeconfig: Path | None = None) -> tuple[int, set[str]]:
    """(exit code, heavy top-level modules imported) of one CLI run in a fresh interpreter."""
    code = ("import sys\nsys.argv = ['slurmk8s', *sys.argv[1:]]\nimport slurmk8s.cli\n"
            "try:\n    slurmk8s.cli.main()\nexcept SystemExit as e:\n    status = e.code\n"
            f"print(status, ' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    env = {**os.environ, **({"KUBECONFIG": str(kubeconfig)} if kubeconfig else {})}
    run = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env=env)
    status, _, modules = run.stderr.strip().splitlines()[-1].partition(" ")
    return int(status or 0), set(modules.split())


@pytest.mark.parametrize("argv", [["--help"], ["render", "--help"],
                                  ["render", "profiles/gpu-ib.yaml", "-o", "-"],
                                  ["validate", "profiles/side-by-side.yaml"]], ids=" ".join)
def test_no_heavy_import(argv: list[str]) -> None:
    assert loaded_after(argv) == (0, set())


def test_a_cluster_command_loads_kubernetes(tmp_path: Path) -> None:
    """The check can fail: `status` loads the client (and fails on a missing kubeconfig, no cluster asked)."""
    status, modules = loaded_after(["status", "profiles/kind-dev.yaml"], kubeconfig=tmp_path / "missing")
    assert status == 1 and "kubernetes" in modules
