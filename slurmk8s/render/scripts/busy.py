#!/usr/bin/env python3
"""slurmk8s busy marking: slurmctld's PrologSlurmctld/EpilogSlurmctld for pool nodes.

`busy.py prolog` labels the pods of the job's nodes slurmk8s.io/busy=true; `busy.py epilog` labels a
node's pod busy=false once no other job holds the node. A PodDisruptionBudget with maxUnavailable 0
selects busy pods, so `kubectl drain` (an eviction) waits until their jobs end; idle pods go.

It runs as SlurmUser with the controller's ServiceAccount, whose Role allows patching exactly the pool
pods. It always exits 0: a failing PrologSlurmctld would requeue the job, and a missed label costs
only the eviction guard, never a job. Standard library only; nodes.json maps node names to pods.
"""

import json
import os
import ssl
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
LABEL = "slurmk8s.io/busy"


def log(message):
    print(f"slurmk8s-busy: {message}", file=sys.stderr, flush=True)


def pod_of(config, node):
    """The pod running Slurm node <pool>-<n>, or None for a node of no pool (side-by-side)."""
    pool, _, number = node.rpartition("-")
    if not number.isdigit():
        return None
    for segment in config["pools"].get(pool, []):
        if segment["offset"] <= int(number) < segment["offset"] + segment["slots"]:
            return f"{segment['statefulset']}-{int(number) - segment['offset']}"
    return None


def label(pod, value):
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    with open(os.path.join(SA_DIR, "token")) as fh:
        token = fh.read().strip()
    with open(os.path.join(SA_DIR, "namespace")) as fh:
        namespace = fh.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt"))
    context.check_hostname = False  # reached by IP; the cluster CA pins who answers
    body = json.dumps({"metadata": {"labels": {LABEL: value}}}).encode()
    request = urllib.request.Request(f"https://{host}:{port}/api/v1/namespaces/{namespace}/pods/{pod}",
                                     data=body, method="PATCH")
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/merge-patch+json")
    with urllib.request.urlopen(request, context=context, timeout=5):
        pass


def still_held(node, job):
    """True when a job other than `job` still runs on node."""
    out = subprocess.run(["squeue", "--noheader", f"--nodelist={node}", "--states=RUNNING,COMPLETING,SUSPENDED",
                          "--format=%i"], capture_output=True, text=True, timeout=20)
    return out.returncode != 0 or any(j != job for j in out.stdout.split())


def main(verb):
    with open(os.path.join(HERE, "nodes.json")) as fh:
        config = json.load(fh)
    job = os.environ.get("SLURM_JOB_ID", "")
    hostlist = os.environ.get("SLURM_JOB_NODELIST", "")
    if not hostlist:
        return
    nodes = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True,
                           timeout=20).stdout.split()
    for node in nodes:
        pod = pod_of(config, node)
        if pod is None or (verb == "epilog" and still_held(node, job)):
            continue
        label(pod, "true" if verb == "prolog" else "false")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception as e:  # never fail the job over a label
        log(f"{sys.argv[1:]}: {type(e).__name__}: {e}")
    sys.exit(0)
