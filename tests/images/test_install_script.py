"""tools/install-test-deps.sh runs its long steps side by side and ends with a table of their wall times.

The script runs in a copy of the tree whose steps are stand-ins that sleep and print, so the
test needs no root, podman or network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS = {
    ".ci/install-lab.sh": 'echo "lab $1"; sleep 1; [ "$1" != trees ] || [ -z "${FAIL_TREES:-}" ] || exit 3\n',
    "tools/install-helm.sh": "echo helm; sleep 1\n",
    "tools/install-checkov.sh": "echo checkov; sleep 1\n",
    "tools/kind/build.sh": "echo 'kind progress' >&2; echo localhost/node:v1; sleep 2\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "tools" / "kind").mkdir(parents=True)
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / "tools" / "install-test-deps.sh", tmp_path / "tools")
    for path, text in STEPS.items():
        (tmp_path / path).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in {"go": "exit 0\n", "dpkg-query": "printf 'ii '\n"}.items():  # jq and unzip "installed"
        (bin_dir / name).write_text(f"#!/bin/sh\n{text}")
        (bin_dir / name).chmod(0o755)
    return tmp_path


def run(tree: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(["bash", str(tree / "tools" / "install-test-deps.sh")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": f"{tree / 'bin'}:{os.environ['PATH']}",
                                           "SLURMK8S_INSTALL_LOGS": str(tree / "logs"), **env})
    return done, time.monotonic() - started


def table(stdout: str) -> dict[str, tuple[float, str]]:
    rows = stdout.split("install-test-deps.sh: wall time per step", 1)[1].splitlines()[1:]
    found = {}
    for row in rows:
        m = re.fullmatch(r"  (.+?)\s+(\d+\.\d) s(?:  (.+))?", row)
        assert m, row
        found[m.group(1)] = (float(m.group(2)), m.group(3) or "")
    return found


def test_the_long_steps_run_side_by_side_and_the_table_times_each(tree):
    done, _ = run(tree)
    assert done.returncode == 0, done.stderr
    rows = table(done.stdout)
    assert list(rows) == [
        "apt: jq, unzip", "lab packages and podman (.ci/install-lab.sh packages)",
        "| Slurm images, 3 series x 6 (.ci/install-lab.sh images)", "| their lab trees (.ci/install-lab.sh trees)",
        "| kind: Kubernetes from Go modules, node image (tools/kind/build.sh)",
        "| helm (tools/install-helm.sh)", "| checkov (tools/install-checkov.sh)", "side by side, wall", "total"]
    assert all(status == "ok" for name, (_, status) in rows.items() if name != "total")
    assert 1.9 <= rows["| kind: Kubernetes from Go modules, node image (tools/kind/build.sh)"][0] < 4
    # side by side: the group takes about its longest branch (images then trees, or kind: 2 s), not the sum (6 s)
    assert rows["side by side, wall"][0] < 5.5
    assert "--- kind" in done.stdout and "kind progress" in done.stdout  # each step's log, printed when it ends
    assert "localhost/node:v1" not in done.stdout  # build.sh's stdout is only the node image's name


def test_a_failed_step_fails_the_run_and_the_table_still_prints(tree):
    done, _ = run(tree, FAIL_TREES="1")
    assert done.returncode == 1
    rows = table(done.stdout)
    assert rows["| their lab trees (.ci/install-lab.sh trees)"][1] == "FAILED (exit 3)"
    assert rows["| helm (tools/install-helm.sh)"][1] == "ok"
    assert "install-test-deps.sh: failed: images (see the logs above)" in done.stderr
