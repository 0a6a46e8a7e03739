"""Profile volumes (spec.volumes) on the login pods and the pools' slurmd pods: /home, /scratch ...

A job writes its output where it was submitted (a user's home on login); the same volume on
the slurmd pods makes that file appear on login. Homes are made, owned by their user, in the pods
that mount a home volume (docs/users-and-storage.md).
"""

from __future__ import annotations

from typing import Any

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.profile.volumes import SharedVolume

Obj = dict[str, Any]

LOGIN, POOLS = "login", "pools"


def pod_volume_name(volume: SharedVolume) -> str:
    return f"vol-{volume.name}"


def claim_name(profile: Profile, volume: SharedVolume) -> str:
    return volume.claim_name or naming.shared_volume_claim(profile.name, volume.name)


def build_pvcs_volumes(profile: Profile) -> list[Obj]:
    """The claims of `claim` volumes (kept by `down` like every claim; made once by the StorageClass)."""
    out = []
    for v in profile.volumes:
        if v.claim_size is None:
            continue
        spec: Obj = {"accessModes": [v.claim_access_mode], "resources": {"requests": {"storage": v.claim_size}}}
        if v.claim_storage_class:
            spec["storageClassName"] = v.claim_storage_class
        out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": claim_name(profile, v), "namespace": profile.namespace,
                                 "labels": naming.object_labels(profile.name, None, None)},
                    "spec": spec})
    return out


def shared_volumes(profile: Profile, where: str) -> tuple[list[Obj], list[Obj]]:
    """(pod volumes, container mounts) of the profile volumes mounted on `where` (login or pools)."""
    volumes: list[Obj] = []
    mounts: list[Obj] = []
    for v in profile.volumes:
        if where not in v.on:
            continue
        read_only = v.read_only or bool(v.config_map or v.secret)  # the kubelet mounts both read-only anyway
        if v.nfs_server:
            source: Obj = {"nfs": {"server": v.nfs_server, "path": v.nfs_path, "readOnly": v.read_only}}
        elif v.config_map:
            source = {"configMap": {"name": v.config_map, "defaultMode": 0o444}}
        elif v.secret:
            source = {"secret": {"secretName": v.secret, "defaultMode": 0o440}}
        else:
            source = {"persistentVolumeClaim": {"claimName": claim_name(profile, v), "readOnly": v.read_only}}
        volumes.append({"name": pod_volume_name(v), **source})
        mount: Obj = {"name": pod_volume_name(v), "mountPath": v.mount_path}
        if read_only:
            mount["readOnly"] = True
        mounts.append(mount)
    return volumes, mounts


def home_roots(profile: Profile, where: str) -> list[str]:
    """Mount paths of the home volumes mounted here on which declared users' missing homes are made.

    identity-reload makes them (render/k8s/identity.py), so a new user's home needs no new pod.
    """
    if profile.identity is None:
        return []
    return [v.mount_path for v in profile.volumes if where in v.on and v.create_homes]
