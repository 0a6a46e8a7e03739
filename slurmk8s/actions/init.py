"""`init`: write a commented starter profile."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from slurmk8s.errors import OutputError, UsageError

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


def write_starter(path: str, force: bool = False) -> Path | None:
    """Write the starter profile (to stdout for '-'); refuse to overwrite unless forced."""
    if path == "-":
        from slurmk8s.actions.render import write_stdout
        write_stdout(STARTER, "the starter profile")
        return None
    p = Path(path)
    if os.path.lexists(p) and not force:  # a dangling symlink counts: writing would create its target
        raise UsageError(f"{p}: already exists (use --force to overwrite)")
    if p.is_dir():
        raise UsageError(f"{p}: is a directory; give the profile's file name, e.g. {p / 'profile.yaml'}")
    if not p.parent.is_dir():
        raise UsageError(f"{p}: directory {p.parent} does not exist (create it first)")
    try:
        # A new file next to the target, then one rename: an existing symlink is replaced, never followed.
        fd, temp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(STARTER)
            os.chmod(temp, 0o666 & ~_umask())
            if force:
                os.replace(temp, p)
            else:
                os.link(temp, p)  # fails if someone created p meanwhile
        finally:
            if os.path.lexists(temp):
                os.unlink(temp)
    except FileExistsError:
        raise UsageError(f"{p}: already exists (use --force to overwrite)") from None
    except OSError as e:
        raise OutputError(f"{p}: cannot write the starter profile: {e.strerror or e}") from None
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
