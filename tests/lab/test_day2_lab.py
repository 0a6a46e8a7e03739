"""In-place reconfigure on real Slurm (22.05 munge, 24.11 and 26.05 auth/slurm): configless slurmd
gets a partition edit pushed by `scontrol reconfigure` while a job runs, and no container restarts
(docs/day2.md). From 23.11 slurmd takes a reconfigure by re-executing itself in its process, so its
SlurmdStartTime moves; the container's process and the job's steps stay.

The lab's kubelet writes a ConfigMap volume once; the edit here swaps the volume's ..data link
as the kubelet's atomic writer does on an update, in the controller pod only: the slurmd pods
hold no Slurm files.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from slurmk8s import naming
from slurmk8s.lab import lifecycle

import slurmfacts
from labenv import boot_or_skip, down_and_check_clean
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {
    "kind-dev-26.05": ROOT / "profiles/kind-dev.yaml",
    "legacy-munge-22.05": ROOT / "profiles/legacy-munge.yaml",
    "gpu-24.11": ROOT / "tests/lab/profiles/gpu-2411.yaml",
}
NEW_MAX_TIME = "2-03:00:00"

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module", params=sorted(PROFILES), ids=sorted(PROFILES))
def booted(request):
    lab, bundle = boot_or_skip(PROFILES[request.param])
    yield lab, bundle
    down_and_check_clean(lab)


def update_config_volume(target: Path, files: dict[str, str]) -> None:
    """What the kubelet's atomic writer does on a ConfigMap update: a new timestamped dir, then ..data swapped."""
    stamp = Path(tempfile.mkdtemp(prefix="..update.", dir=target))
    os.chmod(stamp, 0o755)
    for name, text in files.items():
        (stamp / name).write_text(text)
        os.chmod(stamp / name, 0o444)
    link = target / "..data_tmp"
    link.symlink_to(stamp.name)
    os.replace(link, target / "..data")
    for name in files:
        if not (target / name).is_symlink():
            (target / name).symlink_to(f"..data/{name}")


def pool_pods(lab) -> list:
    return [p for p in lab.pods if p.pool]


def slurmd_pids(lab) -> dict[str, int]:
    """pod -> pid of its slurmd container's process (what the kubelet would see restart)."""
    pods = lifecycle.load_state(lab.lab_id)["pods"]
    return {p.name: pods[p.name]["containers"]["slurmd"] for p in pool_pods(lab)}


def job_state(lab, job: str) -> str:
    """The job's state while queued or running ('' once it has left the queue)."""
    return slurmfacts.run(lab, "squeue", "-h", "-j", job, "-o", "%T").strip()


def test_a_partition_edit_reaches_every_configless_slurmd_without_a_restart(booted):
    lab, bundle = booted
    # configless: the slurmd pods mount no Slurm config, yet their nodes registered
    assert all("slurm-config" not in {v.name for v in p.volumes} for p in pool_pods(lab))
    nodes = [p.slurm_node for p in pool_pods(lab)]
    assert nodes and all(slurmfacts.node_states(lab)[n].startswith("idle") for n in nodes)
    pids = slurmd_pids(lab)

    files = dict(lab.slurm_files)
    first = re.search(r"^PartitionName=(\S+) .*$", files["slurm.conf"], re.M)
    partition = first.group(1)
    job = slurmfacts.run(lab, "sbatch", "--parsable", "-p", partition, "-N1", "--wrap", "sleep 20").strip()
    wait_for(f"job {job} to run", lambda: job_state(lab, job) == "RUNNING", deadline_s=60)
    files["slurm.conf"] = files["slurm.conf"].replace(
        first.group(0), re.sub(r"MaxTime=\S+", f"MaxTime={NEW_MAX_TIME}", first.group(0)))
    controller = lab.pod(naming.pod_name(naming.component_name(bundle.cluster, naming.CONTROLLER), 0))
    update_config_volume(lab.volume_dir(controller, "slurm-config"), files)

    done = lab.exec(["scontrol", "reconfigure"], pod=controller.name, timeout=60)
    assert done.returncode == 0, done.stderr
    wait_for(f"partition {partition} to have MaxTime={NEW_MAX_TIME}",
             lambda: f"MaxTime={NEW_MAX_TIME}" in slurmfacts.run(lab, "scontrol", "-o", "show", "partition", partition),
             deadline_s=60)
    for pod in pool_pods(lab):
        wait_for(f"{pod.name}'s configless slurm.conf to have the edit",
                 lambda: f"MaxTime={NEW_MAX_TIME}" in lifecycle.exec_in_lab(
                     lab.lab_id, ["cat", "/run/slurm/conf/slurm.conf"], pod=pod.name).stdout, deadline_s=60)
    assert slurmd_pids(lab) == pids and all(os.path.exists(f"/proc/{pid}") for pid in pids.values())
    assert job_state(lab, job) == "RUNNING"
    # slurmctld keeps an ended job for MinJobAge (300 s): its final state without accounting
    wait_for(f"job {job} to complete", lambda: "JobState=COMPLETED" in slurmfacts.run(
        lab, "scontrol", "-o", "show", "job", job), deadline_s=90)
    states = slurmfacts.node_states(lab)
    assert all(states[n].startswith("idle") for n in nodes), states


def test_the_prestop_hook_marks_the_node_down_and_the_next_start_resumes_it(booted):
    """The lab runs no lifecycle hooks (lab/adapt.py): the test runs the rendered ones as the kubelet would,
    preStop before stopping slurmd and postStart after starting it again."""
    lab, bundle = booted
    pod = pool_pods(lab)[0]
    template = next(o for o in bundle.objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == pod.owner)
    hooks = template["spec"]["template"]["spec"]["containers"][0]["lifecycle"]
    wait_for(f"{pod.slurm_node} to be idle", lambda: slurmfacts.node_states(lab)[pod.slurm_node] == "idle",
             deadline_s=60)

    stop = lifecycle.exec_in_lab(lab.lab_id, hooks["preStop"]["exec"]["command"], pod=pod.name, timeout=60)
    assert stop.returncode == 0, stop.stderr
    info = slurmfacts.node(lab, pod.slurm_node)
    assert info["State"].startswith("DOWN"), info
    assert "pod stopping" in slurmfacts.run(lab, "scontrol", "show", "node", pod.slurm_node)

    lab.restart_container(pod.name, "slurmd")
    start = lifecycle.exec_in_lab(lab.lab_id, hooks["postStart"]["exec"]["command"], pod=pod.name, timeout=200)
    assert start.returncode == 0, start.stderr
    wait_for(f"{pod.slurm_node} to be idle again", lambda: slurmfacts.node_states(lab)[pod.slurm_node] == "idle",
             deadline_s=60)
    assert "pod stopping" not in slurmfacts.run(lab, "scontrol", "show", "node", pod.slurm_node)
