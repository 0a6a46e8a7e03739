"""Side-by-side pod mode: slurmd as a Guaranteed-QoS DaemonSet on each shape's shared nodes."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.quantity import from_mib
from slurmk8s.profile.sidebyside import format_cpulist
from slurmk8s.render.fence import FencePlan, plans
from slurmk8s.render.k8s.common import (
    CONFIG_FETCHED, Obj, init_config_container, meta, mounts_config, pod_spec, volume_config,
)
from slurmk8s.render.k8s.probes import slurmd_probes
from slurmk8s.render.k8s.identity import LIVE_USERS, live_command, reloader_sidecar
from slurmk8s.render.k8s.slurmd import GRACE_SECONDS, lifecycle, slurmd_command
from slurmk8s.render.k8s.workers import slurmd_volumes

LABEL_SHAPE = naming.LABEL_SHAPE


def daemonset_name(profile: Profile, shape: str) -> str:
    """DaemonSet name of a shape's slurmd pods."""
    return naming.component_name(profile.name, f"shared-{shape}")


def _guaranteed(container: Obj) -> Obj:
    """requests = limits on a helper container: one Burstable container would make the whole pod Burstable."""
    limits = container["resources"]["limits"]
    return {**container, "resources": {"requests": dict(limits), "limits": dict(limits)}}


def slurmd_start_script(profile: Profile, plan: FencePlan) -> str:
    """Refuse to start on other CPUs than slurm.conf's: CpuSpecList names every other CPU of the node,
    so on CPUs the kubelet chose differently every job step would fail to start."""
    want = format_cpulist(plan.slurm_cpus)
    return "\n".join([
        "set -eu",
        "have=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)",
        f'if [ "$have" != "{want}" ]; then',
        f'  echo "slurmd: the kubelet gave this pod CPUs $have, but slurm.conf declares Slurm\'s CPUs {want} on $NODE_NAME'
        f' (shape {plan.shape.name}); a Guaranteed pod that started first may hold them" >&2',
        "  exit 1",
        "fi",
        f'exec {" ".join(slurmd_command(profile))} -N "$NODE_NAME"',
    ]) + "\n"


def slurmd_resources(plan: FencePlan) -> Obj:
    """Whole CPUs and memory, requests = limits: the static CPU manager pins exactly these CPUs."""
    limits = {"cpu": str(plan.slurm_cpu_count), "memory": from_mib(plan.slurm_memory_mib)}
    return {"requests": dict(limits), "limits": dict(limits)}


def build_daemonset_shared(profile: Profile, plan: FencePlan, config_hash: str) -> Obj:
    """slurmd on every node of one shape; its Slurm node name is the Kubernetes node's name."""
    s = plan.shape
    name = daemonset_name(profile, s.name)
    image = profile.images.worker
    slurmd: Obj = {
        "name": "slurmd",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        # The Slurm NodeName is the Kubernetes node's name (slurm.conf declares each one); -b as for pools.
        "command": live_command(profile, ["/bin/sh", "-c", slurmd_start_script(profile, plan)]),
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "ports": [{"name": "slurmd", "containerPort": 6818, "protocol": "TCP"}],
        **slurmd_probes(profile, 6818),
        "resources": slurmd_resources(plan),
        "securityContext": {"privileged": True},
    }
    slurmd_mounts, slurmd_vols = slurmd_volumes()
    slurmd["volumeMounts"] = mounts_config(profile, init=False, config=CONFIG_FETCHED, users=LIVE_USERS) + slurmd_mounts
    slurmd["lifecycle"] = lifecycle()
    volumes = volume_config(profile, CONFIG_FETCHED) + slurmd_vols
    extra: Obj = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(s.nodes)}]}]}}},
        "terminationGracePeriodSeconds": GRACE_SECONDS,
    }
    if s.node_selector:
        extra["nodeSelector"] = dict(s.node_selector)
    pod = pod_spec(profile, naming.WORKER, [slurmd], [init_config_container(profile, image, config=CONFIG_FETCHED)]
                   + reloader_sidecar(profile, image),
                   volumes, extra,
                   shared_node_pod=True)
    pod["initContainers"] = [_guaranteed(c) for c in pod["initContainers"]]
    labels = {**naming.selector_labels(profile.name, naming.WORKER), LABEL_SHAPE: s.name}
    template_meta: Obj = {"labels": {**naming.object_labels(profile.name, naming.WORKER), LABEL_SHAPE: s.name},
                          "annotations": {naming.ANNOTATION_CONFIG_HASH: config_hash}}
    # The shape's Slurm nodes on the DaemonSet itself, as on a pool's StatefulSet (render/k8s/workers.py).
    metadata = meta(profile, name, naming.WORKER, annotations={naming.ANNOTATION_NODE_NAMES: ",".join(s.nodes)})
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": labels},
            # A changed template replaces no pod by itself: `slurmk8s rollout` (and `up`) drains each node first.
            "updateStrategy": {"type": "OnDelete"},
            "template": {"metadata": template_meta, "spec": pod},
        },
    }


def build_daemonsets_shared(profile: Profile, config_hash: str) -> list[Obj]:
    """One slurmd DaemonSet per shape in pod mode; none in host mode (slurmd runs under systemd)."""
    sbs = profile.side_by_side
    if not sbs or sbs.mode != "pod":
        return []
    return [build_daemonset_shared(profile, p, config_hash) for p in plans(profile)]
