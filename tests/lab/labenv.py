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
