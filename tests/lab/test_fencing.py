"""Side-by-side host mode on real Slurm: a shared node's slurmd fenced to its CPUs, memory and GPUs.

The shared node runs slurmd with the files render wrote under hosts/<shape>/ and the
shape's slice applied as cgroup v1 groups (slurmk8s/lab/adapt.py: host_fence_adaptation).
Needs root and the project's 26.05 images (.ci/install-lab.sh).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurmk8s.profile.files import read_profile
from slurmk8s.lab import hostnode, lifecycle, sandbox, teardown, verify
from slurmk8s.profile.sidebyside import format_cpulist, parse_cpulist
from slurmk8s.render import render

from labenv import lab_unavailable
from waiting import wait_for

PROFILE = Path(__file__).resolve().parent / "profiles/side-by-side-lab.yaml"
pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def fenced():
    """The lab booted with the shared node's slurmd started fenced; torn down (and checked clean) after."""
    profile = read_profile(PROFILE)
    bundle = render(profile)
    reason = lab_unavailable(bundle.version)
    if reason:
        pytest.skip(reason)
    shape = profile.side_by_side.shapes[0]
    node = shape.nodes[0]
    lab = lifecycle.boot(bundle, log=lambda line: None)
    try:
        adaptation = hostnode.start_host_node(lab, shape.name, node, shape.gpus, log=lambda line: None)
        _wait_idle(lab, node)
        yield lab, bundle, shape, node, adaptation
    finally:
        left = lifecycle.down(lab.lab_id)
        assert left == [] and teardown.leftovers(lab.lab_id) == [], left


def _wait_idle(lab, node: str, deadline_s: float = 60) -> None:
    log = lab.lab_dir / "hostnodes" / node / "slurmd.log"
    wait_for(f"{node} idle", lambda: lab.exec(["sinfo", "-h", "-n", node, "-o", "%t"], timeout=15).stdout.strip(),
             until=lambda state: state.rstrip("*") == "idle", deadline_s=deadline_s,
             explain=lambda: f"{log}:\n{sandbox.tail(log)}")


def test_the_adaptation_says_what_it_fences(fenced):
    lab, bundle, shape, node, adaptation = fenced
    assert f"slurm_{node}" in adaptation.what and "cpuset.cpus=1" in adaptation.what
    assert adaptation in lab.adaptations


def test_slurm_registers_exactly_its_share(fenced):
    lab, bundle, shape, node, _ = fenced
    out = lab.exec(["scontrol", "-o", "show", "node", node], timeout=15).stdout
    # The whole node is declared; everything not Slurm's is CpuSpecList, so jobs can use exactly Slurm's CPUs.
    assert re.search(rf"\bCPUTot={len(shape.cpus)}\b", out), out
    assert re.search(rf"\bCPUEfctv={len(shape.slurm.cpus)}\b", out), out
    assert re.search(rf"\bCPUSpecList={format_cpulist(set(shape.cpus) - set(shape.slurm.cpus))}\b", out), out
    assert re.search(r"\bRealMemory=1024\b", out), out
    assert "gpu:tesla:1" in out, out


def test_a_job_runs_only_on_slurms_cpus(fenced):
    lab, bundle, shape, node, _ = fenced
    done = lab.exec(["srun", "-p", "shared", "-w", node, "grep", "Cpus_allowed_list", "/proc/self/status"], timeout=60)
    assert done.returncode == 0, done.stderr
    allowed = set(parse_cpulist(done.stdout.split()[-1]))
    assert allowed and allowed <= set(shape.slurm.cpus), done.stdout


def test_a_job_beyond_its_memory_ends_out_of_memory(fenced):
    lab, bundle, shape, node, _ = fenced
    # tail keeps the whole 600 MiB line in memory: three times the job's 200M.
    job = verify.submit(lab, "-p", "shared", "-w", node, "--mem=200M", "--wrap", "head -c 600M /dev/zero | tail")
    state = verify.wait_state(lab, job, {"COMPLETED", "FAILED", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "TIMEOUT"})
    assert state == "OUT_OF_MEMORY", f"job {job} {state}"


def test_kubernetes_gpu_cannot_be_opened_by_a_slurm_job(fenced):
    lab, bundle, shape, node, _ = fenced
    out = lab.exec(["srun", "-p", "shared", "-w", node, "--gres=gpu:1", "sh", "-c", verify.GPU_PROBE], timeout=60)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith("/dev/"))
    slurm_gpu, kube_gpu = shape.slurm.gpus[0], shape.kubernetes.gpus[0]
    assert "No such device or address" in lines[f"/dev/nvidia{slurm_gpu}"], out.stdout  # allowed: no driver behind it
    assert "Operation not permitted" in lines[f"/dev/nvidia{kube_gpu}"], out.stdout  # denied by the fence


def test_even_without_gres_a_job_cannot_open_kubernetes_gpu(fenced):
    lab, bundle, shape, node, _ = fenced
    out = lab.exec(["srun", "-p", "shared", "-w", node, "sh", "-c", verify.GPU_PROBE], timeout=60)
    kube_gpu = shape.kubernetes.gpus[0]
    assert f"/dev/nvidia{kube_gpu} " in out.stdout and "Operation not permitted" in \
        next(line for line in out.stdout.splitlines() if line.startswith(f"/dev/nvidia{kube_gpu} ")), out.stdout
