"""Job-safe replacement of slurmd pods: OnDelete pools, the Slurm version on every workload, busy-aware
PodDisruptionBudgets, and the GitOps hook that runs the rollout (podside/rollout_core.py) from inside the cluster.

The hook (a ServiceAccount, a Role, its binding, a ConfigMap and a Job) goes in Bundle.hooks: Argo CD
runs it as a PostSync hook and Helm as a post-upgrade hook (output/argocd.py, output/helm.py). It first
makes slurmctld take the synced Slurm files (`scontrol reconfigure`), then rolls the pools; `up` does
the same work itself (actions/up.py, actions/rollout.py).
"""

from __future__ import annotations

import json
from slurmk8s import naming
from slurmk8s.podside import rollout_core
from slurmk8s.podside import shipped
from slurmk8s.profile.model import Pool, Profile
from slurmk8s.render.k8s.common import Obj, config_hash, meta, role_binding, service_account, slurm_client_job_pod
from slurmk8s.render.topology import pool_segments

ROLLOUT_DIR = "/etc/slurmk8s/rollout"
BUSY_DIR = "/etc/slurmk8s/busy"  # the busy-marking programs, mounted in slurmctld
# How long one replaced pod may take to come back Ready and registered (image pulls count).
READY_TIMEOUT = 900
# How long the hook waits for the kubelet to refresh slurmctld's Slurm files (`up` waits as long).
RECONFIGURE_TIMEOUT = 300
# Components whose workloads carry the Slurm release they run.


def with_rollout_fields(profile: Profile, obj: Obj) -> Obj:
    """A copy of a workload with the Slurm version annotation, and OnDelete for a pool's StatefulSet."""
    labels = obj["metadata"].get("labels") or {}
    if obj["kind"] not in naming.WORKLOAD_KINDS or labels.get(naming.LABEL_COMPONENT) not in naming.SLURM_COMPONENTS:
        return obj
    annotations = {**obj["metadata"].get("annotations", {}), naming.ANNOTATION_SLURM_VERSION: profile.version}
    out = {**obj, "metadata": {**obj["metadata"], "annotations": dict(sorted(annotations.items()))}}
    if obj["kind"] == "StatefulSet" and rollout_core.is_pool_statefulset(obj):
        # A changed template replaces no pod by itself: the rollout drains each node first.
        out["spec"] = {**obj["spec"], "updateStrategy": {"type": rollout_core.ON_DELETE}}
    if obj["kind"] == "StatefulSet" and labels.get(naming.LABEL_COMPONENT) == naming.CONTROLLER and profile.pools:
        out = with_busy_programs(profile, out)
    return out


def build_pdbs_pool(profile: Profile, pool: Pool) -> list[Obj]:
    """Two budgets per pool, disjoint (the eviction API refuses a pod two budgets select): idle pods one
    at a time, busy pods (a job runs on them, label slurmk8s.io/busy=true) never."""
    name = naming.pool_statefulset(profile.name, pool.name)
    labels = naming.selector_labels(profile.name, naming.WORKER, pool.name)
    idle = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": meta(profile, name, naming.WORKER, pool.name),
            "spec": {"maxUnavailable": 1,
                     "selector": {"matchLabels": dict(labels),
                                  "matchExpressions": [{"key": naming.LABEL_BUSY, "operator": "NotIn",
                                                        "values": ["true"]}]}}}
    busy = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": meta(profile, f"{name}-busy", naming.WORKER, pool.name),
            "spec": {"maxUnavailable": 0,
                     "selector": {"matchLabels": {**labels, naming.LABEL_BUSY: "true"}}}}
    return [idle, busy]


def with_busy_marking(profile: Profile, files: dict[str, str]) -> dict[str, str]:
    """slurm.conf with PrologSlurmctld/EpilogSlurmctld marking pool pods busy or idle (podside/busy.py);
    the lines go before the node definitions."""
    if not profile.pools:
        return files
    lines = ("# Mark pool pods busy while a job runs, so a PodDisruptionBudget keeps evictions away from them\n"
             "# (https://slurm.schedmd.com/prolog_epilog.html).\n"
             f"PrologSlurmctld={BUSY_DIR}/prolog\nEpilogSlurmctld={BUSY_DIR}/epilog\n")
    conf = files["slurm.conf"]
    at = conf.find("\nNodeName=")
    conf = conf + lines if at < 0 else conf[:at + 1] + lines + conf[at + 1:]
    return {**files, "slurm.conf": conf}


def busy_nodes(profile: Profile) -> str:
    """nodes.json: node <pool>-<n> is pod n - offset of the segment whose offset..offset+slots-1 holds n."""
    pools = {p.name: [{"statefulset": s.statefulset, "offset": s.offset, "slots": s.slots}
                      for s in pool_segments(profile, p)] for p in profile.pools}
    return json.dumps({"pools": pools}, indent=2, sort_keys=True) + "\n"


def build_busy_objects(profile: Profile) -> list[Obj]:
    """The busy-marking ConfigMap, and a Role letting slurmctld patch exactly the pool pods (their labels)."""
    if not profile.pools:
        return []
    name = naming.role(profile.name, "busy")
    wrapper = "#!/bin/sh\nexec python3 {dir}/busy.py {verb}\n"
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(profile, name, naming.CONTROLLER),
                 "data": {"busy.py": busy_program(),
                          "epilog": wrapper.format(dir=BUSY_DIR, verb="epilog"), "kubeapi.py": shipped("kubeapi.py"),
                          "nodes.json": busy_nodes(profile), "nodestate.py": shipped("nodestate.py"),
                          "prolog": wrapper.format(dir=BUSY_DIR, verb="prolog")}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(profile, name, naming.CONTROLLER),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "resourceNames": pool_pods(profile), "verbs": ["patch"]}]}
    binding = role_binding(profile, name, naming.CONTROLLER, naming.component_name(profile.name, naming.CONTROLLER))
    return [role, binding, configmap]


BUSY_POLICY = "busy-label-only"


def _unchanged(field: str) -> str:
    """CEL: a pod's metadata field is as it was (absent before and after, or equal)."""
    return (f"has(object.metadata.{field}) == has(oldObject.metadata.{field}) && "
            f"(!has(object.metadata.{field}) || object.metadata.{field} == oldObject.metadata.{field})")


def build_busy_policy(profile: Profile) -> list[Obj]:
    """A ValidatingAdmissionPolicy and its binding: the controller's token changes a pool pod's busy label
    and nothing else of it (RBAC grants `patch pods`, which it cannot confine to a label). Cluster-scoped, so
    named after the namespace; the token is known by the pod's namespace, so a chart's release namespace needs
    no edit of the expression."""
    if not (profile.admission_policy and profile.pools):
        return []
    name = naming.cluster_scoped(profile.namespace, profile.name, BUSY_POLICY)
    token = naming.component_name(profile.name, naming.CONTROLLER)
    busy = naming.LABEL_BUSY
    labels = (f"has(object.metadata.labels) && has(oldObject.metadata.labels) && "
              f"object.metadata.labels.all(k, k == '{busy}' || "
              f"(k in oldObject.metadata.labels && oldObject.metadata.labels[k] == object.metadata.labels[k])) && "
              f"oldObject.metadata.labels.all(k, k == '{busy}' || k in object.metadata.labels)")
    value = f"!('{busy}' in object.metadata.labels) || object.metadata.labels['{busy}'] in ['true', 'false']"
    why = "the controller's ServiceAccount may change only the " + busy + " label of a pool pod"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": meta(profile, name, naming.CONTROLLER, namespaced=False),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["UPDATE"], "resources": ["pods"]}]},
            "matchConditions": [{"name": "controller-token", "expression":
                                 f"request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':{token}'"}],
            "validations": [
                {"expression": "object.spec == oldObject.spec", "message": f"{why}, not its spec"},
                {"expression": labels, "message": f"{why}, not its other labels"},
                {"expression": value, "message": f"{busy} is 'true' or 'false'"},
                {"expression": " && ".join(_unchanged(f) for f in ("annotations", "finalizers", "ownerReferences")),
                 "message": f"{why}, not its annotations, finalizers or owners"},
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta(profile, name, naming.CONTROLLER, namespaced=False),
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 # Old or new object matching counts (admission's rule), so a relabel cannot step outside it.
                 "matchResources": {"objectSelector": {"matchLabels": {naming.LABEL_INSTANCE: profile.name,
                                                                       naming.LABEL_COMPONENT: naming.WORKER}}}},
    }
    return [policy, binding]


def with_busy_programs(profile: Profile, sts: Obj) -> Obj:
    """The controller's StatefulSet with the busy-marking programs mounted and its token (for the Role)."""
    pod = sts["spec"]["template"]["spec"]
    volume = {"name": "busy", "configMap": {"name": naming.role(profile.name, "busy"), "defaultMode": 0o555}}
    containers = [{**c, "volumeMounts": c.get("volumeMounts", []) + [{"name": "busy", "mountPath": BUSY_DIR,
                                                                      "readOnly": True}]}
                  if c["name"] == "slurmctld" else c for c in pod["containers"]]
    pod = {**pod, "automountServiceAccountToken": True, "containers": containers,
           "volumes": pod.get("volumes", []) + [volume]}
    return {**sts, "spec": {**sts["spec"], "template": {**sts["spec"]["template"], "spec": pod}}}


def busy_program() -> str:
    """The PrologSlurmctld/EpilogSlurmctld program shipped in the busy ConfigMap."""
    return shipped("busy.py")


def rollout_programs() -> dict[str, str]:
    """The hook's files: its runner, its API client, the node-state reader and the driver (podside/rollout_core.py)."""
    return {name: shipped(name) for name in ("kubeapi.py", "nodestate.py", "rollout.py", "rollout_core.py")}


def pool_statefulsets(profile: Profile) -> list[str]:
    return sorted(s.statefulset for p in profile.pools for s in pool_segments(profile, p))


def pool_pods(profile: Profile) -> list[str]:
    """Every pod name a pool can have (its slots), for the Role's resourceNames."""
    names: list[str] = []
    for p in profile.pools:
        for s in pool_segments(profile, p):
            names += naming.pod_names(s.statefulset, s.slots)
    return sorted(names)


def controller_pods(profile: Profile) -> list[str]:
    sts = naming.component_name(profile.name, naming.CONTROLLER)
    return [naming.pod_name(sts, i) for i in range(profile.controller_replicas)]


def rollout_settings(profile: Profile, slurm_files: dict[str, str]) -> str:
    """settings.json: what to reconfigure (the Slurm ConfigMap's digest, as slurmctld must see it) and roll."""
    return json.dumps({"statefulsets": pool_statefulsets(profile), "maxUnavailable": profile.rollout.max_unavailable,
                       "drainTimeout": profile.rollout.drain_timeout, "readyTimeout": READY_TIMEOUT,
                       "controllers": controller_pods(profile), "configDigest": rollout_core.files_digest(slurm_files),
                       "reconfigureTimeout": RECONFIGURE_TIMEOUT},
                      indent=2, sort_keys=True) + "\n"


def build_hooks_rollout(profile: Profile, pool_templates: list[Obj], slurm_files: dict[str, str]) -> list[Obj]:
    """ServiceAccount, Role, RoleBinding, ConfigMap and Job of the in-cluster reconfigure and rollout, in that
    order. slurm_files: the data of the Slurm ConfigMap."""
    name = naming.component_name(profile.name, naming.ROLLOUT)
    sa = service_account(profile, naming.ROLLOUT)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": meta(profile, name, naming.ROLLOUT),
            "rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"],
                       "resourceNames": pool_statefulsets(profile), "verbs": ["get"]},
                      {"apiGroups": [""], "resources": ["pods"], "resourceNames": pool_pods(profile),
                       "verbs": ["get", "delete"]},
                      # The reconfigure: nudge the kubelet (an annotation) and read slurmctld's files (exec;
                      # a WebSocket exec is a GET, authorized as create from Kubernetes 1.31).
                      {"apiGroups": [""], "resources": ["pods"], "resourceNames": controller_pods(profile),
                       "verbs": ["patch"]},
                      {"apiGroups": [""], "resources": ["pods/exec"], "resourceNames": controller_pods(profile),
                       "verbs": ["create", "get"]}]}
    binding = role_binding(profile, name, naming.ROLLOUT, name)
    data = {**rollout_programs(), "settings.json": rollout_settings(profile, slurm_files)}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(profile, name, naming.ROLLOUT),
                 "data": dict(sorted(data.items()))}
    return [sa, role, binding, configmap, build_job_rollout(profile, data, pool_templates)]


def build_job_rollout(profile: Profile, data: dict[str, str], pool_templates: list[Obj]) -> Obj:
    """The Job; named by the pool templates it rolls to and what it runs, so each change is a new Job."""
    image = profile.images.controller
    # scontrol reconfigure, drain and resume as SlurmUser; get and delete of pool pods with the Job's token.
    pod = slurm_client_job_pod(profile, naming.ROLLOUT, "rollout", ROLLOUT_DIR, "rollout.py",
                               {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}})
    slots = sum(s.slots for p in profile.pools for s in pool_segments(profile, p))
    batches = -(-slots // profile.rollout.max_unavailable)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": meta(profile, naming.rollout_job(profile.name, config_hash(pool_templates, data, image)),
                         naming.ROLLOUT),
        "spec": {
            # A stopped rollout (jobs outlived drainTimeout) fails the sync and says why; retrying
            # would only wait again.
            "backoffLimit": 0,
            "activeDeadlineSeconds": batches * (profile.rollout.drain_timeout + READY_TIMEOUT) + RECONFIGURE_TIMEOUT + 600,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {"metadata": {"labels": naming.object_labels(profile.name, naming.ROLLOUT)}, "spec": pod},
        },
    }
