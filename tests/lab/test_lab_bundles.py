"""The pod lab on rendered bundles: real slurmctld/slurmd/slurmdbd/MariaDB, real jobs.

Profiles: kind-dev (26.05, auth/slurm), legacy-munge (22.05, munge), and a GPU profile on
24.11 (auth/slurm). Needs root and the lab packages/rootfs (.ci/install-lab.sh).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmk8s.actions.files import read_profile
from slurmk8s.lab import sandbox, verify
from slurmk8s.lab.errors import LabUnavailable

from labenv import boot_or_skip, down_and_check_clean

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {
    "kind-dev-26.05": ROOT / "profiles/kind-dev.yaml",
    "legacy-munge-22.05": ROOT / "profiles/legacy-munge.yaml",
    "gpu-24.11": ROOT / "tests/lab/profiles/gpu-2411.yaml",
}

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module", params=sorted(PROFILES), ids=sorted(PROFILES))
def booted(request):
    """A booted lab per profile, torn down (and checked clean) afterwards."""
    lab, bundle = boot_or_skip(PROFILES[request.param])
    yield lab, bundle
    down_and_check_clean(lab)


def test_every_running_pool_member_is_idle_with_rendered_partitions_features_gres(booted):
    lab, bundle = booted
    check = verify.check_nodes_idle(lab, bundle)
    assert check.ok, check.detail


def test_srun_on_all_nodes_prints_exactly_the_pod_hostnames(booted):
    lab, bundle = booted
    check = verify.check_srun_hostnames(lab, bundle)
    assert check.ok, check.detail


def test_batch_job_completes(booted):
    lab, bundle = booted
    check = verify.check_sbatch(lab, bundle)
    assert check.ok, check.detail


def test_gpu_job_sees_its_gpu_and_cannot_open_the_other(booted):
    lab, bundle = booted
    if verify.gpu_partition(bundle) is None:
        pytest.skip("this profile has no GPU pool")
    check = verify.check_gpu_isolation(lab, bundle)
    assert check.ok, check.detail


def test_sacct_lists_jobs_with_tres_through_slurmdbd_and_mariadb(booted):
    lab, bundle = booted
    verify.check_sbatch(lab, bundle)
    check = verify.check_sacct(lab, bundle)
    assert check.ok, check.detail


def test_pending_job_survives_a_slurmctld_restart(booted):
    lab, bundle = booted
    check = verify.check_state_survives_restart(lab, bundle)
    assert check.ok, check.detail


def test_lab_exec_cli_runs_client_commands_in_the_login_pod(booted):
    lab, bundle = booted
    profile = next(p for p in PROFILES.values() if read_profile(p).name == bundle.cluster)
    done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "lab", "exec", str(profile), "--",
                           "scontrol", "show", "config"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"ClusterName             = {bundle.cluster}" in done.stdout


def test_a_version_without_a_lab_build_is_refused_up_front_with_exit_2(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text((ROOT / "profiles/kind-dev.yaml").read_text().replace('version: "26.05"', 'version: "25.11"'))
    done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "lab", "up", str(profile)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("the lab has no Slurm 25.11 build")
    assert "Traceback" not in done.stderr


def test_without_root_the_lab_says_so_and_exits_2(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LabUnavailable, match="needs root") as e:
        sandbox.preflight()
    assert e.value.exit_code == 2
