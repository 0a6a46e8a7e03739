"""Elastic pools: Slurm's power saving scales the pools' StatefulSets (ResumeProgram/SuspendProgram).

The scripts (podside/power.py) run inside slurmctld with the controller's ServiceAccount;
RBAC lets that account get/patch statefulsets/scale of exactly the elastic pools, nothing more.
"""

from __future__ import annotations

import json
from slurmk8s import naming
from slurmk8s.podside import shipped
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import Obj, meta, role_binding
from slurmk8s.render.slurmfiles import POWER_DIR
from slurmk8s.render.topology import pool_segments



def power_script() -> str:
    """The resume/suspend program shipped in the ConfigMap."""
    return shipped("power.py")


def elastic_pools(profile: Profile):
    """Pools whose size Slurm changes (minReplicas < maxReplicas)."""
    return [p for p in profile.pools if p.elastic]


def power_config(profile: Profile) -> str:
    """pools.json: which StatefulSet each elastic pool is, and its range; a pool split over
    topology leaves lists its segments instead (node <pool>-<n> is in the segment whose range holds n)."""
    pools = {}
    for p in elastic_pools(profile):
        segments = pool_segments(profile, p)
        if segments[0].domain is None:
            pools[p.name] = {"statefulset": segments[0].statefulset, "min": p.min_replicas, "max": p.max_replicas}
        else:
            pools[p.name] = {"segments": [{"statefulset": s.statefulset, "offset": s.offset, "min": s.min_replicas,
                                           "max": s.slots} for s in segments]}
    # No namespace: the program scales the pools in the namespace its pod runs in (a kustomize
    # overlay may move the whole tree), read from the service account's namespace file.
    return json.dumps({"pools": pools}, indent=2, sort_keys=True) + "\n"


def build_configmap_power(profile: Profile) -> Obj:
    """power.py, its API client and node-state reader, pools.json and the two programs slurm.conf names."""
    wrapper = "#!/bin/sh\nexec python3 {dir}/power.py {verb} \"$1\"\n"
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta(profile, naming.power_config_map(profile.name), naming.CONTROLLER),
            "data": {"kubeapi.py": shipped("kubeapi.py"), "nodestate.py": shipped("nodestate.py"),
                     "pools.json": power_config(profile), "power.py": power_script(),
                     "resume": wrapper.format(dir=POWER_DIR, verb="resume"),
                     "suspend": wrapper.format(dir=POWER_DIR, verb="suspend")}}


def build_role_power(profile: Profile) -> Obj:
    """get/patch on statefulsets/scale of the elastic pools only."""
    names = sorted(s.statefulset for p in elastic_pools(profile) for s in pool_segments(profile, p))
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": meta(profile, naming.role(profile.name, "power"), naming.CONTROLLER),
            "rules": [{"apiGroups": ["apps"], "resources": ["statefulsets/scale"],
                       "resourceNames": names, "verbs": ["get", "patch"]}]}


def build_rolebinding_power(profile: Profile) -> Obj:
    """Bind the power Role to the controller's ServiceAccount."""
    return role_binding(profile, naming.role(profile.name, "power"), naming.CONTROLLER,
                        naming.component_name(profile.name, naming.CONTROLLER))
