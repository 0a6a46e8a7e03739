"""What a job gets when it asks for nothing: memory per CPU or GPU, limits it inherits, NCCL settings.

- DefMemPerCPU / DefMemPerGPU per partition, from its pools' shapes: with CR_Core_Memory a job
  without --mem would otherwise be given the node's whole memory and block every other job there.
  The two are mutually exclusive on one partition (slurm.conf(5)): GPU-only partitions get
  DefMemPerGPU, the others DefMemPerCPU. The smallest share of the partition's pools.
- PropagateResourceLimitsExcept=MEMLOCK with RDMA: the submit host's (login pod's) memlock limit
  must not cap the task's, or ibverbs cannot pin its buffers.
- TaskProlog: environment for every task of an RDMA node (NCCL over the HCAs), which slurmd's own
  environment never reaches.
A profile that sets any of these keys itself keeps its own value.
Reference: https://slurm.schedmd.com/slurm.conf.html
"""

from __future__ import annotations

from slurmk8s.profile.model import Partition, Pool, Profile
from slurmk8s.render.fence import slurmd_mem_spec_mib

TASK_PROLOG_FILE = "task_prolog.sh"
TASK_PROLOG_PATH = f"/etc/slurm/{TASK_PROLOG_FILE}"
NCCL_ENV = (("NCCL_IB_DISABLE", "0"), ("NCCL_SOCKET_IFNAME", "eth0"))
_MEMORY_KEYS = ("defmempercpu", "defmempergpu", "defmempernode")


def _schedulable_mib(pool: Pool) -> int:
    return pool.memory_mib - slurmd_mem_spec_mib(pool.memory_mib)


def _sets(config: tuple[tuple[str, str], ...], keys: tuple[str, ...]) -> bool:
    return any(k.lower() in keys for k, _ in config)


def partition_memory_defaults(profile: Profile, part: Partition) -> list[tuple[str, str]]:
    """[(DefMemPerCPU|DefMemPerGPU, MiB)] for one partition ([] when the profile sets one)."""
    if _sets(part.config, _MEMORY_KEYS) or _sets(profile.slurm_config, _MEMORY_KEYS):
        return []
    pools = [profile.pool(name) for name in part.pools]
    if not pools:
        return []
    with_gpus = [(p, p.gpus) for p in pools if p.gpus]
    if len(with_gpus) == len(pools):  # every pool has GPUs
        return [("DefMemPerGPU", str(min(_schedulable_mib(p) // gpus.count for p, gpus in with_gpus)))]
    return [("DefMemPerCPU", str(min(_schedulable_mib(p) // p.cpus for p in pools)))]


def rdma_pools(profile: Profile) -> list[Pool]:
    return [p for p in profile.pools if p.rdma]


def global_job_settings(profile: Profile) -> list[tuple[str, str]]:
    """slurm.conf lines derived from the pools (RDMA: memlock propagation and the TaskProlog)."""
    out: list[tuple[str, str]] = []
    if not rdma_pools(profile):
        return out
    if not _sets(profile.slurm_config, ("propagateresourcelimits", "propagateresourcelimitsexcept")):
        out.append(("PropagateResourceLimitsExcept", "MEMLOCK"))
    if task_prolog(profile):
        out.append(("TaskProlog", TASK_PROLOG_PATH))
    return out


def task_prolog(profile: Profile) -> str | None:
    """The TaskProlog script: `export` lines slurmstepd adds to each task of an RDMA node."""
    pools = rdma_pools(profile)
    if not pools or _sets(profile.slurm_config, ("taskprolog",)):
        return None
    patterns = "|".join(f"{p.name}-*" for p in pools)
    exports = "".join(f"    echo 'export {k}={v}'\n" for k, v in NCCL_ENV)
    return ("#!/bin/sh\n# slurmk8s TaskProlog: NCCL over the RDMA devices on the RDMA pools' nodes.\n"
            f'case "$SLURMD_NODENAME" in\n  {patterns})\n{exports}    ;;\nesac\n')
