"""The Job that applies the account and QoS tree when a GitOps tool, not `up`, deploys the cluster.

Argo CD runs it as a PostSync hook and Helm as a post-install/post-upgrade hook (output/argocd.py,
output/helm.py); a kustomize tree applies it like any object. It runs the one applier
(slurmk8s/render/sacctmgr.py) with python3 in the controller image, as SlurmUser (an administrator
of slurmdbd), with the cluster's slurm.conf and auth key like any Slurm pod. It waits until slurmdbd
knows the cluster, then adds and changes what differs and deletes nothing, so running it again is
harmless. A cluster that `up` deploys does not need it: `up` applies the same tree itself.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.accounts import accounts_program, desired_tree, tree_to_json
from slurmk8s.render.k8s.common import Obj, config_hash, init_config_container, meta, mounts_config, pod_spec, volume_config

ENV_TREE = "SLURMK8S_ACCOUNTS"
BACKOFF_LIMIT = 6
DEADLINE_SECONDS = 3600
KEEP_FINISHED_SECONDS = 7 * 24 * 3600  # long enough to read its log after a sync


def build_job_accounts(profile: Profile, slurm_hash: str) -> Obj:
    """The Job; its name carries a hash of what it runs, so a changed tree or config is a new Job."""
    tree = tree_to_json(desired_tree(profile))
    image = profile.images.controller
    program = accounts_program()
    name = naming.accounts_job(profile.name, config_hash(tree, program, image, slurm_hash))
    labels = naming.object_labels(profile.name, naming.ACCOUNTS)
    sacctmgr = {
        "name": "sacctmgr",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["python3", "-c", program],
        "env": [{"name": ENV_TREE, "value": tree}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        # SlurmUser reads the auth key init-config installs (0600 slurm) and administers slurmdbd.
        "securityContext": {"runAsUser": naming.SLURM_UID, "runAsGroup": naming.SLURM_UID, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts_config(profile, init=False),
    }
    pod = pod_spec(profile, naming.ACCOUNTING, [sacctmgr], [init_config_container(profile, image)],
                   volume_config(profile), {"restartPolicy": "Never"})
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": meta(profile, name, naming.ACCOUNTS),
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "activeDeadlineSeconds": DEADLINE_SECONDS,
            "ttlSecondsAfterFinished": KEEP_FINISHED_SECONDS,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
