"""spec.volumes: shared filesystems (an existing claim, NFS, or a claim this cluster owns) on login and pools.

The model, its loading from the schema-valid document and the section's cross-field rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s import naming
from slurmk8s.profile.defaults import DEFAULTS

Problem = tuple[tuple, str, bool]

SOURCES = ("claimName", "nfs", "claim", "configMap", "secret")
# Paths the pods' own volumes and the images' system directories use: a shared volume there
# would hide Slurm's config, spool or the ssh setup, or let job users write where root reads.
RESERVED_MOUNTS = ("/etc", "/run", "/var/spool/slurmd", "/var/spool/slurmctld", "/dev", "/proc", "/sys",
                   "/usr", "/bin", "/sbin", "/lib", "/lib64", "/var/run", "/mnt/slurm-config", "/mnt/auth-key")


@dataclass(frozen=True)
class SharedVolume:
    """One shared volume: where it mounts, on which pods, and its source (exactly one of the three)."""

    name: str
    mount_path: str
    read_only: bool
    on: tuple[str, ...]  # "login", "pools"
    create_homes: bool
    claim_name: str | None = None
    nfs_server: str | None = None
    nfs_path: str | None = None
    claim_size: str | None = None
    claim_storage_class: str | None = None
    claim_access_mode: str | None = None
    config_map: str | None = None
    secret: str | None = None


def load_volumes(raw: list[dict] | None) -> tuple[SharedVolume, ...]:
    """The model of a schema-valid spec.volumes, sorted by name."""
    out = []
    for v in raw or []:
        nfs, claim = v.get("nfs"), v.get("claim")
        out.append(SharedVolume(
            name=v["name"],
            mount_path=v["mountPath"].rstrip("/") or "/",
            read_only=v.get("readOnly", DEFAULTS["spec.volumes[].readOnly"]),
            on=tuple(sorted(set(v.get("mountOn", DEFAULTS["spec.volumes[].mountOn"])))),
            create_homes=makes_homes(v),
            claim_name=v.get("claimName"),
            nfs_server=nfs["server"] if nfs else None,
            nfs_path=nfs["path"] if nfs else None,
            claim_size=str(claim["size"]) if claim else None,
            claim_storage_class=claim.get("storageClassName") if claim else None,
            claim_access_mode=claim.get("accessMode", DEFAULTS["spec.volumes[].claim.accessMode"]) if claim else None,
            config_map=(v.get("configMap") or {}).get("name"),
            secret=(v.get("secret") or {}).get("secretName"),
        ))
    return tuple(sorted(out, key=lambda v: v.name))


def makes_homes(raw: dict) -> bool:
    """Whether a volume as written makes the users' homes: createHomes, by default true for one on /home."""
    return raw.get("createHomes", raw["mountPath"].rstrip("/") == "/home")


def home_volume_paths(spec: dict) -> list[str]:
    """The mount paths of the volumes that make the users' homes, in the order written."""
    return [v["mountPath"].rstrip("/") or "/" for v in spec.get("volumes") or [] if makes_homes(v)]


def cluster_secrets(cluster: str) -> dict[str, str]:
    """Name -> what it holds, of every Secret `up` creates for a cluster (whichever sections are on)."""
    return {naming.auth_secret(cluster): "the auth key", naming.db_password_secret(cluster): "the database password",
            naming.jwt_secret(cluster): "slurmrestd's JWT key", naming.ssh_host_keys_secret(cluster): "the login host key"}


def check_volumes(spec: dict, cluster: str) -> list[Problem]:
    """Every cross-field problem of spec.volumes."""
    out: list[Problem] = []
    # The cluster's own storage and keys: a volume of them would hand slurmctld's state or the keys to every
    # login and pool pod (read-write for a claim). Claims from the StatefulSets' templates: render/apirules.py.
    state_claim = naming.controller_statesave_claim(cluster)
    secrets = cluster_secrets(cluster)
    seen_names: dict[str, int] = {}
    seen_paths: dict[str, int] = {}
    for i, v in enumerate(spec.get("volumes") or []):
        at = ("spec", "volumes", i)
        sources = [s for s in SOURCES if s in v]
        if len(sources) != 1:
            found = ", ".join(sources) if sources else "none"
            out.append((at, f"give exactly one source of {', '.join(SOURCES)} (found: {found})", False))
        if v["name"] in seen_names:
            out.append((at + ("name",), f"duplicate volume name {v['name']!r} (also spec.volumes[{seen_names[v['name']]}])",
                        False))
        seen_names.setdefault(v["name"], i)
        path = v["mountPath"].rstrip("/") or "/"
        if path in seen_paths:
            out.append((at + ("mountPath",), f"{path} is also spec.volumes[{seen_paths[path]}]'s mountPath", False))
        seen_paths.setdefault(path, i)
        clash = next((r for r in RESERVED_MOUNTS if path == r or path.startswith(r + "/") or r.startswith(path + "/")
                      or path == "/"), None)
        if clash:
            out.append((at + ("mountPath",), f"{path} would cover or sit in {clash if path != '/' else 'every path'}, "
                        "which the pods need for themselves; mount it elsewhere (e.g. /home, /scratch)", False))
        if "/." in path or "//" in path:
            out.append((at + ("mountPath",), f"{path!r} is not a plain absolute path", False))
        if v.get("claimName") == state_claim:
            out.append((at + ("claimName",), f"{state_claim!r} is slurmctld's state (StateSaveLocation); a volume may "
                        "not mount the cluster's own storage", False))
        if "claim" in v and naming.shared_volume_claim(cluster, v["name"]) == state_claim:
            out.append((at + ("name",), f"this volume's claim would be {state_claim!r}, the name of slurmctld's "
                        "state claim; choose another name", False))
        secret = (v.get("secret") or {}).get("secretName")
        if secret in secrets:
            out.append((at + ("secret", "secretName"), f"{secret!r} is the cluster's own Secret ({secrets[secret]}, "
                        "made by `up`); a volume may not mount it", False))
        if v.get("createHomes") and (v.get("readOnly") or "configMap" in v or "secret" in v):
            out.append((at + ("createHomes",), "homes cannot be created on a read-only volume", False))
    return out
