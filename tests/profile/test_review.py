"""`validate` warnings (profile/review.py): what a profile may do but a security review stops on."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.profile import load_profile
from slurmk8s.profile.files import read_profile
from slurmk8s.profile.review import image_tag_problem, security_warnings

from profile_texts import BASE
from tests.conftest import EXAMPLE_PROFILES

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEY a@example.org"
CLEAN = BASE  # one pool, nothing a review warns on
SMUGGLE = f"""\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {{name: demo}}
spec:
  slurm:
    images:
      worker: attacker.example/slurmd:latest
      login: attacker.example/login
  pods:
    annotations:
      container.apparmor.security.beta.kubernetes.io/slurmd: unconfined
  login:
    authorizedKeys: ["{KEY}"]
  identity:
    users: [{{name: ada, uid: 2001}}]
  pools:
    - name: cpu
      replicas: 1
      cpus: 2
      memory: 2Gi
      tolerations: [{{operator: Exists}}]
      nodeSelector: {{node-role.kubernetes.io/control-plane: ""}}
"""
PINNED = ": each pull may bring a different image (OnDelete pools keep whatever their pods pulled); pin a version tag or a digest"
WANT = [
    "p.yaml:7:15: spec.slurm.images.worker: image attacker.example/slurmd:latest is tagged latest" + PINNED,
    "p.yaml:8:14: spec.slurm.images.login: image attacker.example/login has no tag" + PINNED,
    "p.yaml:11:7: spec.pods.annotations.container.apparmor.security.beta.kubernetes.io/slurmd: turns AppArmor off "
    "(unconfined) for every pod that has the container",
    "p.yaml:13:21: spec.login.authorizedKeys: root's keys are not used: spec.identity declares users, so sshd refuses "
    "root (PermitRootLogin no); admins reach root with kubectl exec",
    "p.yaml:21:21: spec.pools[0].tolerations[0]: tolerates every taint (operator Exists without a key): pool cpu's "
    "privileged slurmd pods may run on any node, control-plane nodes included",
    "p.yaml:22:22: spec.pools[0].nodeSelector.node-role.kubernetes.io/control-plane: selects control-plane nodes: "
    "pool cpu's privileged slurmd pods, where jobs run, would run beside the API server and etcd",
]


def test_each_warning_is_one_located_line() -> None:
    assert [w.format("p.yaml") for w in security_warnings(load_profile(SMUGGLE.encode(), "p.yaml"))] == WANT


def test_validate_prints_warnings_and_exits_0(slurmk8s, tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(SMUGGLE)
    code, out, err = slurmk8s("validate", str(profile))
    assert code == 0
    assert out == f"{profile}: ok (cluster demo, Slurm 26.05, 1 pool(s), 1 node(s))\n"
    assert err.splitlines() == [f"warning: {tmp_path}/{line}" for line in WANT]


def test_validate_strict_makes_them_errors(slurmk8s, tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(SMUGGLE)
    code, out, err = slurmk8s("validate", "--strict", str(profile))
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"{tmp_path}/{line}" for line in WANT]


def test_a_clean_profile_passes_strict(slurmk8s, tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(CLEAN)
    assert slurmk8s("validate", "--strict", str(profile)) == (0, f"{profile}: ok (cluster demo, Slurm 26.05, 1 pool(s), "
                                                                 "1 node(s))\n", "")


@pytest.mark.parametrize("profile", EXAMPLE_PROFILES, ids=[p.stem for p in EXAMPLE_PROFILES])
def test_the_example_profiles_have_no_warning(profile: Path) -> None:
    assert security_warnings(read_profile(profile)) == []


@pytest.mark.parametrize(("text", "path"), [
    (CLEAN.replace("spec:\n", "spec:\n  slurm: {images: {tag: latest}}\n"), "spec.slurm.images.tag"),
    (CLEAN.replace("memory: 2Gi\n", "memory: 2Gi\n      tolerations: [{key: node-role.kubernetes.io/master, "
                   "operator: Exists, effect: NoSchedule}]\n"), "spec.pools[0].tolerations[0]"),
    (CLEAN.replace("spec:\n", "spec:\n  pods: {annotations: {seccomp.security.alpha.kubernetes.io/pod: unconfined}}\n"),
     "spec.pods.annotations.seccomp.security.alpha.kubernetes.io/pod"),
], ids=["tag-latest", "control-plane-toleration", "seccomp-unconfined"])
def test_more_warnings_name_their_field(text: str, path: str) -> None:
    found = security_warnings(load_profile(text.encode()))
    assert {w.path for w in found} == {path}


@pytest.mark.parametrize(("ref", "problem"), [
    ("ghcr.io/slinkyproject/slurmd:26.05-ubuntu24.04", None), ("mariadb:11.4", None),
    ("localhost:5000/slurmd", "untagged"), ("localhost:5000/slurmd:latest", "latest"),
    ("registry.example/slurmd@sha256:" + "0" * 64, None), ("slurmd", "untagged"),
])
def test_image_tag_problem(ref: str, problem: str | None) -> None:
    assert image_tag_problem(ref) == problem
