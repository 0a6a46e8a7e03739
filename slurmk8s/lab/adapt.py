"""The only changes the lab makes to a rendered bundle, each listed and printed at start.

Everything else (commands, env, volumes, Slurm config) runs exactly as rendered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from slurmk8s.lab.plan import Pod
from slurmk8s.lab.rootfs import LabImage


@dataclass(frozen=True)
class Adaptation:
    """One difference between the lab and a real Kubernetes node, and why."""

    what: str
    why: str

    def __str__(self) -> str:
        return f"{self.what} ({self.why})"


# What a kubelet and its runtime do that the lab does not. Users, groups, capabilities,
# no_new_privs, runAsNonRoot, the images' files with a writable layer per container, volume
# modes and owners (fsGroup, the token's fsUser rule) are applied as on kind (kubelet.py).
ALWAYS = (
    Adaptation("no seccomp filter: RuntimeDefault is not applied",
               "the lab has no container runtime; a syscall that profile refuses succeeds here"),
    Adaptation("containers share the host's PID and IPC namespaces and see the host's whole cgroup tree "
               "(read-only unless privileged); a privileged container's /dev is the host's",
               "the lab keeps each container one process of this host; a runtime gives a container its own "
               "PID namespace and cgroup, a pod its IPC namespace, a privileged container its own devpts and shm"),
    Adaptation("Memory-medium volumes (emptyDir medium Memory, Secrets, the service-account token) and the "
               "pod's /dev/shm are directories on disk with the kubelet's modes and owners; sizeLimit is not enforced",
               "no tmpfs per pod, so nothing is left mounted on the host"),
    Adaptation("resources (requests, limits) are not applied to containers; Slurm's own job cgroups are",
               "no pod cgroups here"),
    Adaptation("cluster DNS is each pod's /etc/hosts: every pod and Service name of the bundle; "
               "a ClusterIP Service name resolves to the first pod it selects; no Service link env vars",
               "no kube-proxy or DNS server here"),
    Adaptation("container lifecycle hooks (the slurmd pods' postStart and preStop) are not run",
               "the lab starts and stops each pod's processes itself; kind runs the hooks (tests/e2e)"),
    Adaptation("NetworkPolicies are not enforced; the Kubernetes API answers only statefulsets/scale "
               "(with the bundle's RBAC), for the power-saving programs",
               "no CNI policy engine and no API server here"),
)


def image_adaptations(images: Iterable[LabImage]) -> list[Adaptation]:
    """One line per rendered image that runs as the project's image of the same name."""
    return [Adaptation(f"image {i.rendered} runs as {i.ref}",
                       "not on this machine; the project's image of that name and Slurm series "
                       "(slurmk8s images build) has the same users (slurm 401, mysql 999)")
            for i in sorted(images, key=lambda i: i.rendered) if i.substituted]


def adapt_slurm_files(files: dict[str, str], host_cpus: int, host_memory_mib: int) -> tuple[dict[str, str], list[Adaptation]]:
    """Rewrite the Slurm ConfigMap files for this host; return the new files and what changed."""
    out = dict(files)
    done: list[Adaptation] = []
    cgroup = out.get("cgroup.conf", "")
    if "CgroupPlugin=cgroup/v2" in cgroup:
        out["cgroup.conf"] = cgroup.replace("CgroupPlugin=cgroup/v2", "CgroupPlugin=cgroup/v1")
        done.append(Adaptation("cgroup.conf: CgroupPlugin=cgroup/v1 instead of cgroup/v2",
                               "this host mounts cgroup v1 controllers; v2 cannot work here"))
    conf = out.get("slurm.conf", "")
    too_big = [m.group(1) for m in re.finditer(r"^NodeName=(\S+) .*?CPUs=(\d+) RealMemory=(\d+)", conf, re.M)
               if int(m.group(2)) > host_cpus or int(m.group(3)) > host_memory_mib]
    if too_big:
        conf = conf.replace("TaskPlugin=task/cgroup,task/affinity", "TaskPlugin=task/cgroup")
        conf = conf.rstrip("\n") + "\nSlurmdParameters=config_overrides\n"
        out["slurm.conf"] = conf
        done.append(Adaptation(
            f"slurm.conf: SlurmdParameters=config_overrides and no task/affinity (nodes {', '.join(too_big)})",
            f"they are larger than this machine ({host_cpus} CPUs, {host_memory_mib} MiB)"))
    if "slurm.conf" in out:
        out["slurm.conf"], scheduled = _schedule_batch_jobs_at_once(out["slurm.conf"])
        done += scheduled
    return out, done


def _schedule_batch_jobs_at_once(conf: str) -> tuple[str, list[Adaptation]]:
    """SchedulerParameters batch_sched_delay=0, unless the bundle sets batch_sched_delay itself."""
    if not conf or "batch_sched_delay=" in conf:
        return conf, []
    m = re.search(r"^SchedulerParameters=(\S*)$", conf, re.M)
    if m:
        conf = conf[:m.end(1)] + ",batch_sched_delay=0" + conf[m.end(1):]
    else:
        conf = conf.rstrip("\n") + "\nSchedulerParameters=batch_sched_delay=0\n"
    return conf, [Adaptation(
        "slurm.conf: SchedulerParameters batch_sched_delay=0",
        "the lab's checks submit one batch job after another; Slurm's default holds each up to 3 s for the "
        "next scheduling pass, which pays off only at high submit rates")]


def gpu_adaptations(pods: list[Pod]) -> list[Adaptation]:
    """Fake /dev/nvidiaN device nodes (char 195:N, no driver) in pods that request GPUs."""
    with_gpus = [p.name for p in pods if any(c.gpus for c in p.containers)]
    if not with_gpus:
        return []
    return [Adaptation(f"fake GPU device files /dev/nvidia* in {', '.join(with_gpus)}",
                       "no GPUs here; gres.conf File= and ConstrainDevices still act on them")]


CLAIMS_IN_MEMORY = Adaptation(
    "PersistentVolumeClaims are directories on one tmpfs (kind's local-path provisioner makes them on the node's disk)",
    "a lab's data ends with the lab, and MariaDB and slurmctld then write without waiting on this disk")


def v1_cgroup_conf(text: str) -> str:
    """A rendered cgroup.conf with CgroupPlugin=cgroup/v1 (this host mounts cgroup v1 only)."""
    return text.replace("CgroupPlugin=cgroup/v2", "CgroupPlugin=cgroup/v1")


def host_fence_adaptation(node: str, cpus: str, memory_bytes: int, allowed_gpus: tuple[int, ...] | None) -> Adaptation:
    """Side-by-side host mode: the shared node's slurmd runs in a sandbox, its systemd slice applied as cgroup v1.

    On a real node systemd puts slurmd in slurm.slice (cgroup v2: AllowedCPUs, MemoryMax,
    DevicePolicy) and the job steps in slurmstepd.scope with the same limits. Slurm's cgroup/v1
    plugin builds its tree from the hierarchy's root (and resets its own top group from it), so
    the lab creates <controller>/slurm_<node> with the slice's limits (cpuset.cpus,
    memory.limit_in_bytes, devices.deny of the GPUs the slice does not allow), mounts it as the
    root of each hierarchy inside the node's sandbox, and starts slurmd in it: every job cgroup
    nests inside and inherits the limits, as under the slice.
    """
    devices = "" if allowed_gpus is None else f", devices.deny of every GPU but {','.join(map(str, allowed_gpus)) or 'none'}"
    return Adaptation(
        f"host-mode node {node}: slurmd in a sandbox on the slurmd image's files as its OS, "
        f"its systemd slice as cgroup v1 slurm_{node} groups seen as the root "
        f"(cpuset.cpus={cpus}, memory.limit_in_bytes={memory_bytes}{devices})",
        "no systemd or cgroup v2 here; Slurm's cgroup/v1 plugin builds its job tree from the hierarchy root")
