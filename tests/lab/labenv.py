"""Whether the pod lab can run here, for the lab tests' skips."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from slurmk8s.lab import rootfs, sandbox, teardown
from slurmk8s.lab.errors import LabUnavailable


# Every lab test's container logs (slurmctld, slurmd, ...) stay here after teardown, one
# directory per lab, replaced by the next run of the same lab: a failed run can be read.
LOGS = Path(os.environ.get("SLURMK8S_LAB_LOGS", "/tmp/slurmk8s-lab-logs"))


def lab_unavailable(version: str) -> str | None:
    """Why the lab cannot boot Slurm `version` on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "the lab needs root"
    try:
        sandbox.preflight()
        local = rootfs.local_images()
    except LabUnavailable as e:
        return str(e)
    missing = [ref for ref in rootfs.series_images(version) if ref not in local]
    if missing:
        return f"the project's images {', '.join(missing)} are not built (slurmk8s images build --slurm {version})"
    return None


def boot_or_skip(profile_path):
    """Render a profile and boot its lab: (lab, bundle); the test skips, saying why, where the lab cannot run."""
    import pytest

    from slurmk8s.profile.files import read_profile
    from slurmk8s.lab import lifecycle
    from slurmk8s.render import render

    bundle = render(read_profile(profile_path))
    reason = lab_unavailable(bundle.version)
    if reason:
        pytest.skip(reason)
    try:
        return lifecycle.boot(bundle, log=lambda line: None), bundle
    except BaseException:
        lifecycle.down(lifecycle.lab_id_of(bundle))  # its logs are in the error already
        raise


def down_and_check_clean(lab) -> None:
    """Tear the lab down and assert nothing of it is left (processes, netns, links, mounts, cgroups, files)."""
    from slurmk8s.lab import lifecycle

    shutil.rmtree(LOGS / lab.lab_id, ignore_errors=True)
    left = lifecycle.down(lab.lab_id, keep_logs=LOGS / lab.lab_id)
    assert left == [] and teardown.leftovers(lab.lab_id) == [], left
    assert list((LOGS / lab.lab_id).glob("*/slurmctld.log")), f"no slurmctld log kept in {LOGS / lab.lab_id}"
    assert not lifecycle.lab_dir_of(lab.lab_id).exists()
