"""A real Kubernetes for the e2e tests: kind on podman, every image built on this machine.

`tools/kind-cluster.sh up CONFIG` builds (or reuses) the node image and the Slurm images and
creates the cluster; the tests drive it with the kubectl of the same Kubernetes version and
with slurmk8s itself. Nothing here is skipped: a machine that cannot run the cluster fails
with the reason (`bash tools/install-test-deps.sh` installs what is needed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
KIND_CLUSTER = REPO / "tools" / "kind-cluster.sh"
KIND_CACHE = Path(os.environ.get("SLURMK8S_KIND_CACHE", "/var/cache/slurmk8s/kind"))
SLURM_SERIES = "26.05"  # every e2e profile runs on it
# What `slurmk8s images build --slurm 26.05 --registry localhost/slurmk8s` makes.
LOCAL_IMAGES = {"registry": "localhost/slurmk8s", "os": "debian14",
                "database": f"localhost/slurmk8s/mariadb:{SLURM_SERIES}-debian14"}
NAMESPACE = "slurm"

T = TypeVar("T")


def wait_until(check: Callable[[], T | None], timeout: float, what: str, interval: float = 2.0) -> T:
    """Poll check() until it returns something truthy (the shared tests/waiting.py loop)."""
    return wait_for(what, check, deadline_s=timeout, every_s=interval)


def run(*args: str, timeout: float = 300, check: bool = True, env: dict | None = None,
        input: str | None = None) -> subprocess.CompletedProcess:
    """Run a command; its output goes to the test's captured log, and a failure shows stderr."""
    print("$", " ".join(args), flush=True)
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, input=input)
    print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", flush=True)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {result.returncode}: {(result.stderr or result.stdout).strip()[-3000:]}")
    return result


def tool_env() -> dict[str, str]:
    """The environment with kind and the cluster's own kubectl first on PATH."""
    return {**os.environ, "PATH": f"{KIND_CACHE / 'bin' / 'current'}:{os.environ['PATH']}"}


@dataclass(frozen=True)
class Cluster:
    name: str
    kubeconfig: str

    def kubectl(self, *args: str, timeout: float = 120, check: bool = True,
                input: str | None = None) -> subprocess.CompletedProcess:
        return run("kubectl", "--kubeconfig", self.kubeconfig, *args, timeout=timeout, check=check,
                   env=tool_env(), input=input)

    def slurmk8s(self, *args: str, timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        if timeout is None:
            # outlive the command's own --timeout, so that its report of what is not ready is what fails
            own = float(args[args.index("--timeout") + 1]) if "--timeout" in args else 780
            timeout = own + 120
        return run(sys.executable, "-m", "slurmk8s.cli", *args, "--kubeconfig", self.kubeconfig,
                   timeout=timeout, check=check, env={**tool_env(), "PYTHONPATH": str(REPO)})

    def exec(self, pod: str, container: str, *command: str, timeout: float = 120,
             check: bool = True) -> subprocess.CompletedProcess:
        return self.kubectl("-n", NAMESPACE, "exec", pod, "-c", container, "--", *command,
                            timeout=timeout, check=check)

    def jsonpath(self, *args: str, path: str) -> str:
        return self.kubectl(*args, "-o", f"jsonpath={path}").stdout


@contextmanager
def kind_cluster(name: str, config: Path) -> Iterator[Cluster]:
    """A fresh kind cluster from CONFIG with the Slurm images loaded; removed afterwards.

    SLURMK8S_E2E_REUSE=1 (for working on the tests) keeps the cluster afterwards and reuses
    one left by an earlier run.
    """
    env = {**tool_env(), "SLURMK8S_KIND_NAME": name, "SLURMK8S_KIND_SLURM": SLURM_SERIES}
    reuse = os.environ.get("SLURMK8S_E2E_REUSE") == "1"
    kubeconfig = Path(os.environ.get("SLURMK8S_KIND_STATE", "/var/lib/slurmk8s/kind")) / name / "kubeconfig"
    if not (reuse and kubeconfig.is_file()):
        run("bash", str(KIND_CLUSTER), "down", env=env, timeout=300)  # a cluster left by a killed run
        up = run("bash", str(KIND_CLUSTER), "up", str(config), env=env, timeout=3600)
        assert up.stdout.strip().splitlines()[-1] == str(kubeconfig), up.stdout
    try:
        yield Cluster(name, str(kubeconfig))
    finally:
        if not reuse:
            run("bash", str(KIND_CLUSTER), "down", env=env, timeout=300, check=False)


def local_profile(source: Path, target: Path, edit: Callable[[dict], None] | None = None) -> Path:
    """A copy of an example profile that uses the images built here (there is no registry)."""
    profile = yaml.safe_load(source.read_text())
    profile["spec"]["slurm"]["images"] = dict(LOCAL_IMAGES)
    if edit:
        edit(profile)
    target.write_text(yaml.safe_dump(profile, sort_keys=False))
    return target


def new_ssh_key(directory: Path) -> Path:
    """A fresh passphrase-less ed25519 key pair in directory: the private key's path (.pub beside it)."""
    key = directory / "id_ed25519"
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    return key


def job_state(cluster: Cluster, pod: str, container: str, job: str) -> str:
    """The job's state as sacct reports it ('' while slurmdbd has not recorded it)."""
    out = cluster.exec(pod, container, "sacct", "-j", job, "-X", "-n", "-P", "-o", "State", check=False).stdout
    return out.strip().split(" ")[0]


def wait_for_job(cluster: Cluster, pod: str, container: str, job: str, timeout: float) -> str:
    """Wait until the job has ended; returns its final state."""
    return wait_until(lambda: (state := job_state(cluster, pod, container, job))
                      not in ("", "PENDING", "RUNNING", "COMPLETING", "REQUEUED", "CONFIGURING") and state,
                      timeout, f"job {job} to end")


def sinfo_states(cluster: Cluster, pod: str, container: str) -> dict[str, str]:
    """{node: compact state} from sinfo (e.g. 'idle', 'idle~' powered down, 'alloc#' powering up)."""
    out = cluster.exec(pod, container, "sinfo", "-h", "-N", "-o", "%N %t").stdout
    return dict(line.split() for line in out.strip().splitlines() if line.strip())


@contextmanager
def port_forward(cluster: Cluster, target: str, port: int) -> Iterator[int]:
    """`kubectl port-forward TARGET 0:PORT`; yields the local port."""
    proc = subprocess.Popen(["kubectl", "--kubeconfig", cluster.kubeconfig, "-n", NAMESPACE, "port-forward",
                             target, f"0:{port}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=tool_env())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "Forwarding from 127.0.0.1:PORT -> 22"
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not found:
            pytest.fail(f"kubectl port-forward {target}: {line}{proc.stdout.read() if proc.poll() is not None else ''}")
        yield int(found.group(1))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
