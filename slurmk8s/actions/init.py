"""`init`: write a commented starter profile."""

from __future__ import annotations

from pathlib import Path

from slurmk8s.errors import UsageError

STARTER = """\
# A slurmk8s cluster profile. Check it with `slurmk8s validate`, look at what it makes
# with `slurmk8s render -o out/`, stand it up with `slurmk8s up`.
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata:
  name: mycluster          # Slurm ClusterName and prefix of every object (DNS-1123 label)
  namespace: slurm
spec:
  slurm:
    version: "26.05"       # quote it: 22.05 .. 26.05
    # auth: slurm          # slurm (23.11+) or munge
    # config:              # extra slurm.conf lines
    #   SchedulerParameters: bf_continue
  controller:
    replicas: 1            # 2 = primary + backup slurmctld (needs a ReadWriteMany storage class)
    storage: {size: 4Gi}
  accounting:
    enabled: true
    database:
      embedded: {storage: 10Gi}
  login:
    replicas: 1
    service: {type: ClusterIP}
    authorizedKeys: []     # "ssh-ed25519 AAAA... you@host"
  pools:
    - name: cpu
      replicas: 2          # running now
      minReplicas: 0       # elastic floor
      maxReplicas: 4       # Slurm knows cpu-[0-3]
      cpus: 2
      memory: 2Gi
      features: [cpu]
    # - name: gpu
    #   replicas: 1
    #   cpus: 32
    #   memory: 256Gi
    #   gpus: {count: 4, type: a100, resource: nvidia.com/gpu}
  partitions:
    - name: main
      pools: [cpu]
      default: true
      maxTime: "1-00:00:00"
"""


def write_starter(path: str, force: bool = False) -> Path:
    """Write the starter profile; refuse to overwrite unless forced."""
    p = Path(path)
    if p.exists() and not force:
        raise UsageError(f"{p}: already exists (use --force to overwrite)")
    p.write_text(STARTER)
    return p
