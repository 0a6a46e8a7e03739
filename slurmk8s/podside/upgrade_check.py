#!/usr/bin/env python3
"""The GitOps upgrade check (Argo CD PreSync, Helm pre-upgrade): refuse a Slurm release step Slurm does not
support before anything is synced, as `slurmk8s up` does (docs/rollout.md).

It reads the release each live slurmdbd, slurmctld and slurmd StatefulSet runs (their
slurmk8s.io/slurm-version annotation) and applies slurmk8s's own rule: slurm_versions.py next to this
file is slurmk8s's versions.py. A refused step fails the Job, and with it the sync, naming the step.
Standard library only; settings.json names the target release and the StatefulSets (get by name: the
Job's Role allows nothing else).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import slurm_versions  # noqa: E402  (shipped beside this file)
from kubeapi import Api, ApiError, log  # noqa: E402  (shipped beside this file)

ANNOTATION_SLURM_VERSION = "slurmk8s.io/slurm-version"
TERMINATION_LOG = "/dev/termination-log"  # the kubelet puts it in the pod's status: Argo CD shows it


def main():
    with open(os.path.join(HERE, "settings.json")) as fh:
        settings = json.load(fh)
    api = Api()
    live = {}
    for name in settings["statefulsets"]:
        sts = api.statefulset(name)
        version = ((sts or {}).get("metadata", {}).get("annotations") or {}).get(ANNOTATION_SLURM_VERSION)
        if version:
            live[name] = version
    target = settings["target"]
    problem = slurm_versions.upgrade_refusal(live.values(), target)
    if not problem:
        log(f"upgrade check: Slurm {target} may follow what runs now "
            f"({', '.join(f'{n} {v}' for n, v in sorted(live.items())) or 'nothing yet'})")
        return 0
    message = f"spec.slurm.version: {problem}; nothing was synced"
    log(message)
    try:
        with open(TERMINATION_LOG, "w") as fh:
            fh.write(message)
    except OSError:
        pass
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApiError as e:
        log(f"upgrade check: {e}")
        sys.exit(1)
