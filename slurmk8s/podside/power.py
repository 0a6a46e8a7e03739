#!/usr/bin/env python3
"""slurmk8s power saving: Slurm's ResumeProgram/SuspendProgram for elastic slurmd pools.

slurmctld runs `power.py resume HOSTLIST` / `power.py suspend HOSTLIST`. It scales the
pools' StatefulSets through the Kubernetes API (statefulsets/scale) with the controller
pod's ServiceAccount token. A StatefulSet removes its highest ordinals first, so suspend
only lowers replicas past nodes that are idle and powering down or powered down; a node
Slurm suspends below a busy one keeps its pod until the nodes above it go.

Standard library only; pools.json next to this file maps each pool to its StatefulSet, or,
for a pool split over topology leaves, to its segments: node <pool>-<n> is pod n - offset of
the segment whose range offset..offset+max-1 holds n.
"""

import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DOWN_FLAGS = ("POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN")
# slurmctld ignores a resumed node's registration while the node's boot time is before the resume
# request (waiting_for_node_boot: boot_time < boot_req_time, both whole seconds; slurmd -b reports
# its own start, rounded down), and then marks the node down at ResumeTimeout, failing its job. A
# pod can start within a second of the scale (seen in the lab on 22.05), so no replica is added
# until this long after slurmctld called us.
BOOT_MARGIN_S = 2.0
CALLED = time.monotonic()


def log(message):
    print(f"slurmk8s-power: {message}", file=sys.stderr, flush=True)


def expand(hostlist):
    out = subprocess.run(["scontrol", "show", "hostnames", hostlist], check=True, capture_output=True, text=True)
    return out.stdout.split()


def api(method, path, body=None):
    # slurmctld may start the program with a bare environment: fall back to the API's cluster DNS name.
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    with open(os.path.join(SA_DIR, "token")) as fh:
        token = fh.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt"))
    context.check_hostname = False  # reached by IP or by name; the cluster CA pins who answers
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"https://{host}:{port}{path}", data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/merge-patch+json")
    for attempt in range(5):
        try:
            with urllib.request.urlopen(request, context=context, timeout=20) as response:
                return json.load(response)
        except OSError as e:  # includes HTTPError: retry the transient ones
            code = getattr(e, "code", None)
            if code is not None and code < 500 and code != 429:
                raise
            log(f"{method} {path}: {e}; retrying")
            time.sleep(1 + attempt)
    raise SystemExit(f"{method} {path}: API unreachable")


def scale_path(namespace, statefulset):
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{statefulset}/scale"


def own_namespace():
    """The namespace this pod runs in (a kustomize overlay may have moved it from the rendered one)."""
    with open(os.path.join(SA_DIR, "namespace")) as fh:
        return fh.read().strip()


def segments(config, pool):
    """The pool's segments: [{statefulset, offset, min, max}] (one for a pool without topology)."""
    spec = config["pools"][pool]
    if "segments" in spec:
        return spec["segments"]
    return [{"statefulset": spec["statefulset"], "offset": 0, "min": spec["min"], "max": spec["max"]}]


def by_segment(config, nodes):
    """{(pool, segment index): sorted pod ordinals} for the nodes of elastic pools."""
    found = {}
    for node in nodes:
        pool, _, number = node.rpartition("-")
        if pool not in config["pools"] or not number.isdigit():
            continue
        for index, seg in enumerate(segments(config, pool)):
            if seg["offset"] <= int(number) < seg["offset"] + seg["max"]:
                found.setdefault((pool, index), set()).add(int(number) - seg["offset"])
    return {key: sorted(o) for key, o in found.items()}


def node_states(pool, offset, count):
    first, last = offset, offset + count - 1
    out = subprocess.run(["scontrol", "-o", "show", "node", f"{pool}-[{first}-{last}]" if count > 1 else f"{pool}-{first}"],
                         capture_output=True, text=True)
    states = {}
    for line in out.stdout.splitlines():
        name = re.search(r"NodeName=(\S+)", line)
        state = re.search(r"State=(\S+)", line)
        if name and state:
            states[name.group(1)] = state.group(1)
    return states


def resume(config, nodes):
    for (pool, index), ordinals in sorted(by_segment(config, nodes).items()):
        spec = segments(config, pool)[index]
        path = scale_path(config["namespace"], spec["statefulset"])
        current = api("GET", path)["spec"].get("replicas", 0)
        wanted = min(max(current, ordinals[-1] + 1), spec["max"])
        if wanted != current:
            time.sleep(max(0.0, BOOT_MARGIN_S - (time.monotonic() - CALLED)))
            api("PATCH", path, {"spec": {"replicas": wanted}})
        log(f"resume {spec['statefulset']} {ordinals}: replicas {current} -> {wanted}")


def suspend(config, nodes):
    for (pool, index), ordinals in sorted(by_segment(config, nodes).items()):
        spec = segments(config, pool)[index]
        path = scale_path(config["namespace"], spec["statefulset"])
        current = api("GET", path)["spec"].get("replicas", 0)
        states = node_states(pool, spec["offset"], max(current, 1))
        going = set(ordinals)
        wanted = current
        # Shrink from the top only while the top node is idle and on its way down.
        while wanted > spec["min"]:
            top = wanted - 1
            state = states.get(f"{pool}-{spec['offset'] + top}", "")
            idle_down = any(flag in state for flag in DOWN_FLAGS) and "ALLOCATED" not in state and "MIXED" not in state
            if top in going or idle_down:
                wanted -= 1
            else:
                break
        if wanted != current:
            api("PATCH", path, {"spec": {"replicas": wanted}})
        log(f"suspend {spec['statefulset']} {ordinals}: replicas {current} -> {wanted}")


def main(argv):
    if len(argv) != 3 or argv[1] not in ("resume", "suspend"):
        raise SystemExit("usage: power.py resume|suspend HOSTLIST")
    with open(os.path.join(HERE, "pools.json")) as fh:
        config = json.load(fh)
    config["namespace"] = own_namespace()
    nodes = expand(argv[2])
    (resume if argv[1] == "resume" else suspend)(config, nodes)


if __name__ == "__main__":
    main(sys.argv)
