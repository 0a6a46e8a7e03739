"""docs/kind-e2e.md's quick start, run as written, on a kind cluster of its own (its first command
creates it, so no other module's cluster can be reused); then, on that cluster, `up` of profiles
whose pods can never start: an image no registry here serves, a kept Secret without the key the
pods read. Each `up` ends within the fail-fast bound, names the pod, container, reason and message,
exits 1 and leaves its objects as applied (issue 32).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from slurmk8s.kube.wait import UNHEALABLE_AFTER
from tests.e2e.conftest import KIND_CLUSTER, REPO, SLURM_SERIES, Cluster, run, tool_env
from tests.test_docs import section_blocks

pytestmark = pytest.mark.e2e

DOC = REPO / "docs" / "kind-e2e.md"
NAME = "slurmk8s-quickstart"
# One poll (2 s) after the grace, plus the poll's own requests: generous for a loaded 2-core host.
SEEN_BOUND = UNHEALABLE_AFTER + 10
# Apply, scheduling and the first failed pull or container start come before the condition is seen.
UP_BOUND = 240


def shell_env(directory: Path) -> dict[str, str]:
    """A reader's shell: `slurmk8s` is this checkout's, kind's kubectl first on PATH; as root without
    sudo installed, `sudo` runs the command as it is (the docs are written for a user with sudo)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    shims = {"slurmk8s": f'#!/bin/sh\nexec "{sys.executable}" -m slurmk8s.cli "$@"\n'}
    if shutil.which("sudo") is None and os.geteuid() == 0:
        shims["sudo"] = '#!/bin/sh\nexec "$@"\n'
    for tool, text in shims.items():
        (bin_dir / tool).write_text(text)
        (bin_dir / tool).chmod(0o755)
    env = tool_env()
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}", "PYTHONPATH": str(REPO), "SLURMK8S_KIND_NAME": NAME,
            "SLURMK8S_KIND_SLURM": SLURM_SERIES}


def shell(commands: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """The commands in one bash, from the repository's root, stopping at the first that fails."""
    script = "set -euo pipefail\n" + "\n".join(commands)
    print("$ bash -c", repr(script), flush=True)
    result = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=timeout)
    print(result.stdout[-6000:], result.stderr[-6000:], sep="\n", flush=True)
    return result


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory):
    """(the quick start's result, the cluster it made); its clean-up block runs at the end."""
    start, clean_up = section_blocks(DOC, "### Quick start")
    env = shell_env(tmp_path_factory.mktemp("shell"))
    run("bash", str(KIND_CLUSTER), "down", env=env, timeout=300, check=False)  # a cluster left by a killed run
    kubeconfig = Path(os.environ.get("SLURMK8S_KIND_STATE", "/var/lib/slurmk8s/kind")) / NAME / "kubeconfig"
    try:
        # the block as written, then one line that shows what it left in $KUBECONFIG
        result = shell(start + ['echo "KUBECONFIG=$KUBECONFIG"'], env, timeout=3600)
        yield result, Cluster(NAME, str(kubeconfig))
    finally:
        shell(clean_up, {**env, "KUBECONFIG": str(kubeconfig)}, timeout=900)  # "in the same shell"
        run("bash", str(KIND_CLUSTER), "down", env=env, timeout=300, check=False)  # whatever a failure left


def test_the_quick_start_runs_as_written(quick_start) -> None:
    result, cluster = quick_start
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout.splitlines()
    assert out[-1] == f"KUBECONFIG={cluster.kubeconfig}"
    assert "cluster dev is ready" in out
    hostnames = out[-3:-1]  # srun -N2 hostname: one line per node
    assert len(set(hostnames)) == 2 and all(re.fullmatch(r"[\w.-]+", h) for h in hostnames), out[-6:]
    # up's wait, not on a terminal: timestamped lines of what it waits for (issue 24 item 24)
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ pods ready: ", result.stderr, re.MULTILINE), result.stderr


def small_profile(directory: Path, name: str, namespace: str) -> Path:
    """profiles/kind-dev.yaml as another cluster in its own namespace, with no slurmd pod to spare the nodes."""
    profile = yaml.safe_load((REPO / "profiles" / "kind-dev.yaml").read_text())
    profile["metadata"].update(name=name, namespace=namespace)
    profile["spec"]["pools"][0].update(replicas=0)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return path


def failing_up(cluster: Cluster, profile: Path, *options: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = cluster.slurmk8s("up", str(profile), "--timeout", "900", *options, check=False)
    return result, time.monotonic() - started


def assert_fails_fast(result: subprocess.CompletedProcess, elapsed: float, condition: str) -> None:
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "pods cannot start, and waiting will not help" in result.stderr, result.stderr[-3000:]
    seen = int(re.search(r"waiting will not help \(seen for (\d+) s\)", result.stderr).group(1))
    assert UNHEALABLE_AFTER <= seen <= SEEN_BOUND, result.stderr[-3000:]
    assert elapsed < UP_BOUND, f"up took {elapsed:.0f} s"
    assert re.search(condition, result.stderr, re.MULTILINE), result.stderr[-3000:]
    print(f"up failed after {elapsed:.0f} s, the condition seen for {seen} s", flush=True)


def test_up_of_an_image_no_registry_here_serves_fails_fast_with_what_to_do(quick_start, tmp_path) -> None:
    """The profiles' default images are Slinky's on ghcr.io: unresolvable here (no network)."""
    _, cluster = quick_start
    profile = small_profile(tmp_path, "pull", "ff-pull")
    result, elapsed = failing_up(cluster, profile)
    try:
        assert_fails_fast(result, elapsed, r"^  pod pull-\S+ container \S+: (ErrImagePull|ImagePullBackOff): .+")
        assert re.search(r"^  images: ghcr\.io/slinkyproject/[^\n]* cannot be pulled here; build them with "
                         r"`slurmk8s images build` and set spec\.slurm\.images", result.stderr, re.MULTILINE)
        # nothing undone, as helm --wait leaves a failed release
        names = cluster.jsonpath("-n", "ff-pull", "get", "statefulsets", path="{.items[*].metadata.name}").split()
        assert "pull-controller" in names, names
    finally:
        cluster.slurmk8s("down", str(profile), "--delete-data", "--yes", timeout=600, check=False)


def test_up_with_a_kept_secret_that_lacks_the_key_fails_fast(quick_start, tmp_path) -> None:
    """A Secret `up` would make, made beforehand by hand with the wrong key: `up` keeps it (it never
    overwrites a Secret), and MariaDB's container cannot be created."""
    _, cluster = quick_start
    profile = small_profile(tmp_path, "nokey", "ff-key")
    cluster.kubectl("create", "namespace", "ff-key")
    cluster.kubectl("-n", "ff-key", "create", "secret", "generic", "nokey-db-password", "--from-literal=passwd=x")
    result, elapsed = failing_up(cluster, profile, "--images", "local")
    try:
        assert re.search(r"; secrets: \d+ created, 1 kept$", result.stdout, re.MULTILINE), result.stdout
        assert_fails_fast(result, elapsed, r"^  pod nokey-mariadb-0 container \S+: CreateContainerConfigError: "
                                           r"couldn't find key password in Secret ff-key/nokey-db-password")
        assert "the pod names a Secret or ConfigMap, or a key of one, that does not exist" in result.stderr
    finally:
        cluster.slurmk8s("down", str(profile), "--delete-data", "--yes", timeout=600, check=False)
        cluster.kubectl("delete", "namespace", "ff-key", "--wait=false", check=False)
