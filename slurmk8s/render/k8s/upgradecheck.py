"""The GitOps upgrade check: a hook Job that refuses a Slurm release step Slurm does not support before
Argo CD (PreSync) or Helm (pre-install, pre-upgrade) writes anything, as `up` refuses it (docs/rollout.md).

It reads the slurm-version annotation of the live slurmdbd, slurmctld and pool StatefulSets and applies
slurmk8s's own rule (versions.upgrade_refusal; the ConfigMap ships versions.py itself). Its objects
carry naming.ANNOTATION_HOOK: the outputs turn that into their before-sync hook annotations. The order
of the steps themselves comes from the sync waves (slurmdbd, then slurmctld, then the pools).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from slurmk8s import naming
from slurmk8s.podside import shipped
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import Obj, config_hash, meta, role_binding, service_account
from slurmk8s.render.topology import pool_segments

CHECK_DIR = "/etc/slurmk8s/upgrade-check"


@lru_cache(maxsize=1)
def check_programs() -> dict[str, str]:
    """The check, its API client, and slurmk8s's own version rule."""
    return {"kubeapi.py": shipped("kubeapi.py"),
            "slurm_versions.py": resources.files("slurmk8s").joinpath("versions.py").read_text("utf-8"),
            "upgrade_check.py": shipped("upgrade_check.py")}


def slurm_statefulsets(profile: Profile) -> list[str]:
    """The StatefulSets whose release the check reads: slurmdbd's, slurmctld's and the pools'."""
    names = [naming.component_name(profile.name, naming.CONTROLLER)]
    if profile.accounting.enabled:
        names.append(naming.component_name(profile.name, naming.ACCOUNTING))
    names += [s.statefulset for p in profile.pools for s in pool_segments(profile, p)]
    return sorted(names)


def _before_sync(obj: Obj) -> Obj:
    annotations = {**obj["metadata"].get("annotations", {}), naming.ANNOTATION_HOOK: naming.HOOK_BEFORE_SYNC}
    return {**obj, "metadata": {**obj["metadata"], "annotations": dict(sorted(annotations.items()))}}


def build_hooks_upgrade_check(profile: Profile) -> list[Obj]:
    """ServiceAccount, Role (get on those StatefulSets, by name), RoleBinding, ConfigMap and Job, in that order."""
    name = naming.component_name(profile.name, naming.UPGRADE_CHECK)
    sa = service_account(profile, naming.UPGRADE_CHECK)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": meta(profile, name, naming.UPGRADE_CHECK),
            "rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"],
                       "resourceNames": slurm_statefulsets(profile), "verbs": ["get"]}]}
    binding = role_binding(profile, name, naming.UPGRADE_CHECK, name)
    settings = json.dumps({"statefulsets": slurm_statefulsets(profile), "target": profile.version},
                          indent=2, sort_keys=True) + "\n"
    data = {**check_programs(), "settings.json": settings}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(profile, name, naming.UPGRADE_CHECK),
                 "data": dict(sorted(data.items()))}
    return [_before_sync(o) for o in (sa, role, binding, configmap, build_job_upgrade_check(profile, data))]


def build_job_upgrade_check(profile: Profile, data: dict[str, str]) -> Obj:
    """The Job: python3 in the target release's controller image, as SlurmUser, reading only the API."""
    image = profile.images.controller
    check = {
        "name": "upgrade-check",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["python3", f"{CHECK_DIR}/upgrade_check.py"],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
        "securityContext": {"runAsUser": naming.SLURM_UID, "runAsGroup": naming.SLURM_UID, "runAsNonRoot": True,
                            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "check", "mountPath": CHECK_DIR, "readOnly": True}],
    }
    pod = {
        "serviceAccountName": naming.component_name(profile.name, naming.UPGRADE_CHECK),
        "automountServiceAccountToken": True,
        "enableServiceLinks": False,
        "restartPolicy": "Never",
        # The token is read as SlurmUser: the kubelet makes it group-readable for the pod's fsGroup.
        "securityContext": {"fsGroup": naming.SLURM_UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [check],
        "volumes": [{"name": "check", "configMap": {"name": naming.component_name(profile.name, naming.UPGRADE_CHECK),
                                                    "defaultMode": 0o444}}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": meta(profile, naming.upgrade_check_job(profile.name, config_hash(data, image)), naming.UPGRADE_CHECK),
        "spec": {
            "backoffLimit": 0,  # a refused step stays refused: fail the sync at once
            "activeDeadlineSeconds": 600,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {"metadata": {"labels": naming.object_labels(profile.name, naming.UPGRADE_CHECK)}, "spec": pod},
        },
    }
