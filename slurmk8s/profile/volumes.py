"""spec.volumes: shared filesystems (an existing claim, NFS, or a claim this cluster owns) on login and pools.

The model, its loading from the schema-valid document and the section's cross-field rules.
"""

from __future__ import annotations

from dataclasses import dataclass

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
            create_homes=v.get("createHomes", v["mountPath"].rstrip("/") == "/home"),
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


def check_volumes(spec: dict) -> list[Problem]:
    """Every cross-field problem of spec.volumes."""
    out: list[Problem] = []
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
        if v.get("createHomes") and (v.get("readOnly") or "configMap" in v or "secret" in v):
            out.append((at + ("createHomes",), "homes cannot be created on a read-only volume", False))
    return out
