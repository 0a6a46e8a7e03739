"""slurmctld: StatefulSet (1, or 2 with a backup) with StateSaveLocation on a PVC, headless Service."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.slurmfiles import POWER_DIR
from slurmk8s.render.k8s.common import (
    CONFIG_LIVE, Obj, headless_service, meta, init_config_container, jwt_key_volume, mounts_config, pod_spec, pvc_template,
    statefulset, volume_config,
)
from slurmk8s.render.k8s.probes import slurmctld_probes

STATE_SAVE = "/var/spool/slurmctld"
RUN_DIR = "/run/slurmctld"  # Slurm 25.11+ keeps runtime files here; the pid file lives here on every release


def build_service_controller(profile: Profile) -> Obj:
    """Headless Service governing the controller pods (SlurmctldHost addresses)."""
    name = naming.component_name(profile.name, naming.CONTROLLER)
    return headless_service(profile, name, naming.CONTROLLER, [("slurmctld", 6817)],
                            naming.selector_labels(profile.name, naming.CONTROLLER))


def build_statefulset_controller(profile: Profile, config_hash: str) -> Obj:
    """slurmctld in the foreground; a JWT key mounted when slurmrestd is on."""
    name = naming.component_name(profile.name, naming.CONTROLLER)
    image = profile.images.controller
    jwt_volumes, jwt_mounts, jwt_script = jwt_key_volume(profile)
    volumes = volume_config(profile, CONFIG_LIVE) + jwt_volumes
    # SlurmUser owns its state and run directories (slurmctld runs as SlurmUser, not root)
    extra_mounts = [{"name": "statesave", "mountPath": STATE_SAVE}, {"name": "run", "mountPath": RUN_DIR}] + jwt_mounts
    # A provisioner may hand out the claim 0777 (local-path does): slurmctld calls a world-writable
    # StateSaveLocation a "SEVERE SECURITY VULNERABILITY" (found on kind).
    script = [f"chown slurm:slurm {STATE_SAVE} {RUN_DIR}", f"chmod 0700 {STATE_SAVE}"] + jwt_script
    slurmctld = {
        "name": naming.DAEMON[naming.CONTROLLER],  # the container kube/execpod.py runs commands in
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["slurmctld", "-D"],
        "ports": [{"name": "slurmctld", "containerPort": 6817, "protocol": "TCP"}],
        **slurmctld_probes(profile, 6817),
        "resources": profile.daemon_resources.controller.as_kubernetes(),
        # As SlurmUser from the start, with nothing to drop to: ResumeProgram and SuspendProgram
        # run as this user and read the service-account token through the pod's fsGroup.
        "securityContext": {"runAsUser": naming.SLURM_UID, "runAsGroup": naming.SLURM_UID, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        # Live config: `up` runs `scontrol reconfigure` once the kubelet has the new files here.
        "volumeMounts": mounts_config(profile, init=False, config=CONFIG_LIVE) + [{"name": "statesave", "mountPath": STATE_SAVE},
                                                              {"name": "run", "mountPath": RUN_DIR}],
    }
    volumes.append({"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}})
    # The kubelet writes the projected token 0600 root unless the pod has an fsGroup: with one it
    # is 0640 and group SlurmUser (found on kind: elastic pools never resumed).
    extra: Obj = {"securityContext": {"fsGroup": naming.SLURM_UID}}
    if profile.controller_replicas > 1:
        # Primary and backup on different machines, or one machine's loss takes both. Preferred, not
        # required: on a one-node cluster the backup still runs (and `up` can finish).
        extra["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": naming.selector_labels(profile.name, naming.CONTROLLER)},
                "topologyKey": "kubernetes.io/hostname"}}]}}
    if any(p.elastic for p in profile.pools):
        # ResumeProgram/SuspendProgram run here and scale the pools with this pod's ServiceAccount.
        volumes.append({"name": "power", "configMap": {"name": naming.power_config_map(profile.name), "defaultMode": 0o555}})
        slurmctld["volumeMounts"].append({"name": "power", "mountPath": POWER_DIR, "readOnly": True})
        # The mount point inside the read-only /etc/slurm: the runtime cannot make it there itself.
        script.append(f"mkdir -p {POWER_DIR}")
        extra["automountServiceAccountToken"] = True
    pod = pod_spec(profile, naming.CONTROLLER,
                   [slurmctld],
                   [init_config_container(profile, image, script, extra_mounts, config=CONFIG_LIVE)],
                   volumes, extra)
    claims = []
    if profile.controller_replicas == 1:
        claims = [pvc_template("statesave", profile.controller_storage.size, profile.controller_storage.storage_class)]
    else:
        # Primary and backup must share one StateSaveLocation: one ReadWriteMany claim.
        volumes.append({"name": "statesave", "persistentVolumeClaim": {"claimName": naming.controller_statesave_claim(profile.name)}})
    return statefulset(
        profile, name, naming.CONTROLLER, profile.controller_replicas, name, pod,
        {naming.ANNOTATION_CONFIG_HASH: config_hash}, claims=claims,
    )


def build_pvc_controller_shared(profile: Profile) -> Obj | None:
    """The shared StateSaveLocation claim (only with a backup controller)."""
    if profile.controller_replicas == 1:
        return None
    spec: Obj = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": profile.controller_storage.size}}}
    if profile.controller_storage.storage_class:
        spec["storageClassName"] = profile.controller_storage.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": meta(profile, naming.controller_statesave_claim(profile.name), naming.CONTROLLER), "spec": spec}
