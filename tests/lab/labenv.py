"""Whether the pod lab can run here, for the lab tests' skips."""

from __future__ import annotations

import os

from slurmk8s.lab import rootfs, sandbox
from slurmk8s.lab.errors import LabUnavailable


def lab_unavailable(version: str) -> str | None:
    """Why the lab cannot boot Slurm `version` on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "the lab needs root"
    try:
        sandbox.preflight()
    except LabUnavailable as e:
        return str(e)
    if version == "22.05":
        return None if rootfs.host_slurm_version() else "host Slurm packages missing (bash .ci/install-lab.sh)"
    path = rootfs.rootfs_path(version, rootfs.default_cache_dir())
    return None if rootfs.rootfs_info(path) else f"no Slurm {version} rootfs in {path} (bash .ci/install-lab.sh)"


def boot_or_skip(profile_path):
    """Render a profile and boot its lab: (lab, bundle); the test skips, saying why, where the lab cannot run."""
    import pytest

    from slurmk8s.actions.files import read_profile
    from slurmk8s.lab import cluster
    from slurmk8s.render import render

    bundle = render(read_profile(profile_path))
    reason = lab_unavailable(bundle.version)
    if reason:
        pytest.skip(reason)
    return cluster.boot(bundle, log=lambda line: None), bundle


def down_and_check_clean(lab) -> None:
    """Tear the lab down and assert nothing of it is left (processes, netns, links, mounts, cgroups, files)."""
    from slurmk8s.lab import cluster

    left = cluster.down(lab.lab_id)
    assert left == [] and sandbox.leftovers(lab.lab_id) == [], left
    assert not cluster.lab_dir_of(lab.lab_id).exists()
