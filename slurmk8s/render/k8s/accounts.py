"""The Job that applies the account and QoS tree when a GitOps tool, not `up`, deploys the cluster.

Argo CD runs it as a PostSync hook and Helm as a post-install/post-upgrade hook (output/argocd.py,
output/helm.py); a kustomize tree applies it like any object. It runs the one applier
(slurmk8s/render/sacctmgr.py) with python3 in the controller image, as SlurmUser (an administrator
of slurmdbd), with the cluster's slurm.conf and auth key like any Slurm pod. It waits until slurmdbd
knows the cluster, then adds and changes what differs and deletes nothing, so running it again is
harmless. A cluster that `up` deploys does not need it: `up` applies the same tree itself.

Also here: the tree a profile asks for (desired_tree) and slurm/accounts.sh, the commands that build
it in a fresh database. Reconciling a live slurmdbd to the tree is not rendering: actions/accounts.py
does it with the applier (render/sacctmgr.py, which is here only because the Job ships its source).
Reference: https://slurm.schedmd.com/sacctmgr.html
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from importlib import resources

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import (
    Obj, config_hash, init_config_container, meta, mounts_config, pod_spec, sack_client_mounts, sack_volumes, sackd_sidecar,
    volume_config,
)
from slurmk8s.render.sacctmgr import (
    AccountState, QosState, Tree, UserAssoc, fresh_tree, plan_accounts, slurm_minutes, tree_to_json,
)

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
        "volumeMounts": mounts_config(profile, init=False) + sack_client_mounts(profile),
    }
    pod = pod_spec(profile, naming.ACCOUNTING, [sacctmgr], [init_config_container(profile, image)] + sackd_sidecar(profile),
                   volume_config(profile) + sack_volumes(profile), {"restartPolicy": "Never"})
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


@lru_cache(maxsize=1)
def accounts_program() -> str:
    """What the GitOps Job runs with python3: the applier's source, then the Job's entry point."""
    here = resources.files("slurmk8s.render")
    return here.joinpath("sacctmgr.py").read_text("utf-8") + "\n\n" + here.joinpath("scripts/accounts_job.py").read_text("utf-8")


def manages_accounts(profile: Profile) -> bool:
    """True when the profile has an account tree and a slurmdbd to hold it."""
    return profile.scheduling.manages_tree and profile.accounting.enabled


def desired_tree(profile: Profile) -> Tree:
    """The tree the profile asks for, on top of what every database holds."""
    s = profile.scheduling
    tree = fresh_tree(profile.name)
    for a in s.accounts:
        tree.accounts[a.name] = AccountState(a.name, a.parent, a.fairshare, a.qos, a.default_qos or "")
        for u in a.users:
            tree.users[(u, a.name)] = UserAssoc(u, a.name, a.qos, a.default_qos or "")
    for user in s.users:
        tree.default_accounts[user.name] = user.default_account
    for q in s.qos:
        tree.qos[q.name] = QosState(q.name, q.priority, q.preempt, q.grp_tres, q.max_tres_per_user,
                                    q.max_tres_per_job, slurm_minutes(q.max_wall) if q.max_wall else None,
                                    q.max_jobs_per_user)
    return tree


def render_accounts_file(profile: Profile) -> str | None:
    """slurm/accounts.sh: the sacctmgr commands that build the profile's tree in a fresh database."""
    if not manages_accounts(profile):
        return None
    lines = [f"# Accounts, users and QoS of cluster {profile.name} in slurmdbd, generated by slurmk8s; do not edit.",
             "# These commands build the tree in a fresh database. `slurmk8s up`, `slurmk8s accounts apply` and",
             "# the GitOps Job read the live tree and run only the difference (nothing is deleted unless asked).",
             "# Reference: https://slurm.schedmd.com/sacctmgr.html"]
    lines += [shlex.join(cmd) for cmd in plan_accounts(desired_tree(profile), fresh_tree(profile.name))]
    return "\n".join(lines) + "\n"
