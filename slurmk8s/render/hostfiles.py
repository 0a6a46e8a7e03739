"""Side-by-side host files, per node shape, for config management: rendered under hosts/<shape>/.

Pure. Both sides come from one fence plan (render/fence.py): what the Slurm side is
allowed (slurm.conf lines, gres.conf, the systemd slice and scope) and what the kubelet
keeps from its pods (the KubeletConfiguration fragment, the device-plugin patch).
"""

from __future__ import annotations

from slurmk8s.profile.model import Profile
from slurmk8s.profile.sidebyside import HOST, format_cpulist
from slurmk8s.quantity import from_mib
from slurmk8s.render.fence import FencePlan, gpu_files, plans, shared_slurm_nodes
from slurmk8s.render.slurmfiles import _render

MIB = 1024 * 1024
# Device nodes a GPU job needs besides its GPUs (the NVIDIA driver's control and UVM devices);
# the slice's device policy allows these and Slurm's GPUs, and so denies Kubernetes' GPUs.
NVIDIA_SHARED_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


def host_dir(shape: str) -> str:
    """Where a shape's host files go in the bundle's files (and so in the rendered tree)."""
    return f"hosts/{shape}"


def device_policy_lines(plan: FencePlan) -> list[str]:
    """systemd device policy keeping Slurm's processes off Kubernetes' GPUs (none when Kubernetes has none).

    Slurm's ConstrainDevices only denies GPUs listed in gres.conf; Kubernetes' GPUs are not
    listed there, so the slice must deny them. DevicePolicy=closed allows the standard
    pseudo devices plus what DeviceAllow lists.
    """
    if not plan.kube_gpus:
        return []
    lines = ["# Kubernetes' GPUs are denied: only Slurm's GPUs, the driver's shared devices and terminals",
             "# are allowed. Add DeviceAllow= lines for other devices jobs open (InfiniBand, FUSE, ...).",
             "DevicePolicy=closed"]
    lines += [f"DeviceAllow=/dev/nvidia{g} rw" for g in plan.slurm_gpus]
    lines += [f"DeviceAllow={d} rw" for d in NVIDIA_SHARED_DEVICES]
    lines += ["DeviceAllow=char-pts rw"]
    return lines


def render_host_files(profile: Profile) -> dict[str, str]:
    """hosts/<shape>/... -> text for every shape (host mode: both sides; pod mode: the kubelet side)."""
    files: dict[str, str] = {}
    node_lines = {str(n["features"]).split(",")[0]: n for n in shared_slurm_nodes(profile)}
    for plan in plans(profile):
        s = plan.shape
        d = host_dir(s.name)
        common = {"cluster": profile.name, "shape": s.name}
        files[f"{d}/kubelet-config.yaml"] = _render(
            "hosts/kubelet-config.yaml.j2", **common,
            why=("Slurm's CPUs, memory and GPUs nor on the system reserve" if plan.mode == HOST
                 else "the system reserve"),
            reserved_cpus=format_cpulist(plan.kubelet_reserved_cpus),
            reserved_memory=from_mib(plan.kubelet_reserved_memory_mib))
        if plan.mode != HOST:
            continue
        node = node_lines[s.name]
        files[f"{d}/slurm-nodes.conf"] = _render(
            "hosts/slurm-nodes.conf.j2", **common, cpus=plan.slurm_cpu_count, mem_spec_limit=plan.slurm_mem_spec_mib,
            line=slurm_node_line(node))
        files[f"{d}/cgroup.conf"] = _render("hosts/cgroup.conf.j2", **common)
        if plan.slurm_gpus:
            files[f"{d}/gres.conf"] = _render(
                "hosts/gres.conf.j2", **common, gpu_list=_list(plan.slurm_gpus), nodes=",".join(s.nodes),
                type=s.gpu_type, files=gpu_files(plan.slurm_gpus))
        cpus = format_cpulist(plan.slurm_cpus)
        devices = device_policy_lines(plan)
        files[f"{d}/systemd/slurm.slice"] = _render(
            "hosts/slurm.slice.j2", **common, cpus=cpus, memory_bytes=plan.slurm_memory_mib * MIB, device_lines=devices)
        files[f"{d}/systemd/slurmd.service.d/slurmk8s.conf"] = _render("hosts/slurmd.service.conf.j2", **common)
        files[f"{d}/systemd/slurmstepd.scope.d/slurmk8s.conf"] = _render(
            "hosts/slurmstepd.scope.conf.j2", **common, cpus=cpus, job_memory_mib=plan.job_memory_mib,
            memory_bytes=plan.job_memory_mib * MIB, device_lines=devices)
        if s.gpus:
            files[f"{d}/nvidia-device-plugin.yaml"] = _render(
                "hosts/nvidia-device-plugin.yaml.j2", **common, nodes=list(s.nodes), resource=s.gpu_resource,
                kube_gpu_list=_list(plan.kube_gpus), slurm_gpu_list=_list(plan.slurm_gpus),
                kube_gpus=",".join(str(g) for g in plan.kube_gpus) or "none")
    return dict(sorted(files.items()))


def slurm_node_line(node: dict[str, object]) -> str:
    """A shared node's NodeName line, exactly as slurm.conf.j2 writes it."""
    line = (f"NodeName={node['names']} NodeHostname={node['hostnames']} CPUs={node['cpus']} "
            f"RealMemory={node['real_memory']}")
    if node.get("cpu_spec_list"):
        line += f" CpuSpecList={node['cpu_spec_list']}"
    line += f" MemSpecLimit={node['mem_spec_limit']}"
    if node["gres"]:
        line += f" Gres={node['gres']}"
    if node["features"]:
        line += f" Features={node['features']}"
    return line + f" State={node['state']}"


def _list(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids) or "none"

