"""Side-by-side host mode in the lab: a shared node's slurmd, fenced as its systemd slice would fence it.

In host mode slurmd is not in the bundle's objects: it runs on the node's own OS with the
files render wrote under hosts/<shape>/. The lab runs it in one more sandbox named after
the node, with the cluster's slurm.conf and the shape's cgroup.conf/gres.conf, and applies
the shape's rendered slice (AllowedCPUs, MemoryMax, device policy) as cgroup v1 groups:
see adapt.host_fence_adaptation for why and how that differs from a real node.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from slurmk8s.lab import rootfs, sandbox
from slurmk8s.lab.hosttools import CGROUP_ROOT
from slurmk8s.lab.adapt import Adaptation, host_fence_adaptation, v1_cgroup_conf
from slurmk8s.lab.lifecycle import CLIENT_PATH, Lab
from slurmk8s.lab.errors import LabError
from slurmk8s.lab.files import write_file

NVIDIA_MAJOR = 195
# Far above the pods' indices, so the host's address never collides with a pod's.
HOST_INDEX_BASE = 200
# A systemd host has these as tmpfs; the rest of its OS is the slurmd image's files.
PRIVATE_DIRS = {"/run": "mode=755", "/tmp": "mode=1777"}


@dataclass(frozen=True)
class HostFence:
    """A shape's rendered slice, read back from the bundle."""

    cpus: str            # AllowedCPUs
    memory_bytes: int    # MemoryMax
    allowed_gpus: tuple[int, ...] | None  # DeviceAllow'ed /dev/nvidiaN; None: no device policy


def read_fence(slice_text: str) -> HostFence:
    """AllowedCPUs, MemoryMax and the GPU device policy of a rendered slurm.slice."""
    cpus = re.search(r"^AllowedCPUs=(\S+)$", slice_text, re.M)
    mem = re.search(r"^MemoryMax=(\d+)$", slice_text, re.M)
    if not cpus or not mem:
        raise LabError("the rendered slurm.slice has no AllowedCPUs=/MemoryMax=")
    policy = "DevicePolicy=closed" in slice_text
    gpus = tuple(int(g) for g in re.findall(r"^DeviceAllow=/dev/nvidia([0-9]+) ", slice_text, re.M))
    return HostFence(cpus.group(1), int(mem.group(1)), gpus if policy else None)


def create_fence_groups(node: str, fence: HostFence, node_gpus: tuple[int, ...]) -> list[Path]:
    """slurm_<node> in cpuset, memory and devices (cgroup v1) holding the slice's limits; returns the dirs."""
    root = CGROUP_ROOT
    cpuset, memory, devices = (root / c / f"slurm_{node}" for c in ("cpuset", "memory", "devices"))
    for d in (cpuset, memory, devices):
        d.mkdir(exist_ok=True)
    (cpuset / "cpuset.mems").write_text((root / "cpuset" / "cpuset.mems").read_text())
    (cpuset / "cpuset.cpus").write_text(fence.cpus)
    (memory / "memory.limit_in_bytes").write_text(str(fence.memory_bytes))
    if fence.allowed_gpus is not None:
        for g in node_gpus:
            if g not in fence.allowed_gpus:
                (devices / "devices.deny").write_text(f"c {NVIDIA_MAJOR}:{g} rwm")
    return [cpuset, memory, devices]


def start_host_node(lab: Lab, shape: str, node: str, node_gpus: tuple[int, ...],
                    log: Callable[[str], None] = print) -> Adaptation:
    """Boot the shared node `node` of `shape` with its rendered host files; the adaptation is printed and recorded."""
    files = lab.bundle.files
    d = f"hosts/{shape}"
    fence = read_fence(files[f"{d}/systemd/slurm.slice"])
    host_dir = lab.lab_dir / "hostnodes" / node
    conf = host_dir / "conf"
    write_file(conf / "slurm.conf", lab.slurm_files["slurm.conf"], 0o644)
    write_file(conf / "cgroup.conf", v1_cgroup_conf(files[f"{d}/cgroup.conf"]), 0o644)
    if f"{d}/gres.conf" in files:
        write_file(conf / "gres.conf", files[f"{d}/gres.conf"], 0o644)
    key = next(s for s in lab.bundle.secrets if s.kind in ("slurm.key", "munge.key"))
    if key.kind != "slurm.key":
        raise LabError("the lab's host-mode node supports auth/slurm only")
    write_file(conf / "slurm.key", (lab.lab_dir / "secrets" / key.name / key.key).read_bytes(), 0o600)
    groups = create_fence_groups(node, fence, node_gpus)
    index = HOST_INDEX_BASE + sum(1 for p in lab.network.pods.values() if p.index >= HOST_INDEX_BASE)
    box = lab.network.add_pod(node, node, devices=sandbox.fake_gpus(max(node_gpus, default=-1) + 1),
                              index=index, cgroup_names=[node])
    # As systemd would: slurmd starts inside the slice (here: the v1 groups, which the node sees
    # as the root of each hierarchy, so everything Slurm creates nests inside and inherits the limits).
    inside = [f"/sys/fs/cgroup/{g.parent.name}" for g in groups]
    enter = " && ".join(f"echo $$ > {d}/cgroup.procs" for d in inside)
    script = (f"{enter} && mkdir -p /var/spool/slurmd && cp /cfg/*.conf /etc/slurm/ && "
              "install -m 0600 -o slurm -g slurm /cfg/slurm.key /etc/slurm/slurm.key && exec slurmd -D")
    mounts = [sandbox.Tmpfs(p, o) for p, o in PRIVATE_DIRS.items()] + [
        sandbox.Tmpfs("/etc/slurm"),
        sandbox.Bind(lab.lab_dir / "hosts", "/etc/hosts", readonly=True),
        sandbox.Bind(conf, "/cfg", readonly=True),
    ] + [sandbox.Bind(g, d) for g, d in zip(groups, inside)]
    # The node's OS: Debian's slurmd package, as the project's slurmd image of the series carries it.
    ref = rootfs.project_image("slurmd", lab.version)
    os_image = rootfs.resolve([ref], lab.version, log=log)[ref]
    box.start(["/bin/sh", "-c", script], {"PATH": CLIENT_PATH, "HOME": "/root", "LANG": "C.UTF-8"}, mounts,
              rootfs=os_image.path, layer=host_dir / "os", stdout_path=host_dir / "slurmd.log")
    adaptation = host_fence_adaptation(node, fence.cpus, fence.memory_bytes, fence.allowed_gpus)
    log(f"  - {adaptation}")
    lab.adaptations.append(adaptation)
    lab.save()
    return adaptation
