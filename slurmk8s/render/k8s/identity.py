"""Declared users in every Slurm pod: passwd/group lines merged into the image's, kept current without a restart.

The identity ConfigMap holds the declared lines, the keys and the merge program (reload.sh, from
podside/identity_reload.sh). init-config runs one pass into a small emptyDir before any daemon
starts. Nothing of the users reaches a pod template, so a change of users, groups or keys restarts
no pod (docs/users-and-storage.md, "Changes without restarts"):

- live pods (login, slurmd): an identity-reload sidecar repeats the pass every RELOAD_INTERVAL
  seconds on the kubelet's refreshed copy of the ConfigMap, renaming changed files into place; the
  root containers link /etc/passwd and /etc/group to that emptyDir (mounted read-only, no subPath)
  when they start, and login's sshd reads the keys the sidecar writes.
- the other pods' daemons run as a non-root user, who cannot replace /etc/passwd: they mount the
  merged files of their start over the image's (subPath), as before.

The image's own entries stay (root, slurm, sshd ...) except those whose name or id a declared entry
takes: the profile is the authority for ids 1000 and up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slurmk8s import naming
from slurmk8s.podside import shipped
from slurmk8s.profile.identity import Identity, UnixUser
from slurmk8s.profile.model import Profile

Obj = dict[str, Any]

SOURCE = "/mnt/identity"  # the ConfigMap (no subPath: the kubelet refreshes it), in init-config and the sidecar
MERGED = "/mnt/identity-files"  # the emptyDir the merge writes, in init-config and the sidecar
LIVE = "/run/slurmk8s-identity"  # the same emptyDir, read-only, in a live pod's daemon containers
AUTHORIZED_KEYS_DIR = "/etc/ssh/authorized_keys"
RELOAD_SCRIPT = "reload.sh"  # its key in the ConfigMap
RELOAD_INTERVAL = 5  # seconds between the sidecar's passes
# The longest a change takes to reach a running live pod with the kubelet's defaults: the kubelet
# rewrites a mounted ConfigMap on its pod sync, every syncFrequency (1 min) plus up to half of it
# in jitter (its watch-based cache sees the change at once), then one sidecar pass.
RELOAD_BOUND_SECONDS = 100
SNAPSHOT, LIVE_USERS = "snapshot", "live"


def ssh_key_file(user: UnixUser) -> str:
    """The ConfigMap key holding a user's authorized_keys."""
    return f"ssh-{user.name}"


def render_reload_script() -> str:
    """The merge program every pod with declared users runs (POSIX sh and awk)."""
    return shipped("identity_reload.sh")


def snapshot_ids(profile: Profile) -> str | None:
    """Who exists, as the pods that read the users only at start see it (slurmctld, slurmdbd, slurmrestd run as
    their own users and cannot take a reloaded /etc/passwd): names, ids and group members, not keys or homes.
    None without declared users."""
    if profile.identity is None:
        return None
    return "".join(f"user {u.name} {u.uid} {u.gid}\n" for u in profile.identity.users) + \
        "".join(f"group {g.name} {g.gid} {','.join(g.members)}\n" for g in profile.identity.groups)


def render_passwd(identity: Identity) -> str:
    """passwd(5) lines of the declared users (no password: keys only, `x` as shadow-less images expect)."""
    return "".join(f"{u.name}:x:{u.uid}:{u.gid}::{u.home}:{u.shell}\n" for u in identity.users)


def render_group(identity: Identity) -> str:
    """group(5) lines: declared groups and users' private groups."""
    return "".join(f"{g.name}:x:{g.gid}:{','.join(g.members)}\n" for g in identity.groups)


def build_configmap_identity(profile: Profile) -> Obj | None:
    """passwd and group fragments, each user's ssh keys and the merge program (None without declared users)."""
    identity = profile.identity
    if identity is None:
        return None
    data = {"group": render_group(identity), "passwd": render_passwd(identity), RELOAD_SCRIPT: render_reload_script()}
    for u in identity.users:
        if u.ssh_keys:
            data[ssh_key_file(u)] = "".join(f"{k}\n" for k in u.ssh_keys)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": naming.identity_config_map(profile.name), "namespace": profile.namespace,
                         "labels": naming.object_labels(profile.name, None, None)},
            "data": dict(sorted(data.items()))}


def identity_volumes(profile: Profile) -> list[Obj]:
    """The ConfigMap and the emptyDir holding the merged files."""
    if profile.identity is None:
        return []
    return [{"name": "identity", "configMap": {"name": naming.identity_config_map(profile.name), "defaultMode": 0o444}},
            {"name": "identity-files", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]


def identity_init_mounts(profile: Profile) -> list[Obj]:
    if profile.identity is None:
        return []
    return [{"name": "identity", "mountPath": SOURCE, "readOnly": True},
            {"name": "identity-files", "mountPath": MERGED}]


def identity_mounts(profile: Profile, users: str = SNAPSHOT) -> list[Obj]:
    """The merged files, read-only (a job cannot add itself to a group): the directory in a live
    pod (its containers link to it), else over the image's files as of the pod's start."""
    if profile.identity is None:
        return []
    if users == LIVE_USERS:
        return [{"name": "identity-files", "mountPath": LIVE, "readOnly": True}]
    return [{"name": "identity-files", "mountPath": f"/etc/{f}", "subPath": f, "readOnly": True}
            for f in ("group", "passwd")]


def identity_script(profile: Profile) -> list[str]:
    """Init lines: one merge pass (IDENTITY_KEYS and IDENTITY_HOMES come from the container's env)."""
    if profile.identity is None:
        return []
    return [f"sh {SOURCE}/{RELOAD_SCRIPT} once"]


def reload_env(profile: Profile, keys: str = "", homes: Sequence[str] = ()) -> list[Obj]:
    """The merge's settings beyond its defaults: the authorized_keys directory, the home volumes' paths."""
    if profile.identity is None:
        return []
    env: list[Obj] = [{"name": "IDENTITY_KEYS", "value": keys}] if keys else []
    if homes:
        env.append({"name": "IDENTITY_HOMES", "value": " ".join(homes)})
    return env


def reloader_sidecar(profile: Profile, image: str, env: Sequence[Obj] = (), mounts: Sequence[Obj] = ()) -> list[Obj]:
    """identity-reload, a native sidecar that keeps a live pod's merged files, keys and homes current.

    Root, for what it writes (files root's, keys and homes the users'); with the capabilities of
    init-config, which writes the same. Its own /etc/passwd stays the image's: the merge's base.
    """
    if profile.identity is None:
        return []
    return [{
        "name": "identity-reload",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "restartPolicy": "Always",
        "command": ["/bin/sh", f"{SOURCE}/{RELOAD_SCRIPT}", "watch"],
        "env": [{"name": "IDENTITY_INTERVAL", "value": str(RELOAD_INTERVAL)}] + list(env),
        "volumeMounts": [{"name": "identity", "mountPath": SOURCE, "readOnly": True},
                         {"name": "identity-files", "mountPath": MERGED}] + list(mounts),
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"]}},
    }]


def live_command(profile: Profile, argv: Sequence[str]) -> list[str]:
    """argv run after linking /etc/passwd and /etc/group to the sidecar's files (root containers of live pods).

    A link, not a mount: a file mounted with subPath is the inode of the pod's start, and the sidecar
    replaces files by rename. The links live in the container's own root, which only root may change.
    """
    if profile.identity is None:
        return list(argv)
    links = " && ".join(f"ln -sfn {LIVE}/{f} /etc/{f}" for f in ("passwd", "group"))
    return ["/bin/sh", "-c", f'{links} && exec "$@"', "identity", *argv]
