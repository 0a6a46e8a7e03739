"""The fence plan of a shared node shape: what Slurm holds, what the kubelet may hand out, what stays reserved.

Pure. Every side-by-side output (slurm.conf NodeName lines, gres.conf, the systemd slice,
the KubeletConfiguration fragment, the device-plugin patch, the slurmd DaemonSet) is
generated from this one plan, so the two schedulers are told complementary things.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s.profile.model import Profile
from slurmk8s.profile.sidebyside import HOST, NodeShape, format_cpulist
from slurmk8s.quantity import from_mib


def slurmd_mem_spec_mib(slurm_memory_mib: int) -> int:
    """MemSpecLimit: memory Slurm keeps from jobs for slurmd/slurmstepd (1/16 of its share, 256..2048 MiB)."""
    return max(256, min(2048, slurm_memory_mib // 16))


@dataclass(frozen=True)
class FencePlan:
    """One shape's split as both schedulers will be configured."""

    shape: NodeShape
    mode: str
    slurm_cpus: tuple[int, ...]          # host: the CPU ids slurmd's slice allows; pod: those the kubelet must pick
    slurm_cpu_count: int                 # Slurm CPUs= (what slurmd's cgroup or pod holds)
    slurm_memory_mib: int                # Slurm RealMemory (= slice MemoryMax / pod memory limit)
    slurm_mem_spec_mib: int              # MemSpecLimit, inside RealMemory
    slurm_gpus: tuple[int, ...]          # gres.conf File= (host) / GPU count of the pod
    kubelet_reserved_cpus: tuple[int, ...]   # reservedSystemCPUs
    kubelet_reserved_memory_mib: int     # systemReserved memory
    kube_cpus: tuple[int, ...]           # CPUs the kubelet hands to pods (node minus reservedSystemCPUs)
    kube_memory_mib: int                 # node allocatable memory (node minus systemReserved)
    kube_gpus: tuple[int, ...]           # GPUs the device plugin may offer
    system_cpus: tuple[int, ...]
    system_memory_mib: int

    @property
    def job_memory_mib(self) -> int:
        """Memory Slurm can give jobs on one node."""
        return self.slurm_memory_mib - self.slurm_mem_spec_mib


def plan_shape(shape: NodeShape, mode: str) -> FencePlan:
    """The fence plan of a (checked) shape in host or pod mode."""
    node = set(shape.cpus)
    kube_cpus = tuple(sorted(set(shape.kubernetes.cpus) & node))
    if mode == HOST:
        # Everything that is not Kubernetes' is reserved from the kubelet: Slurm's CPUs and
        # memory look like "system" to it, which is what keeps pods off them.
        reserved = tuple(sorted(node - set(kube_cpus)))
        reserved_mib = shape.memory_mib - shape.kubernetes.memory_mib
        slurm_cpus = shape.slurm.cpus
        kube_gpus = tuple(g for g in shape.gpus if g in set(shape.kubernetes.gpus))
    else:
        # The slurmd pod is one of the kubelet's Guaranteed pods: only the system is reserved.
        reserved = shape.system.cpus
        reserved_mib = shape.system.memory_mib
        # The static CPU manager picks the slurmd pod's CPUs; slurmd checks at start that they
        # are these (slurm.conf's CpuSpecList is written for them).
        slurm_cpus = shape.slurm.cpus
        kube_cpus = tuple(sorted(node - set(reserved)))
        kube_gpus = shape.gpus
    return FencePlan(
        shape=shape, mode=mode, slurm_cpus=slurm_cpus, slurm_cpu_count=len(shape.slurm.cpus),
        slurm_memory_mib=shape.slurm.memory_mib, slurm_mem_spec_mib=slurmd_mem_spec_mib(shape.slurm.memory_mib),
        slurm_gpus=shape.slurm.gpus, kubelet_reserved_cpus=reserved, kubelet_reserved_memory_mib=reserved_mib,
        kube_cpus=kube_cpus, kube_memory_mib=shape.memory_mib - reserved_mib, kube_gpus=kube_gpus,
        system_cpus=shape.system.cpus, system_memory_mib=shape.system.memory_mib,
    )


def plans(profile: Profile) -> list[FencePlan]:
    """The plan of every shape of the profile (none without spec.sideBySide)."""
    sbs = profile.side_by_side
    return [plan_shape(s, sbs.mode) for s in sbs.shapes] if sbs else []


def gres_of_shape(shape: NodeShape) -> str | None:
    """Gres= of the shape's Slurm nodes: gpu[:type]:count of Slurm's GPUs."""
    if not shape.slurm.gpus:
        return None
    kind = f"gpu:{shape.gpu_type}" if shape.gpu_type else "gpu"
    return f"{kind}:{len(shape.slurm.gpus)}"


def gpu_files(indices: tuple[int, ...]) -> str:
    """gres.conf File= for these GPU indices (/dev/nvidia4 or /dev/nvidia[4-7] or /dev/nvidia[0,2])."""
    if len(indices) == 1:
        return f"/dev/nvidia{indices[0]}"
    return f"/dev/nvidia[{format_cpulist(indices)}]"


def _numa_of(cpus: tuple[int, ...], shape: NodeShape) -> str:
    if not shape.numa or not cpus:
        return ""
    nodes = [str(i) for i, numa in enumerate(shape.numa) if set(cpus) & set(numa)]
    return f" (NUMA {','.join(nodes)})"


def fence_table(profile: Profile) -> str:
    """The plan as a table per shape, for `slurmk8s fence`."""
    sbs = profile.side_by_side
    if not sbs:
        return f"{profile.name}: no spec.sideBySide: no node is shared with Kubernetes\n"
    blocks = [f"cluster {profile.name}: side-by-side mode {sbs.mode}, partition {sbs.partition}"]
    for plan in plans(profile):
        s = plan.shape
        nodes = ",".join(s.nodes) if s.nodes else ",".join(f"{k}={v}" for k, v in s.node_selector)
        slurm_cpu = f"{format_cpulist(plan.slurm_cpus)}{_numa_of(plan.slurm_cpus, s)}"
        if plan.mode != HOST:
            slurm_cpu += " exclusive (static CPU manager)"
        rows = [
            ("", "CPUs", "memory", "GPUs"),
            ("node", f"{format_cpulist(s.cpus)}", from_mib(s.memory_mib), _gpus(s.gpus)),
            ("slurm", slurm_cpu, f"{from_mib(plan.slurm_memory_mib)} (jobs {from_mib(plan.job_memory_mib)})",
             _gpus(plan.slurm_gpus) if plan.mode == HOST else str(len(plan.slurm_gpus) or "-")),
            ("system", f"{format_cpulist(plan.system_cpus)}{_numa_of(plan.system_cpus, s)}",
             from_mib(plan.system_memory_mib), "-"),
            ("kubernetes", _kube_cpus(plan), from_mib(plan.kube_memory_mib - (plan.slurm_memory_mib if plan.mode != HOST else 0)),
             _gpus(plan.kube_gpus) if plan.mode == HOST else str(len(s.gpus) - len(plan.slurm_gpus) or "-")),
            ("kubelet reserves", format_cpulist(plan.kubelet_reserved_cpus), from_mib(plan.kubelet_reserved_memory_mib), "-"),
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [f"shape {s.name}: nodes {nodes}"]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _kube_cpus(plan: FencePlan) -> str:
    if plan.mode == HOST:
        return f"{format_cpulist(plan.kube_cpus)}{_numa_of(plan.kube_cpus, plan.shape)}"
    return f"{format_cpulist(plan.kube_cpus)} minus slurmd's {plan.slurm_cpu_count}"


def _gpus(gpus: tuple[int, ...]) -> str:
    return ",".join(str(g) for g in gpus) or "-"


# ---------------------------------------------------------------- the shared nodes in slurm.conf


def shared_node_names(profile: Profile) -> list[str]:
    """Slurm names of every shared node (= their Kubernetes node names), shape by shape."""
    return [n for p in plans(profile) for n in p.shape.nodes]


def shared_slurm_nodes(profile: Profile) -> list[dict[str, object]]:
    """slurm.conf NodeName entries of the shared nodes: exactly Slurm's share of each shape.

    CLOUD: slurmctld runs in a pod and cannot resolve node hostnames through cluster DNS;
    a CLOUD node's address is taken from its registration instead.
    Every CPU of the node is declared, and the ones that are not Slurm's are CpuSpecList:
    slurmd reads the whole machine's topology (not its slice's or its pod's), and Slurm's CPU ids
    are machine ids only when the node is described whole; jobs never get a CpuSpecList CPU.
    (Declaring only Slurm's count in pod mode bound jobs to CPU 0, outside the pod's cpuset:
    every step failed to start, found on kind with the static CPU manager.)
    """
    return [
        {
            "names": ",".join(p.shape.nodes),
            "hostnames": ",".join(p.shape.nodes),
            "cpus": len(p.shape.cpus),
            "cpu_spec_list": format_cpulist(set(p.shape.cpus) - set(p.slurm_cpus)),
            "real_memory": p.slurm_memory_mib,
            "mem_spec_limit": p.slurm_mem_spec_mib,
            "gres": gres_of_shape(p.shape),
            "features": ",".join(p.shape.slurm_features),
            "state": "CLOUD",
        }
        for p in plans(profile) if p.shape.nodes
    ]


def shared_partition(profile: Profile) -> dict[str, object] | None:
    """The PartitionName entry of the shared nodes (None without spec.sideBySide)."""
    names = shared_node_names(profile)
    if not names:
        return None
    assert profile.side_by_side is not None  # plans() gives no shared nodes without it
    return {"name": profile.side_by_side.partition, "nodes": ",".join(names), "default": False,
            "max_time": "UNLIMITED", "extra": []}


def task_plugin_param(profile: Profile) -> str:
    """TaskPluginParam: SlurmdOffSpec keeps slurmd off the CpuSpecList CPUs (Kubernetes'), inside its slice or pod."""
    return "SlurmdOffSpec" if profile.side_by_side else ""


def shared_nodes_have_gpus(profile: Profile) -> bool:
    """True when a shape gives Slurm GPUs (slurm.conf then needs GresTypes=gpu)."""
    return any(p.slurm_gpus for p in plans(profile))
