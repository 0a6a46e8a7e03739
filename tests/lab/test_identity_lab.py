"""Declared users on real Slurm: tests/lab/profiles/identity-2605.yaml (Slurm 26.05).

The users exist only through spec.identity: the images are not touched (compare
test_scheduling.py, which adds its users to the image trees). Each pod's init container merges
them into /etc/passwd and /etc/group as on Kubernetes; /home is one claim shared by login and the
pool, as a ReadWriteMany claim would be. Needs root and the project's 26.05 images.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from slurmk8s.actions.accounts import apply_accounts
from slurmk8s.lab import lifecycle, teardown
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render

from labenv import lab_unavailable
from waiting import wait_for

PROFILE = Path(__file__).resolve().parent / "profiles/identity-2605.yaml"
ADA, MAX = "sk8s-ada", "sk8s-max"
LOGIN, NODE, CONTROLLER, DBD = "identlab-login-0", "identlab-cpu-0", "identlab-controller-0", "identlab-accounting-0"

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def ada_key(tmp_path_factory) -> Path:
    key = tmp_path_factory.mktemp("ssh") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.fixture(scope="module")
def lab(ada_key: Path, tmp_path_factory):
    doc = yaml.safe_load(PROFILE.read_text())
    doc["spec"]["identity"]["users"][0]["sshKeys"] = [ada_key.with_suffix(".pub").read_text().strip()]
    path = tmp_path_factory.mktemp("profile") / PROFILE.name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    profile = read_profile(path)
    bundle = render(profile)
    reason = lab_unavailable(bundle.version)
    if reason:
        pytest.skip(reason)
    booted = lifecycle.boot(bundle, log=lambda line: None)
    try:
        apply_accounts(profile, lambda argv: _run3(booted, argv))
        yield booted
    finally:
        left = lifecycle.down(booted.lab_id)
    assert left == [] and teardown.leftovers(booted.lab_id) == [], left


def _run3(lab, argv: list[str]) -> tuple[int, str, str]:
    done = lab.exec(argv, timeout=60)
    return done.returncode, done.stdout, done.stderr


def sh(lab, *argv: str, pod: str = LOGIN, ok: bool = True) -> str:
    done = lab.exec(list(argv), pod=pod, timeout=60)
    if ok:
        assert done.returncode == 0, f"{pod}: {' '.join(argv)}: {done.stderr or done.stdout}"
    return done.stdout + done.stderr


def test_every_slurm_pod_resolves_the_declared_users_and_keeps_its_own(lab):
    for pod in (LOGIN, NODE, CONTROLLER, DBD):
        assert sh(lab, "getent", "passwd", ADA, pod=pod).strip() == f"{ADA}:x:61201:61201::/home/{ADA}:/bin/bash", pod
        assert sh(lab, "id", "-Gn", ADA, pod=pod).split() == [ADA, "sk8s-hpc"], pod
        assert sh(lab, "id", "-u", "slurm", pod=pod).strip() == "401", pod  # the image's daemon user stays


def test_homes_are_made_on_the_shared_volume_owned_by_their_user(lab):
    assert sh(lab, "stat", "-c", "%U %G %a", f"/home/{ADA}").strip() == f"{ADA} {ADA} 700"
    assert sh(lab, "stat", "-c", "%U %G %a", f"/home/{MAX}", pod=NODE).strip() == f"{MAX} sk8s-hpc 700"


def test_a_users_job_runs_as_the_user_writes_home_and_sacct_names_the_user(lab):
    job = sh(lab, "runuser", "-u", ADA, "--", "sbatch", "--parsable", f"--chdir=/home/{ADA}", "-o", "job.out",
             "--wrap", "id -un; id -u; hostname").strip().split(";")[0]
    assert job.isdigit(), job

    def state() -> str:
        return sh(lab, "sacct", "-j", job, "-X", "-n", "-P", "-o", "User,State", ok=False).strip()
    assert wait_for(f"job {job} to complete", state, until=lambda s: s.endswith(("COMPLETED", "FAILED", "CANCELLED")),
                    deadline_s=120, every_s=0.5) == f"{ADA}|COMPLETED"
    # written by slurmstepd on the node, read on login: one /home
    # As the user: root in the sshd container holds no DAC_OVERRIDE, so it cannot enter a 0700 home.
    assert sh(lab, "runuser", "-u", ADA, "--", "cat", f"/home/{ADA}/job.out").split() == [ADA, "61201", NODE]
    assert sh(lab, "runuser", "-u", ADA, "--", "stat", "-c", "%U", f"/home/{ADA}/job.out").strip() == ADA


def test_job_users_cannot_write_where_root_reads(lab):
    probe = ("for p in /etc/slurm/plugstack.conf /etc/passwd /var/spool/slurmd/x; do "
             "touch $p 2>/dev/null && echo wrote $p; done; stat -c %a /etc/slurm /var/spool/slurmd")
    out = sh(lab, "runuser", "-u", ADA, "--", "srun", f"--chdir=/home/{ADA}", "sh", "-c", probe)
    assert out.split() == ["755", "755"], out


def test_sshd_lets_a_user_in_with_their_key_and_shows_the_secrets_host_key(lab, ada_key: Path, tmp_path: Path):
    """ssh from the host to the login pod's address: the user's key file as the init container installed
    it (owned by the user, 0600) passes sshd's StrictModes, and sshd presents the Secret's host key."""
    secret = lab.lab_dir / "secrets" / "identlab-ssh-host-keys" / "ssh_host_ed25519_key"
    host_public = subprocess.run(["ssh-keygen", "-y", "-f", str(secret)], capture_output=True, text=True,
                                 check=True).stdout.split()[:2]
    ip = lab.network.pods[LOGIN].ip
    known = tmp_path / "known_hosts"
    known.write_text(f"{ip} {' '.join(host_public)}\n")
    assert sh(lab, "stat", "-c", "%U %a", f"/etc/ssh/authorized_keys/{ADA}").strip() == f"{ADA} 600"
    done = subprocess.run(["ssh", "-i", str(ada_key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                           "-o", f"UserKnownHostsFile={known}", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
                           f"{ADA}@{ip}", "id -un; pwd"], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == [ADA, f"/home/{ADA}"], done.stderr
