"""A declared user on kind: ssh in with the profile's key, a job runs as that user, its output shows on
login through the shared /home, and sacct names the user (spec.identity, spec.volumes, host key Secret).
Then a user and a key added to the profile reach the running pods without a restart (last, as it
changes the cluster the other tests use).

`python -m pytest tests/e2e/test_identity.py -m e2e` (its own kind cluster, slurmk8s-identity).

kind's local-path class gives ReadWriteOnce claims only: every pod that mounts /home lands on the
node that holds it (ReadWriteOnce is per node), so the pool has one 1-CPU node here.
"""

from __future__ import annotations

import base64
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import (
    NAMESPACE, REPO, Cluster, kind_cluster, local_profile, new_ssh_key, port_forward, run, sinfo_states, wait_for_job,
    wait_until,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

LOGIN, CONTAINER = "ident-login-0", "sshd"


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    with kind_cluster("slurmk8s-identity", REPO / "kind-configs" / "dev.yaml") as c:
        yield c


@pytest.fixture(scope="module")
def ada_key(tmp_path_factory) -> Path:
    return new_ssh_key(tmp_path_factory.mktemp("ssh"))


@pytest.fixture(scope="module")
def ident_profile(ada_key: Path, tmp_path_factory) -> Path:
    def declare(profile: dict) -> None:
        profile["metadata"]["name"] = "ident"
        spec = profile["spec"]
        spec["pools"][0].update(replicas=1, minReplicas=1, maxReplicas=1)
        spec["identity"] = {"users": [{"name": "ada", "uid": 2001,
                                       "sshKeys": [ada_key.with_suffix(".pub").read_text().strip()]}]}
        spec["volumes"] = [{"name": "home", "mountPath": "/home", "claim": {"size": "1Gi", "accessMode": "ReadWriteOnce"}}]
    return local_profile(REPO / "profiles" / "kind-dev.yaml", tmp_path_factory.mktemp("ident") / "ident.yaml", declare)


@pytest.fixture(scope="module")
def ident(cluster: Cluster, ident_profile: Path) -> Cluster:
    up = cluster.slurmk8s("up", str(ident_profile), "--timeout", "900")
    assert "cluster ident is ready" in up.stdout
    yield cluster
    cluster.slurmk8s("down", str(ident_profile), "--delete-data", "--yes", check=False)


def ssh(port: int, key: Path, user: str, command: str, known_hosts: Path | None = None) -> subprocess.CompletedProcess:
    checking = ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}"] if known_hosts else \
        ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    return run("ssh", "-i", str(key), "-p", str(port), "-o", "BatchMode=yes", *checking, "-o", "LogLevel=ERROR",
               "-o", "ConnectTimeout=20", f"{user}@127.0.0.1", command, timeout=120)


class TestDeclaredUser:
    def test_ada_logs_in_with_her_key_as_herself(self, ident: Cluster, ada_key: Path) -> None:
        with port_forward(ident, "svc/ident-login", 22) as port:
            out = ssh(port, ada_key, "ada", "id -un; id -u; echo $HOME; stat -c '%U %a' $HOME").stdout.split("\n")
        assert out[:4] == ["ada", "2001", "/home/ada", "ada 700"], out

    def test_ada_job_runs_as_ada_writes_home_and_sacct_names_her(self, ident: Cluster, ada_key: Path) -> None:
        with port_forward(ident, "svc/ident-login", 22) as port:
            job = ssh(port, ada_key, "ada", "cd && sbatch --parsable -o job.out --wrap 'id -un; id -u; hostname'"
                      ).stdout.strip()
            assert job.isdigit(), job
            assert wait_for_job(ident, LOGIN, CONTAINER, job, timeout=300) == "COMPLETED"
            # The file the job wrote on the slurmd pod, read on login through the shared /home.
            output = wait_for("the job's output on login",
                              lambda: ssh(port, ada_key, "ada", "cat ~/job.out 2>/dev/null || true").stdout.split(),
                              deadline_s=60, every_s=2)
            # As ada: root in the sshd container holds no DAC_OVERRIDE, so it cannot enter her 0700 home.
            owner = ssh(port, ada_key, "ada", "stat -c %U ~/job.out").stdout.strip()
        assert output == ["ada", "2001", "ident-cpu-0"], output
        assert owner == "ada"
        user = ident.exec(LOGIN, CONTAINER, "sacct", "-j", job, "-X", "-n", "-P", "-o", "User,State").stdout.strip()
        assert user == "ada|COMPLETED"

    def test_the_host_key_is_the_secrets_and_survives_a_new_pod(self, ident: Cluster, ada_key: Path,
                                                                tmp_path: Path) -> None:
        secret = ident.jsonpath("-n", NAMESPACE, "get", "secret", "ident-ssh-host-keys",
                                path="{.data.ssh_host_ed25519_key}")
        private = tmp_path / "host_key"
        private.write_bytes(base64.b64decode(secret))
        private.chmod(0o600)
        public = run("ssh-keygen", "-y", "-f", str(private)).stdout.split()[:2]
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:* {' '.join(public)}\n")
        for _ in range(2):  # this pod, then its replacement: the same key both times
            with port_forward(ident, "svc/ident-login", 22) as port:
                known.write_text(f"[127.0.0.1]:{port} {' '.join(public)}\n")
                assert ssh(port, ada_key, "ada", "id -un", known_hosts=known).stdout.strip() == "ada"
            uid = ident.jsonpath("-n", NAMESPACE, "get", "pod", LOGIN, path="{.metadata.uid}")
            ident.kubectl("-n", NAMESPACE, "delete", "pod", LOGIN, "--wait=true", timeout=180)

            def replaced_and_ready() -> bool | None:
                got = ident.kubectl("-n", NAMESPACE, "get", "pod", LOGIN, "-o", "jsonpath={.metadata.uid} "
                                    "{.status.conditions[?(@.type==\"Ready\")].status}", check=False).stdout.split()
                return (len(got) == 2 and got[0] != uid and got[1] == "True") or None
            wait_until(replaced_and_ready, 300, "the login pod's replacement to be Ready")

    def test_job_users_cannot_write_where_root_reads(self, ident: Cluster, ada_key: Path) -> None:
        probe = ("for p in /etc/slurm/plugstack.conf /etc/passwd /var/spool/slurmd/x; do "
                 "touch $p 2>/dev/null && echo wrote $p; done; stat -c '%a' /etc/slurm /var/spool/slurmd")
        with port_forward(ident, "svc/ident-login", 22) as port:
            out = ssh(port, ada_key, "ada", f"srun sh -c \"{probe}\"").stdout.split()
        assert out == ["755", "755"], out


# docs/users-and-storage.md, "Changes without restarts" (identity.RELOAD_BOUND_SECONDS): the kubelet's
# sync (at most 90 s) and one pass of the identity-reload sidecar (5 s); the margin is for kubectl exec
# on a loaded machine.
RELOAD_BOUND_S, MARGIN_S = 100, 80
CPU_POD = "ident-cpu-0"


def running_pod_uids(cluster: Cluster) -> dict[str, str]:
    """name -> uid of every running pod of the ident cluster."""
    items = yaml.safe_load(cluster.kubectl("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/instance=ident",
                                           "-o", "yaml").stdout)["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items if p["status"].get("phase") == "Running"}


class TestChangesWithoutRestarts:
    def test_a_new_user_and_key_reach_login_and_slurmd_without_restarting_them_or_draining(
            self, ident: Cluster, ident_profile: Path, tmp_path: Path) -> None:
        bob_key = new_ssh_key(tmp_path)
        profile = yaml.safe_load(ident_profile.read_text())
        profile["spec"]["identity"]["users"].append(
            {"name": "bob", "uid": 2002, "sshKeys": [bob_key.with_suffix(".pub").read_text().strip()]})
        edited = tmp_path / "ident.yaml"
        edited.write_text(yaml.safe_dump(profile, sort_keys=False))
        before = running_pod_uids(ident)
        assert {LOGIN, CPU_POD} <= set(before), before

        diff = ident.slurmk8s("diff", str(edited), check=False)
        assert diff.returncode == 1, diff.stdout  # changes, as kubectl diff
        lines = diff.stdout.splitlines()
        assert ("in place (login and slurmd pods reload them within 100 s, no restart): "
                "user bob added, group bob added, ssh keys of bob added") in lines, lines
        # slurmctld and slurmdbd resolve a job's user and read the users at start only: they restart (jobs survive).
        restarted = sorted(line.split()[1] for line in lines if line.startswith("restarts:"))
        assert restarted == ["ident-accounting-0", "ident-controller-0"], lines

        up = ident.slurmk8s("up", str(edited), "--timeout", "600").stdout.splitlines()
        deadline = time.monotonic() + RELOAD_BOUND_S + MARGIN_S  # the ConfigMap is written by now
        assert sorted(line.split()[1] for line in up if line.startswith("restarts:")) == restarted, up

        def left() -> float:
            return max(1.0, deadline - time.monotonic())
        bob = "bob:x:2002:2002::/home/bob:/bin/bash"
        for pod, container in ((LOGIN, CONTAINER), (CPU_POD, "slurmd")):
            wait_until(lambda: ident.exec(pod, container, "getent", "passwd", "bob", check=False).stdout.strip() == bob
                       or None, left(), f"getent passwd bob in {pod}")
            group = ident.exec(pod, container, "getent", "group", "bob").stdout.strip()
            assert group == "bob:x:2002:", (pod, group)
        # Root in the sshd container has no CAP_DAC_OVERRIDE: it sees the file's owner and mode, not its
        # content; the key itself is proven by bob's ssh login below.
        wait_until(lambda: ident.exec(LOGIN, CONTAINER, "stat", "-c", "%U %a", "/etc/ssh/authorized_keys/bob",
                                      check=False).stdout.strip() == "bob 600" or None,
                   left(), "bob's key file in login's authorized_keys")
        with port_forward(ident, "svc/ident-login", 22) as port:
            out = ssh(port, bob_key, "bob", "id -un; id -u; echo $HOME; stat -c '%U %a' $HOME").stdout.split("\n")
            assert out[:4] == ["bob", "2002", "/home/bob", "bob 700"], out  # his home made by the sidecar
            ran = ssh(port, bob_key, "bob", "srun -N1 -t 2 id -un").stdout.split()
        assert ran == ["bob"], ran  # slurmctld knows him: the job runs as him

        after = running_pod_uids(ident)
        assert {n: u for n, u in after.items() if n in (LOGIN, CPU_POD)} == \
            {n: u for n, u in before.items() if n in (LOGIN, CPU_POD)}  # login kept its sessions, slurmd its jobs
        states = sinfo_states(ident, LOGIN, CONTAINER)
        assert states and not [n for n, s in states.items() if s.startswith(("drain", "drng"))], states
