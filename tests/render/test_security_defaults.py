"""Security defaults of the rendered cluster (issue 26): root on login, sshd, sackd, ephemeral storage."""

from __future__ import annotations

import pytest

from slurmk8s.errors import ProfileError
from slurmk8s.profile import load_profile
from slurmk8s.render import render
from slurmk8s.render.k8s.security import accepted_findings
from slurmk8s.render.restarts import ALL, RESTART_KEYS, restart_settings

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEY ada@example.org"
BASE = """\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: demo}
spec:
  login: {replicas: 1, authorizedKeys: ["%s"]}
  pools:
    - {name: cpu, replicas: 1, cpus: 2, memory: 2Gi}
""" % KEY
USERS = BASE + """\
  identity:
    users:
      - {name: ada, uid: 2001, sshKeys: ["%s"]}
""" % KEY
GROUPS_ONLY = BASE + """\
  identity:
    groups:
      - {name: hpc, gid: 3000}
"""


def bundle_of(text: str):
    return render(load_profile(text.encode()))


def slurm_conf(text: str) -> str:
    return bundle_of(text).find("ConfigMap", "demo-slurm-config")["data"]["slurm.conf"]


def sshd_config(text: str) -> str:
    return bundle_of(text).find("ConfigMap", "demo-login-config")["data"]["sshd_config"]


def login_containers(text: str) -> dict[str, dict]:
    pod = bundle_of(text).find("StatefulSet", "demo-login")["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"] + pod["initContainers"]}


@pytest.mark.parametrize(("text", "lines"), [
    (USERS, ["DisableRootJobs=YES"]),
    (BASE, []),  # root is the only account: the quickstart and `lab verify` submit as root
    (GROUPS_ONLY, []),
    (USERS.replace("spec:\n", "spec:\n  slurm: {config: {DisableRootJobs: false}}\n"), ["DisableRootJobs=NO"]),
], ids=["users", "nobody", "groups-only", "profile-says-no"])
def test_root_runs_no_jobs_once_users_are_declared(text: str, lines: list[str]) -> None:
    assert [line for line in slurm_conf(text).splitlines() if line.startswith("DisableRootJobs")] == lines


def test_disable_root_jobs_is_taken_in_place() -> None:
    """slurmctld checks it at submission and re-reads it on `scontrol reconfigure`: no pod restarts for it."""
    assert "disablerootjobs" not in RESTART_KEYS
    conf = slurm_conf(USERS)
    assert not [s for daemon in ALL for s in restart_settings(conf, daemon, "26.05") if "DisableRootJobs" in s]


@pytest.mark.parametrize(("text", "root_login"), [(USERS, "no"), (BASE, "prohibit-password")], ids=["users", "nobody"])
def test_sshd_lets_root_in_only_without_declared_users_and_forwards_nothing(text: str, root_login: str) -> None:
    config = sshd_config(text).splitlines()
    assert [line for line in config if line.startswith("PermitRootLogin")] == [f"PermitRootLogin {root_login}"]
    for option in ("AllowTcpForwarding", "AllowStreamLocalForwarding", "AllowAgentForwarding", "X11Forwarding"):
        assert f"{option} no" in config


def test_sshd_holds_only_what_privilege_separation_needs_and_cannot_escalate() -> None:
    security = login_containers(BASE)["sshd"]["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "SETUID", "SETGID", "SYS_CHROOT",
                                                                 "AUDIT_WRITE", "KILL", "NET_BIND_SERVICE"]}


def test_login_sackd_runs_as_slurm_user_without_capabilities() -> None:
    assert login_containers(BASE)["sackd"]["securityContext"] == {
        "runAsUser": 401, "runAsGroup": 401, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]}}


def test_login_accepts_no_privilege_escalation_or_default_capability_finding() -> None:
    findings = accepted_findings(bundle_of(BASE).find("StatefulSet", "demo-login"))
    assert not {"CKV_K8S_20", "CKV_K8S_28", "CKV_K8S_37"} & set(findings)


def pool_pod(text: str) -> dict:
    return bundle_of(text).find("StatefulSet", "demo-cpu")["spec"]["template"]["spec"]


@pytest.mark.parametrize(("text", "tmp", "storage"), [
    (BASE, "10Gi", "12Gi"),
    (BASE.replace("memory: 2Gi}", "memory: 2Gi, tmpSize: 500Gi}"), "500Gi", "502Gi"),
    (BASE.replace("memory: 2Gi}", "memory: 2Gi, tmpSize: 1500M}"), "1500M", "3478Mi"),
], ids=["default", "500Gi", "decimal"])
def test_jobs_tmp_is_a_sized_emptydir_and_slurmd_reserves_its_disk(text: str, tmp: str, storage: str) -> None:
    pod = pool_pod(text)
    assert {"name": "tmp", "emptyDir": {"sizeLimit": tmp}} in pod["volumes"]
    slurmd = pod["containers"][0]
    assert {"name": "tmp", "mountPath": "/tmp"} in slurmd["volumeMounts"]
    assert slurmd["resources"]["requests"]["ephemeral-storage"] == storage
    assert slurmd["resources"]["limits"]["ephemeral-storage"] == storage
    init = pod["initContainers"][0]
    assert {"name": "tmp", "mountPath": "/tmp"} in init["volumeMounts"]
    assert "chmod 1777 /tmp\n" in init["command"][-1]  # sticky, as /tmp must be


def test_dev_shm_is_bounded_to_half_the_pods_memory() -> None:
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in pool_pod(BASE)["volumes"]


def test_tmp_size_must_be_a_quantity() -> None:
    with pytest.raises(ProfileError, match=r"spec\.pools\[0\]\.tmpSize"):
        load_profile(BASE.replace("memory: 2Gi}", "memory: 2Gi, tmpSize: lots}").encode())


def test_slurmrestd_gets_no_slurm_key() -> None:
    """A client under auth/slurm (it sends users' JWTs), uid 65534: the key could only leak from its pod."""
    pod = bundle_of(BASE.replace("spec:\n", "spec:\n  restapi: {enabled: true}\n")).find(
        "Deployment", "demo-restapi")["spec"]["template"]["spec"]
    assert "auth-key" not in [v["name"] for v in pod["volumes"]]
    init = pod["initContainers"][0]
    assert "auth-key" not in [m["name"] for m in init["volumeMounts"]]
    assert "slurm.key" not in init["command"][-1]
