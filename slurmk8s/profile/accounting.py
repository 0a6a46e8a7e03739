"""spec.accounting: slurmdbd and its database (embedded MariaDB or external), loading and checks."""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s import naming
from slurmk8s.profile.defaults import default, value_or_default
from slurmk8s.profile.slurm import conf_value, config_problems
from slurmk8s.profile.volumes import cluster_secrets

Problem = tuple[tuple, str, bool]


@dataclass(frozen=True)
class Storage:
    """The embedded database's volume: its size and StorageClass (None: the cluster's default)."""

    size: str
    storage_class: str | None = None


@dataclass(frozen=True)
class Backup:
    """spec.accounting.database.embedded.backup: when to dump the database, how many dumps to keep, and where."""

    schedule: str
    keep: int
    storage: Storage


@dataclass(frozen=True)
class SecretRef:
    """One key of a Secret."""

    name: str
    key: str


@dataclass(frozen=True)
class ExternalDatabase:
    """spec.accounting.database.external: a database of the user's for slurmdbd."""

    host: str
    port: int
    user: str
    database: str
    password: SecretRef


@dataclass(frozen=True)
class Accounting:
    """spec.accounting: slurmdbd and its database, embedded or external."""

    enabled: bool
    embedded: Storage | None  # None when external or disabled
    external: ExternalDatabase | None
    config: tuple[tuple[str, str], ...] = ()  # spec.accounting.config, sorted by key
    backup: Backup | None = None  # the embedded database's dumps (None: no backup)


def load_accounting(raw: dict) -> Accounting:
    enabled = value_or_default(raw, "enabled", "spec.accounting.enabled")
    config = tuple(sorted((k, conf_value(v)) for k, v in raw.get("config", {}).items()))
    db = raw.get("database", {})
    if "external" in db:
        ext = db["external"]
        return Accounting(enabled, None, ExternalDatabase(
            host=ext["host"],
            port=ext.get("port", default("spec.accounting.database.external.port")),
            user=ext.get("user", default("spec.accounting.database.external.user")),
            database=ext.get("database", default("spec.accounting.database.external.database")),
            password=SecretRef(ext["passwordSecret"]["name"], ext["passwordSecret"]["key"]),
        ), config)
    emb = db.get("embedded", {})
    storage = Storage(str(emb.get("storage", default("spec.accounting.database.embedded.storage"))), emb.get("storageClassName"))
    backup = None
    if "backup" in emb:
        raw_backup, at = emb["backup"], "spec.accounting.database.embedded.backup"
        backup = Backup(value_or_default(raw_backup, "schedule", f"{at}.schedule"),
                        value_or_default(raw_backup, "keep", f"{at}.keep"),
                        Storage(str(value_or_default(raw_backup, "storage", f"{at}.storage")),
                                raw_backup.get("storageClassName")))
    return Accounting(enabled, storage if enabled else None, None, config, backup if enabled else None)


# slurmdbd.conf keys the generator writes (templates/slurmdbd.conf.j2) or the pod depends on; none has a
# default a site may replace: the auth keys must match slurm.conf's, DbdHost/DbdPort the Service, SlurmUser
# and PidFile the pod's user and run directory, Storage* the database and its Secret, and LogFile unset keeps
# the log on stderr for `kubectl logs`.
OWNED_DBD_KEYS = frozenset(k.lower() for k in (
    "AuthType", "AuthInfo", "AuthAltTypes", "AuthAltParameters", "DbdHost", "DbdAddr", "DbdBackupHost", "DbdPort",
    "SlurmUser", "PidFile", "LogFile", "StorageType", "StorageHost", "StorageBackupHost", "StoragePort",
    "StorageUser", "StoragePass", "StorageLoc",
))


def check_dbd_config(acc: dict) -> list[Problem]:
    """spec.accounting.config: located problems, same rules as spec.slurm.config."""
    return config_problems(("spec", "accounting", "config"), acc.get("config", {}), "slurmdbd.conf", OWNED_DBD_KEYS)


def check_accounting(spec: dict, cluster: str) -> list[Problem]:
    acc = spec.get("accounting", {})
    if acc.get("enabled") is False and acc.get("database"):
        return [(("spec", "accounting", "database"), "a database is configured but accounting.enabled is false", True)]
    if acc.get("enabled") is False and acc.get("config"):
        return [(("spec", "accounting", "config"), "slurmdbd.conf keys are configured but accounting.enabled is false", True)]
    dbd = check_dbd_config(acc)
    secret = ((acc.get("database") or {}).get("external") or {}).get("passwordSecret", {}).get("name")
    # Keys `up` makes with random bytes, never a password someone set on the database; slurmdbd would log
    # in with the key, and the key would sit in its environment. (<cluster>-db-password is the embedded
    # database's only; with an external one, a Secret of that name is the user's own.)
    keys = {name: what for name, what in cluster_secrets(cluster).items() if name != naming.db_password_secret(cluster)}
    if secret in keys:
        return [(("spec", "accounting", "database", "external", "passwordSecret", "name"),
                 f"{secret!r} is the cluster's own Secret ({keys[secret]}, made by `up`); name the Secret that holds "
                 "the database password", False)] + dbd
    return dbd



