"""The programs slurmk8s ships into pods, as source, and the modules they share.

Each file here runs inside a pod with the image's python3 (or sh) and nothing else: the renderer copies
its text into a ConfigMap (or a Job's `python3 -c`), where the files lie flat in one directory and
import each other by their bare names (`import kubeapi`). So these modules use the standard library
only and import nothing of slurmk8s (tests/test_layers.py); the CLI imports the shared ones
(rollout_core, sacctmgr, nodestate) so that it and the pods agree. kubeapi.py is the one Kubernetes
API client of the pods, nodestate.py the one reader of Slurm node states.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def shipped(name: str) -> str:
    """The text of one shipped file (`busy.py`, `healthcheck.sh` ...), as package data: this works from a wheel too."""
    return resources.files(__name__).joinpath(name).read_text("utf-8")
