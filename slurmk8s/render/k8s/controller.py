"""slurmctld: StatefulSet (1, or 2 with a backup) with StateSaveLocation on a PVC, headless Service."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.slurmfiles import POWER_DIR
from slurmk8s.render.k8s.common import (
    Obj, headless_service, meta, init_config_container, mounts_config, pod_spec, pvc_template,
    statefulset, volume_config,
)

STATE_SAVE = "/var/spool/slurmctld"


def build_service_controller(profile: Profile) -> Obj:
    """Headless Service governing the controller pods (SlurmctldHost addresses)."""
    name = naming.component_name(profile.name, naming.CONTROLLER)
    return headless_service(profile, name, naming.CONTROLLER, [("slurmctld", 6817)],
                            naming.selector_labels(profile.name, naming.CONTROLLER))


def build_statefulset_controller(profile: Profile, config_hash: str) -> Obj:
    """slurmctld in the foreground; a JWT key mounted when slurmrestd is on."""
    name = naming.component_name(profile.name, naming.CONTROLLER)
    image = profile.images.controller
    volumes = volume_config(profile)
    extra_mounts, script = [{"name": "statesave", "mountPath": STATE_SAVE}], [f"chown slurm:slurm {STATE_SAVE}"]
    if profile.restapi_enabled:
        volumes.append({"name": "jwt-key", "secret": {"secretName": naming.jwt_secret(profile.name), "defaultMode": 0o400,
                                                      "items": [{"key": "jwt_hs256.key", "path": "jwt_hs256.key"}]}})
        extra_mounts.append({"name": "jwt-key", "mountPath": "/mnt/jwt-key", "readOnly": True})
        script.append("install -m 0600 -o slurm -g slurm /mnt/jwt-key/jwt_hs256.key /etc/slurm/jwt_hs256.key")
    slurmctld = {
        "name": "slurmctld",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["slurmctld", "-D"],
        "ports": [{"name": "slurmctld", "containerPort": 6817, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": 6817}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": 6817}, "periodSeconds": 30, "failureThreshold": 6},
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": ["SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE"]}},
        # Slurm 25.11+ keeps runtime files in /run/slurmctld, created after dropping to SlurmUser.
        "volumeMounts": mounts_config(profile, init=False) + [{"name": "statesave", "mountPath": STATE_SAVE},
                                                              {"name": "run", "mountPath": "/run/slurmctld"}],
    }
    volumes.append({"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}})
    extra: Obj = {}
    if any(p.elastic for p in profile.pools):
        # ResumeProgram/SuspendProgram run here and scale the pools with this pod's ServiceAccount.
        volumes.append({"name": "power", "configMap": {"name": naming.power_config_map(profile.name), "defaultMode": 0o555}})
        slurmctld["volumeMounts"].append({"name": "power", "mountPath": POWER_DIR, "readOnly": True})
        extra["automountServiceAccountToken"] = True
    pod = pod_spec(profile, naming.CONTROLLER,
                   [slurmctld],
                   [init_config_container(profile, image, script, extra_mounts)],
                   volumes, extra)
    claims = []
    if profile.controller_replicas == 1:
        claims = [pvc_template("statesave", profile.controller_storage.size, profile.controller_storage.storage_class)]
    else:
        # Primary and backup must share one StateSaveLocation: one ReadWriteMany claim.
        volumes.append({"name": "statesave", "persistentVolumeClaim": {"claimName": shared_statesave_claim(profile)}})
    return statefulset(
        profile, name, naming.CONTROLLER, profile.controller_replicas, name, pod,
        {naming.ANNOTATION_CONFIG_HASH: config_hash}, claims=claims,
    )


def shared_statesave_claim(profile: Profile) -> str:
    """Name of the ReadWriteMany claim a primary and a backup slurmctld share."""
    return f"{naming.component_name(profile.name, naming.CONTROLLER)}-statesave"


def build_pvc_controller_shared(profile: Profile) -> Obj | None:
    """The shared StateSaveLocation claim (only with a backup controller)."""
    if profile.controller_replicas == 1:
        return None
    spec: Obj = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": profile.controller_storage.size}}}
    if profile.controller_storage.storage_class:
        spec["storageClassName"] = profile.controller_storage.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": meta(profile, shared_statesave_claim(profile), naming.CONTROLLER), "spec": spec}
