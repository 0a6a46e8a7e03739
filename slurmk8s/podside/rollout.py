#!/usr/bin/env python3
"""What `up` does after applying, from inside the cluster: the GitOps hook Job (Argo CD PostSync, Helm
post-upgrade).

First the in-place reconfigure: nudge the controller pods, wait until slurmctld's mounted Slurm files
are the rendered ones (their digest, read by an exec in slurmctld), then `scontrol reconfigure`. Then
the rollout, with the same driver as `slurmk8s rollout` (rollout_core.py next to this file is
slurmk8s's podside/rollout_core.py): drain each stale slurmd pod's node, wait for its jobs, delete the pod,
wait for the new one, resume. It talks to the API with the Job's ServiceAccount token (get the pool
StatefulSets and their pods, delete those pods; annotate and exec in the controller pods: nothing
else) and to slurmctld as SlurmUser.

Standard library only; settings.json next to this file names the StatefulSets and spec.rollout.
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rollout_core  # noqa: E402  (shipped beside this file)
from kubeapi import Api, ApiError, log  # noqa: E402  (shipped beside this file)

ANNOTATION_CONFIG_SEEN = "slurmk8s.io/config-applied"  # actions/reconfigure.py's nudge


def slurm(argv):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def main():
    with open(os.path.join(HERE, "settings.json")) as fh:
        settings = json.load(fh)
    api = Api()

    def statefulsets():
        return [s for s in (api.statefulset(n) for n in settings["statefulsets"]) if s]

    def pods():
        # By name: the Role grants get/delete on exactly the pool pods, not a namespace-wide list.
        found = []
        for sts in statefulsets():
            for i in range(int(sts["spec"].get("replicas", 0))):
                pod = api.pod(f"{sts['metadata']['name']}-{i}")
                if pod:
                    found.append(pod)
        return found

    controllers = settings["controllers"]

    def seen():
        try:
            return api.exec(controllers[0], "slurmctld", rollout_core.SEEN_DIGEST)
        except OSError as e:
            log(f"reconfigure: {e}; retrying")
            return ""

    try:
        took = rollout_core.reconfigure_when_seen(
            settings["configDigest"], controllers,
            lambda pod, value: api.annotate_pod(pod, ANNOTATION_CONFIG_SEEN, value), seen, slurm,
            time.monotonic, time.sleep, settings["reconfigureTimeout"])
    except rollout_core.ReconfigureStopped as e:
        log(f"{e}; sync again")
        return 1
    log(f"reconfigured in place: slurmctld read the synced config {took:.0f} s after the sync; no pod restarted for it")
    effects = rollout_core.Effects(statefulsets=statefulsets, pods=pods, delete_pod=api.delete_pod, slurm=slurm,
                                   clock=time.monotonic, sleep=time.sleep, say=log)
    config = rollout_core.Settings(max_unavailable=settings["maxUnavailable"],
                                   drain_timeout=settings["drainTimeout"], ready_timeout=settings["readyTimeout"])
    try:
        rollout_core.run_rollout(effects, config)
    except rollout_core.RolloutStopped as e:
        log(str(e))
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApiError as e:
        log(str(e))
        sys.exit(1)
