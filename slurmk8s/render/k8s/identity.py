"""Declared users in every Slurm pod: passwd/group lines merged into the image's at pod start.

The init container (common.init_config_container) writes the merged files into a small
emptyDir; every container of the pod mounts them over /etc/passwd and /etc/group (subPath,
read-only). The image's own entries stay (root, slurm, sshd ...) except those whose name or id
a declared entry takes: the profile is the authority for ids 1000 and up (docs/users-and-storage.md).
"""

from __future__ import annotations

from typing import Any

from slurmk8s import naming
from slurmk8s.profile.identity import Identity, UnixUser
from slurmk8s.profile.model import Profile

Obj = dict[str, Any]

SOURCE = "/mnt/identity"  # the ConfigMap, in the init container
MERGED = "/mnt/identity-files"  # the emptyDir the init container writes, in the init container
AUTHORIZED_KEYS_DIR = "/etc/ssh/authorized_keys"


def ssh_key_file(user: UnixUser) -> str:
    """The ConfigMap key holding a user's authorized_keys."""
    return f"ssh-{user.name}"


def render_passwd(identity: Identity) -> str:
    """passwd(5) lines of the declared users (no password: keys only, `x` as shadow-less images expect)."""
    return "".join(f"{u.name}:x:{u.uid}:{u.gid}::{u.home}:{u.shell}\n" for u in identity.users)


def render_group(identity: Identity) -> str:
    """group(5) lines: declared groups and users' private groups."""
    return "".join(f"{g.name}:x:{g.gid}:{','.join(g.members)}\n" for g in identity.groups)


def build_configmap_identity(profile: Profile) -> Obj | None:
    """passwd and group fragments and each user's ssh keys (None without declared users)."""
    identity = profile.identity
    if identity is None:
        return None
    data = {"group": render_group(identity), "passwd": render_passwd(identity)}
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


def identity_mounts(profile: Profile) -> list[Obj]:
    """The merged files over the image's, read-only: a job cannot add itself to a group."""
    if profile.identity is None:
        return []
    return [{"name": "identity-files", "mountPath": f"/etc/{f}", "subPath": f, "readOnly": True}
            for f in ("group", "passwd")]


def identity_script(profile: Profile) -> list[str]:
    """Init lines: the image's entries minus those a declared one replaces (same name or id), then the declared."""
    if profile.identity is None:
        return []
    lines = []
    for f, id_field in (("passwd", 3), ("group", 3)):
        lines += [
            f"awk -F: 'NR == FNR {{ name[$1]; id[${id_field}]; next }} "
            f"($1 in name) || (${id_field} in id) {{ print \"identity: the profile replaces the image entry \" $1 \" of /etc/{f}\" > \"/dev/stderr\"; next }} {{ print }}' {SOURCE}/{f} /etc/{f} > {MERGED}/{f}",
            f"cat {SOURCE}/{f} >> {MERGED}/{f}",
            f"chmod 0644 {MERGED}/{f}",
        ]
    return lines


def login_key_script(profile: Profile) -> list[str]:
    """Login init lines: each user's keys, owned by the user, 0600 (sshd reads them as the user, StrictModes)."""
    if profile.identity is None:
        return []
    return [f"install -m 0600 -o {u.uid} -g {u.gid} {SOURCE}/{ssh_key_file(u)} {AUTHORIZED_KEYS_DIR}/{u.name}"
            for u in profile.identity.users if u.ssh_keys]
