"""slurmrestd: Deployment + Service (JWT auth; the JWT key lives in slurmctld/slurmdbd, slurm.key not here)."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import (
    Obj, init_config_container, meta, mounts_config, pod_spec, volume_config,
)
from slurmk8s.render.k8s.probes import slurmrestd_probes

SLURMRESTD_UID = 65534  # slurmrestd refuses to run as root or SlurmUser


def build_service_restapi(profile: Profile) -> Obj:
    """ClusterIP Service on 6820."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": meta(profile, naming.component_name(profile.name, naming.RESTAPI), naming.RESTAPI),
            "spec": {"type": "ClusterIP", "selector": naming.selector_labels(profile.name, naming.RESTAPI),
                     "ports": [{"name": "slurmrestd", "port": 6820, "targetPort": 6820, "protocol": "TCP"}]}}


def build_deployment_restapi(profile: Profile, config_hash: str) -> Obj:
    """slurmrestd listening on 0.0.0.0:6820 with rest_auth/jwt."""
    name = naming.component_name(profile.name, naming.RESTAPI)
    image = profile.images.restapi
    container = {
        "name": "slurmrestd",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["slurmrestd", "-a", "rest_auth/jwt", "0.0.0.0:6820"],
        # slurmrestd unshares its SysV IPC and file table per request, which a non-root process
        # under the RuntimeDefault seccomp profile may not do ("Unable to unshare System V
        # namespace", fatal, found on kind); the pod's own namespaces isolate it instead.
        "env": [{"name": "SLURM_JWT", "value": "daemon"},
                {"name": "SLURMRESTD_SECURITY", "value": "disable_unshare_sysv,disable_unshare_files"}],
        "ports": [{"name": "slurmrestd", "containerPort": 6820, "protocol": "TCP"}],
        **slurmrestd_probes(6820),
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": {"runAsUser": SLURMRESTD_UID, "runAsGroup": SLURMRESTD_UID, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts_config(profile, init=False),
    }
    # No slurm.key: under auth/slurm slurmrestd is a client (the plugin loads the key only in sackd, slurmd,
    # slurmctld and slurmdbd: auth_slurm.c init() in 24.11 and 26.05), it sends the users' tokens (auth/jwt),
    # and as uid 65534 it could not read a key of 0600 slurm anyway. munged, beside it under munge, needs its key.
    key = profile.auth != "slurm"
    pod = pod_spec(profile, naming.RESTAPI, [container],
                   [init_config_container(profile, image, ["chmod 0644 /etc/slurm/*.conf"], key=key)],
                   volume_config(profile, key=key))
    selector = naming.selector_labels(profile.name, naming.RESTAPI)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": meta(profile, name, naming.RESTAPI),
        "spec": {
            "replicas": profile.restapi_replicas,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": naming.object_labels(profile.name, naming.RESTAPI),
                                      "annotations": {naming.ANNOTATION_CONFIG_HASH: config_hash}},
                         "spec": pod},
        },
    }
