#!/usr/bin/env python3
"""slurmk8s power saving: Slurm's ResumeProgram/SuspendProgram for elastic slurmd pools.

slurmctld runs `power.py resume HOSTLIST` / `power.py suspend HOSTLIST`. It scales the
pools' StatefulSets through the Kubernetes API (statefulsets/scale) with the controller
pod's ServiceAccount token. A StatefulSet removes its highest ordinals first, so suspend
only lowers replicas past nodes that are idle and powering down or powered down; a node
Slurm suspends below a busy one keeps its pod until the nodes above it go.

Standard library only; kubeapi.py and nodestate.py beside it are the API client and the node-state
reader. pools.json next to this file maps each pool to its StatefulSet, or, for a pool split over
topology leaves, to its segments: node <pool>-<n> is pod n - offset of the segment whose range
offset..offset+max-1 holds n.
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kubeapi  # noqa: E402  (shipped beside this file)
import nodestate  # noqa: E402  (shipped beside this file)

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


def client():
    return kubeapi.Api(attempts=5, timeout=20, say=log)


def api(method, path, body=None):
    """The answer to one call on a scale subresource; kubeapi.ApiError when refused, missing or unreachable."""
    answer = client().call(method, path, body, kubeapi.MERGE_PATCH)
    if answer is None:
        raise kubeapi.ApiError(f"{method} {path}: 404 Not Found", 404)
    return answer


def scale_path(namespace, statefulset):
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{statefulset}/scale"


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
    """{node: NodeState} of nodes <pool>-offset .. <pool>-(offset+count-1); one sinfo does not list is missing."""
    first, last = offset, offset + count - 1
    out = subprocess.run(nodestate.command(f"{pool}-[{first}-{last}]" if count > 1 else f"{pool}-{first}"),
                         capture_output=True, text=True)
    return nodestate.parse(out.stdout)


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
            state = states.get(f"{pool}-{spec['offset'] + top}")
            idle_down = state is not None and (state.powered_down or state.powering_down) and not state.holds_jobs
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
    config["namespace"] = client().namespace  # a kustomize overlay may have moved the pod from the rendered one
    nodes = expand(argv[2])
    (resume if argv[1] == "resume" else suspend)(config, nodes)


if __name__ == "__main__":
    main(sys.argv)
