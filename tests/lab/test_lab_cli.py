"""`slurmk8s lab verify` as a user runs it (a subprocess): its report, and its exit code.

Its own module: `lab verify` boots the profile's lab under the profile's lab id, so it must not
run while a fixture of another module holds that lab.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labenv import lab_unavailable

HERE = Path(__file__).resolve().parent
PROFILE = HERE / "profiles/multi-partition-2411.yaml"

pytestmark = pytest.mark.lab


def lab_verify(profile: Path) -> subprocess.CompletedProcess:
    reason = lab_unavailable("24.11")
    if reason:
        pytest.skip(reason)
    return subprocess.run([sys.executable, "-m", "slurmk8s.cli", "lab", "verify", str(profile)],
                          capture_output=True, text=True, timeout=1800)


def report(done: subprocess.CompletedProcess) -> list[str]:
    """The check lines and the summary, without the boot log before them."""
    lines = done.stdout.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith(("PASS", "FAIL", "SKIP"))):]


def test_a_multi_partition_profile_with_an_elastic_default_partition_passes_and_exits_0():
    done = lab_verify(PROFILE)
    lines = report(done)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  srun -p gpu -w a100-0,a100-1 -N2 hostname: printed ['orion24-a100-0', 'orion24-a100-1']" in lines
    assert "PASS  srun -p cpu -w cpu-0,cpu-1 -N2 hostname: printed ['orion24-cpu-0', 'orion24-cpu-1']" in lines
    assert ("PASS  resume of powered-down a100-2 (srun -p gpu -w a100-2 hostname): printed ['orion24-a100-2']; "
            "pod orion24-a100-2 started") in lines
    assert lines[-1] == "11 passed, 0 failed, 0 skipped", lines


def test_a_profile_whose_jobs_cannot_be_placed_fails_its_checks_and_exits_1(tmp_path):
    # A change a reviewer could miss: a default memory per CPU no node has makes every job unplaceable.
    broken = tmp_path / "broken.yaml"
    broken.write_text(PROFILE.read_text().replace("name: orion24\n", "name: orionbad\n").replace(
        '    version: "24.11"\n', '    version: "24.11"\n    config: {DefMemPerCPU: "999999"}\n'))
    done = lab_verify(broken)
    lines = report(done)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert any(line.startswith("FAIL  srun -p gpu -w a100-0,a100-1 -N2 hostname") for line in lines), lines
    assert lines[0] == "PASS  nodes idle in sinfo: 4 node(s) idle with rendered partitions/features/gres", lines
    assert lines[-1].endswith(" failed, 0 skipped") and not lines[-1].startswith("11 passed"), lines
