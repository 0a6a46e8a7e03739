"""slurmd pools: one StatefulSet per pool under one shared headless Service, plus a PDB each."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Pool, Profile
from slurmk8s.quantity import from_mib, to_mib
from slurmk8s.render.k8s.common import (
    CONFIG_FETCHED, Obj, headless_service, init_config_container, mounts_config, pod_spec, statefulset,
    volume_config,
)
from slurmk8s.render.k8s.identity import LIVE_USERS, live_command, reload_env, reloader_sidecar
from slurmk8s.render.k8s.probes import slurmd_probes
from slurmk8s.render.k8s.slurmd import GRACE_SECONDS, lifecycle, slurmd_command
from slurmk8s.render.k8s.volumes import POOLS, home_roots, shared_volumes
from slurmk8s.render.slurmfiles import gres_of
from slurmk8s.render.topology import Segment, node_affinity, pool_segments


def build_service_nodes(profile: Profile) -> Obj:
    """Headless Service governing every pool: pod <p>-<i> is <sts>-<i>.<svc>."""
    return headless_service(profile, naming.nodes_service(profile.name), naming.WORKER, [("slurmd", 6818)],
                            naming.selector_labels(profile.name, naming.WORKER))


# Disk slurmd's container needs beside the jobs' /tmp: its spool emptyDir, its logs, the image's writable layer.
SLURMD_DISK_MIB = 2048


def pool_ephemeral_storage(pool: Pool) -> str:
    """The slurmd container's ephemeral-storage: the jobs' /tmp plus slurmd's own disk."""
    return from_mib(to_mib(pool.tmp_size) + SLURMD_DISK_MIB)


def pool_resources(pool: Pool) -> Obj:
    """requests = limits (Guaranteed QoS, whole CPUs): what Slurm's node definition promises.

    ephemeral-storage too: the scheduler reserves the disk, so jobs filling /tmp cannot push the
    node into DiskPressure and evict its other pods.
    """
    limits: dict[str, str] = {"cpu": str(pool.cpus), "memory": pool.memory,
                              "ephemeral-storage": pool_ephemeral_storage(pool)}
    if pool.rdma and pool.rdma.hugepages:
        limits[f"hugepages-{pool.rdma.hugepages.size}"] = pool.rdma.hugepages.amount
    requests = dict(limits)
    if pool.gpus:
        limits[pool.gpus.resource] = str(pool.gpus.count)
    if pool.rdma:
        limits[pool.rdma.resource] = str(pool.rdma.count)
    return {"requests": dict(sorted(requests.items())), "limits": dict(sorted(limits.items()))}


def nccl_env(pool: Pool) -> list[Obj]:
    """NCCL settings for RDMA pools: bootstrap over the pod network, data over the HCAs."""
    if not pool.rdma:
        return []
    return [{"name": "NCCL_IB_DISABLE", "value": "0"},
            {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"}]


def slurmd_volumes() -> tuple[list[Obj], list[Obj]]:
    """(mounts, volumes) of every slurmd pod, pool or side-by-side: spool and run directory."""
    mounts = [{"name": "spool", "mountPath": "/var/spool/slurmd"},
              # slurmd (root) refuses a run directory that another user owns; a fresh one per pod
              # does not depend on what the image ships there (found on kind).
              {"name": "run", "mountPath": "/run/slurm"}]
    volumes = [{"name": "spool", "emptyDir": {}}, {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]
    return mounts, volumes


def spool_init_mounts() -> list[Obj]:
    return [{"name": "spool", "mountPath": "/var/spool/slurmd"}]


def spool_script() -> list[str]:
    """slurmd (root) reads its spool; the kubelet makes the emptyDir 0777, writable by job users."""
    return ["chmod 0755 /var/spool/slurmd"]


JOB_TMP = "/tmp"


def job_tmp_volume(pool: Pool) -> tuple[Obj, Obj]:
    """(mount, volume) of the jobs' /tmp: an emptyDir of the pool's tmpSize, not the container's writable layer."""
    return {"name": "tmp", "mountPath": JOB_TMP}, {"name": "tmp", "emptyDir": {"sizeLimit": pool.tmp_size}}


def job_tmp_script() -> list[str]:
    """The kubelet makes the emptyDir 0777; /tmp wants the sticky bit, so users cannot delete each other's files."""
    return [f"chmod 1777 {JOB_TMP}"]


def shm_size_limit(pool: Pool) -> str:
    """/dev/shm's sizeLimit: half the pod's memory, as a Linux host sizes its /dev/shm (it counts as the pod's memory)."""
    return from_mib(pool.memory_mib // 2)


def one_gpu_pod_per_node(profile: Profile, pool: Pool) -> Obj:
    """Required anti-affinity among the GPU pools' pods: gres.conf gives every pod /dev/nvidia0..N-1,
    so two pods on one node would both hand out the same devices (double-booked GPUs)."""
    if not pool.gpus or not pool.gpus.one_pod_per_node:
        return {}
    pools = sorted(p.name for p in profile.pools if p.gpus and p.gpus.one_pod_per_node)
    selector = {"matchLabels": naming.selector_labels(profile.name, naming.WORKER),
                "matchExpressions": [{"key": naming.LABEL_POOL, "operator": "In", "values": pools}]}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}


def build_statefulsets_pool(profile: Profile, pool: Pool, config_hash: str) -> list[Obj]:
    """The pool's StatefulSets: one, or one per topology leaf domain (render/topology.py)."""
    return [build_statefulset_pool(profile, pool, config_hash, seg) for seg in pool_segments(profile, pool)]


def build_statefulset_pool(profile: Profile, pool: Pool, config_hash: str, segment: Segment | None = None) -> Obj:
    """slurmd in the foreground, privileged (it creates job cgroups; Slinky issue #238)."""
    segment = segment or pool_segments(profile, pool)[0]
    name = segment.statefulset
    image = profile.worker_image(pool)  # slurmd, init-config and the sidecars: one image per pod
    slurmd_mounts, slurmd_vols = slurmd_volumes()
    tmp_mount, tmp_volume = job_tmp_volume(pool)
    mounts = mounts_config(profile, init=False, config=CONFIG_FETCHED, users=LIVE_USERS) + slurmd_mounts + [
        {"name": "shm", "mountPath": "/dev/shm"}, tmp_mount]
    volumes = volume_config(profile, CONFIG_FETCHED) + slurmd_vols + [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size_limit(pool)}}, tmp_volume]
    profile_volumes, profile_mounts = shared_volumes(profile, POOLS)  # spec.volumes: /home, /scratch ...
    mounts += profile_mounts
    volumes += profile_volumes
    if pool.rdma and pool.rdma.hugepages:
        mounts.append({"name": "hugepages", "mountPath": "/dev/hugepages"})
        volumes.append({"name": "hugepages", "emptyDir": {"medium": f"HugePages-{pool.rdma.hugepages.size}"}})
    slurmd: Obj = {
        "name": "slurmd",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": live_command(profile, slurmd_command(profile)),
    }
    env = nccl_env(pool)
    if env:
        slurmd["env"] = env
    slurmd.update({
        "ports": [{"name": "slurmd", "containerPort": 6818, "protocol": "TCP"}],
        **slurmd_probes(profile, 6818),
        "resources": pool_resources(pool),
        "securityContext": {"privileged": True, "capabilities": {"add": ["IPC_LOCK"]}},
        "volumeMounts": mounts,
        "lifecycle": lifecycle(),
    })
    extra: Obj = {}
    if pool.node_selector:
        extra["nodeSelector"] = dict(pool.node_selector)
    if pool.tolerations:
        extra["tolerations"] = [dict(t) for t in pool.tolerations]
    affinity = node_affinity(segment)
    if affinity:
        # Pinned to its topology domain: the Slurm nodes of this leaf run where topology.conf says.
        extra["affinity"] = affinity
    gpu_spread = one_gpu_pod_per_node(profile, pool)
    if gpu_spread:
        extra["affinity"] = {**extra.get("affinity", {}), **gpu_spread}
    # The preStop hook waits for the node's jobs within this (render/k8s/slurmd.py).
    extra["terminationGracePeriodSeconds"] = GRACE_SECONDS
    # Declared users' homes are identity-reload's (and init-config's first pass): no user reaches the template.
    homes = home_roots(profile, POOLS)
    identity_env = reload_env(profile, homes=homes)
    pod = pod_spec(profile, naming.WORKER, [slurmd],
                   [init_config_container(profile, image, spool_script() + job_tmp_script(),
                                          spool_init_mounts() + [tmp_mount] + profile_mounts, identity_env,
                                          config=CONFIG_FETCHED)]
                   + reloader_sidecar(profile, image, identity_env, [m for m in profile_mounts if m["mountPath"] in homes]),
                   volumes, extra)
    # Only what a running pod must restart for goes on the pod template: a changed template replaces
    # every pod of the pool. The node names and the elastic range are the StatefulSet's own facts.
    annotations = {naming.ANNOTATION_CONFIG_HASH: config_hash}
    if segment.domain is not None:
        # Pod i is Slurm node <pool>-<first + i>: a changed first node is a new identity for every pod.
        annotations[naming.ANNOTATION_FIRST_NODE] = str(segment.offset)
    if pool.rdma and pool.rdma.networks:
        annotations[naming.ANNOTATION_MULTUS] = ",".join(pool.rdma.networks)
    gres = gres_of(pool)
    if gres:
        annotations[naming.ANNOTATION_GRES] = gres
    sts = statefulset(profile, name, naming.WORKER, segment.replicas, naming.nodes_service(profile.name), pod,
                      annotations, pool=pool.name, parallel=True)
    # The elastic range and the Slurm nodes, for `scale`, the lab and reviewers: Slurm knows max_replicas
    # nodes. Kept off the pod template, so raising maxReplicas reaches Slurm in place and replaces no pod.
    sts["metadata"]["annotations"] = {naming.ANNOTATION_MAX_REPLICAS: str(segment.slots),
                                      naming.ANNOTATION_MIN_REPLICAS: str(segment.min_replicas),
                                      naming.ANNOTATION_NODE_NAMES: segment.node_names}
    if segment.domain is not None:
        # Per-leaf StatefulSets of one pool must not select each other's pods.
        for labels in (sts["metadata"]["labels"], sts["spec"]["selector"]["matchLabels"],
                       sts["spec"]["template"]["metadata"]["labels"]):
            labels[naming.LABEL_DOMAIN] = segment.domain
        sts["metadata"]["annotations"][naming.ANNOTATION_FIRST_NODE] = str(segment.offset)
    return sts

