"""spec.accounting: slurmdbd and its database (embedded MariaDB or external), loading and checks."""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s import naming
from slurmk8s.profile.defaults import default, value_or_default
from slurmk8s.profile.volumes import cluster_secrets

Problem = tuple[tuple, str, bool]


@dataclass(frozen=True)
class Storage:
    """The embedded database's volume: its size and StorageClass (None: the cluster's default)."""

    size: str
    storage_class: str | None = None


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


def load_accounting(raw: dict) -> Accounting:
    enabled = value_or_default(raw, "enabled", "spec.accounting.enabled")
    db = raw.get("database", {})
    if "external" in db:
        ext = db["external"]
        return Accounting(enabled, None, ExternalDatabase(
            host=ext["host"],
            port=ext.get("port", default("spec.accounting.database.external.port")),
            user=ext.get("user", default("spec.accounting.database.external.user")),
            database=ext.get("database", default("spec.accounting.database.external.database")),
            password=SecretRef(ext["passwordSecret"]["name"], ext["passwordSecret"]["key"]),
        ))
    emb = db.get("embedded", {})
    storage = Storage(str(emb.get("storage", default("spec.accounting.database.embedded.storage"))), emb.get("storageClassName"))
    return Accounting(enabled, storage if enabled else None, None)


def check_accounting(spec: dict, cluster: str) -> list[Problem]:
    acc = spec.get("accounting", {})
    if acc.get("enabled") is False and acc.get("database"):
        return [(("spec", "accounting", "database"), "a database is configured but accounting.enabled is false", True)]
    secret = ((acc.get("database") or {}).get("external") or {}).get("passwordSecret", {}).get("name")
    # Keys `up` makes with random bytes, never a password someone set on the database; slurmdbd would log
    # in with the key, and the key would sit in its environment. (<cluster>-db-password is the embedded
    # database's only; with an external one, a Secret of that name is the user's own.)
    keys = {name: what for name, what in cluster_secrets(cluster).items() if name != naming.db_password_secret(cluster)}
    if secret in keys:
        return [(("spec", "accounting", "database", "external", "passwordSecret", "name"),
                 f"{secret!r} is the cluster's own Secret ({keys[secret]}, made by `up`); name the Secret that holds "
                 "the database password", False)]
    return []



