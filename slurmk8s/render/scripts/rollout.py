#!/usr/bin/env python3
"""slurmk8s rollout from inside the cluster: the GitOps hook Job (Argo CD PostSync, Helm post-upgrade).

It runs the same driver as `slurmk8s rollout` (rollout_core.py next to this file is slurmk8s's
render/rollout.py): drain each stale slurmd pod's node, wait for its jobs, delete the pod, wait for
the new one, resume. It talks to the API with the Job's ServiceAccount token (get the pool
StatefulSets and their pods, delete those pods: nothing else) and to slurmctld as SlurmUser.

Standard library only; settings.json next to this file names the StatefulSets and spec.rollout.
"""

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rollout_core  # noqa: E402  (shipped beside this file)

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def log(message):
    print(message, file=sys.stderr, flush=True)


class Api:
    """The few API calls the rollout makes, with the pod's ServiceAccount."""

    def __init__(self):
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.base = f"https://{host}:{port}"
        with open(os.path.join(SA_DIR, "namespace")) as fh:
            self.namespace = fh.read().strip()
        self.context = ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt"))
        self.context.check_hostname = False  # reached by IP; the cluster CA pins who answers

    def call(self, method, path):
        """The decoded answer; None for 404."""
        with open(os.path.join(SA_DIR, "token")) as fh:
            token = fh.read().strip()  # re-read: the kubelet rotates projected tokens
        request = urllib.request.Request(self.base + path, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Accept", "application/json")
        for attempt in range(6):
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                    return json.load(response)
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return None
                if e.code < 500 and e.code != 429:
                    raise SystemExit(f"{method} {path}: {e.code} {e.reason}")
                log(f"{method} {path}: {e}; retrying")
            except OSError as e:
                log(f"{method} {path}: {e}; retrying")
            time.sleep(1 + attempt)
        raise SystemExit(f"{method} {path}: API unreachable")

    def statefulset(self, name):
        return self.call("GET", f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{name}")

    def pod(self, name):
        return self.call("GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def delete_pod(self, name):
        self.call("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}")


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
    sys.exit(main())
