"""`slurmk8s images check` with podman: the project's images keep the contract, a broken one fails with a list.

Images are built first when missing (bash tools/install-test-deps.sh builds them in CI).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from imagepods import ensure_images, image_ref

from slurmk8s.debian import SLURM_RELEASES
from slurmk8s.images import contract

pytestmark = pytest.mark.images

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:  # a failure, not a skip: these tests must run wherever the suite runs
        pytest.fail("the image tests run podman as root (bash tools/install-test-deps.sh prepares the rest)")


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurmk8s.cli", "images", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("series", tuple(SLURM_RELEASES))
def test_the_projects_images_pass(series):
    ensure_images(series)
    refs = [image_ref(series, role) for role in contract.ROLES]
    done = check(*refs)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    lines = done.stdout.splitlines()
    assert len(lines) == len(refs) and all(line.endswith(" checks passed") for line in lines), done.stdout
    auth = "slurm" if series != "22.05" else "munge"
    assert lines[0].startswith(f"{refs[0]} (slurmctld, Slurm {series}, auth/{auth}): all ")


def test_the_projects_images_pass_for_munge_profiles_too():
    series = "26.05"
    ensure_images(series)
    done = check("--auth", "munge", *(image_ref(series, role) for role in contract.SLURM_ROLES))
    assert done.returncode == 0, done.stdout
    assert all(", auth/munge): all " in line for line in done.stdout.splitlines()), done.stdout


def test_an_image_without_sackd_and_with_another_slurm_uid_fails_with_the_list(tmp_path):
    series = "26.05"
    ensure_images(series)
    broken = f"localhost/slurmk8s-check-test/login:{uuid.uuid4().hex[:8]}"
    (tmp_path / "Containerfile").write_text(
        f"FROM {image_ref(series, 'login')}\n"
        "RUN rm -f /usr/sbin/sackd && usermod -u 402 slurm\n")
    try:
        built = subprocess.run(["podman", "build", "-q", "--network=none", "-t", broken, str(tmp_path)],
                               capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, built.stderr
        done = check(broken)
    finally:
        subprocess.run(["podman", "rmi", "-f", broken], capture_output=True, timeout=120)
    total = len(contract.assertions("login", series, "slurm"))
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout.splitlines() == [
        f"{broken} (login, Slurm {series}, auth/slurm): 2 of {total} checks failed",
        "  FAILED user slurm is uid 401, gid 401: SlurmUser=slurm; runAsUser 401; init-config's install -o slurm -g slurm",
        "  FAILED sackd on PATH: the login's sackd sidecar (sackd -D) serves auth/slurm to the clients",
    ]


def test_an_image_that_is_not_there_and_cannot_be_pulled_is_one_line_and_exit_1():
    done = check("localhost/slurmk8s-check-test/login:absent")
    assert done.returncode == 1
    assert done.stdout.startswith("localhost/slurmk8s-check-test/login:absent (login): not checked: not here and podman pull failed: ")
    assert len(done.stdout.splitlines()) == 1 and done.stderr == ""
