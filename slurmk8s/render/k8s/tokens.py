"""Per-user slurmrestd tokens in Secrets, kept fresh without an operator (spec.restapi.tokens).

What Slinky's Token resource does with a controller, done with Kubernetes' own parts:
- `up` creates each Secret `<cluster>-token-<user>` once, empty (render/__init__.py's required secrets);
- the CronJob `<cluster>-tokens` mints every listed token with `scontrol token` (podside/tokens.py) as
  SlurmUser, with the cluster's slurm.conf and auth key like the accounts Job, and patches it into the
  Secret, at most a third of the shortest lifespan apart (profile/restapi.py refresh_minutes);
- a Job of the same pod, named by its content, fills the Secrets as soon as the bundle is applied, by
  `up`, Helm, Argo CD or kustomize alike, instead of waiting for the first scheduled run.

Who may read a token: whoever may read the Secrets of the namespace, and whom a site grants get on
that one Secret (docs/users-and-storage.md shows the Role). No reader list is rendered: a binding's
subject names a namespace, which a kustomize namespace overlay does not move for a ServiceAccount
outside the bundle, so it would grant the token across namespaces. The tokens ServiceAccount may
patch those Secrets by name and nothing else (not even read them).
"""

from __future__ import annotations

import json

from slurmk8s import naming
from slurmk8s.podside import shipped
from slurmk8s.profile.model import Profile
from slurmk8s.profile.restapi import refresh_minutes
from slurmk8s.render.k8s.podextras import with_pod_settings
from slurmk8s.render.k8s.common import Obj, config_hash, meta, role_binding, service_account, slurm_client_job_pod

PROGRAM_DIR = "/etc/slurmk8s/tokens"
BACKOFF_LIMIT = 6  # the first-fill Job retries until slurmctld answers (about 10 minutes of back-off)
KEEP_FINISHED_SECONDS = 24 * 3600


def token_settings(profile: Profile) -> str:
    """settings.json of the program: each user, lifespan and Secret."""
    tokens = [{"lifespan": t.lifespan, "secret": naming.token_secret(profile.name, t.user), "user": t.user}
              for t in profile.restapi_tokens]
    return json.dumps({"tokens": tokens}, indent=2, sort_keys=True) + "\n"


def build_configmap_tokens(profile: Profile) -> Obj:
    data = {"kubeapi.py": shipped("kubeapi.py"), "tokens.py": shipped("tokens.py"), "settings.json": token_settings(profile)}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta(profile, naming.component_name(profile.name, naming.TOKENS), naming.TOKENS),
            "data": dict(sorted(data.items()))}


def _pod(profile: Profile) -> Obj:
    """podside/tokens.py as SlurmUser, who may ask slurmctld for anyone's token."""
    return slurm_client_job_pod(profile, naming.TOKENS, "scontrol-token", PROGRAM_DIR, "tokens.py",
                                {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}})


def _job(profile: Profile, name: str, backoff: int) -> Obj:
    """A Job of the tokens pod, with the profile's pod settings (pull secrets, priority class ...)."""
    return with_pod_settings(profile, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta(profile, name, naming.TOKENS),
        "spec": {"backoffLimit": backoff, "activeDeadlineSeconds": 1800, "ttlSecondsAfterFinished": KEEP_FINISHED_SECONDS,
                 "template": {"metadata": {"labels": naming.object_labels(profile.name, naming.TOKENS)},
                              "spec": _pod(profile)}}})


def build_tokens_objects(profile: Profile) -> list[Obj]:
    """ServiceAccount, Role and RoleBinding, ConfigMap, CronJob and Job."""
    if not (profile.restapi_enabled and profile.restapi_tokens):
        return []
    name = naming.component_name(profile.name, naming.TOKENS)
    secrets = sorted(naming.token_secret(profile.name, t.user) for t in profile.restapi_tokens)
    rbac = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(profile, name, naming.TOKENS),
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": secrets, "verbs": ["patch"]}]}
    objects = [service_account(profile, naming.TOKENS), rbac, role_binding(profile, name, naming.TOKENS, name)]
    configmap = build_configmap_tokens(profile)
    every = refresh_minutes(profile.restapi_tokens)
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(profile, name, naming.TOKENS),
               "spec": {"schedule": f"*/{every} * * * *" if every < 60 else "0 * * * *",
                        "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": every * 60,
                        "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
                        "jobTemplate": {"metadata": {"labels": naming.object_labels(profile.name, naming.TOKENS)},
                                        "spec": _job(profile, name, backoff=2)["spec"]}}}
    # A Job's pod template cannot change: a new content is a new Job (the old one is pruned).
    first = _job(profile, naming.tokens_job(profile.name, config_hash(configmap["data"], _pod(profile))), BACKOFF_LIMIT)
    return objects + [configmap, cronjob, first]
