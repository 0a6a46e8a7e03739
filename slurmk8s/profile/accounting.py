"""spec.accounting: slurmdbd and its database (embedded MariaDB or external), loading and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmk8s.profile.defaults import DEFAULTS

Problem = tuple[tuple, str, bool]


@dataclass(frozen=True)
class Storage:
    size: str
    storage_class: str | None = None


@dataclass(frozen=True)
class SecretRef:
    name: str
    key: str


@dataclass(frozen=True)
class ExternalDatabase:
    host: str
    port: int
    user: str
    database: str
    password: SecretRef


@dataclass(frozen=True)
class Accounting:
    enabled: bool
    embedded: Storage | None  # None when external or disabled
    external: ExternalDatabase | None


def load_accounting(raw: dict) -> Accounting:
    enabled = _get(raw, "enabled", "spec.accounting.enabled")
    db = raw.get("database", {})
    if "external" in db:
        ext = db["external"]
        return Accounting(enabled, None, ExternalDatabase(
            host=ext["host"],
            port=ext.get("port", _d("spec.accounting.database.external.port")),
            user=ext.get("user", _d("spec.accounting.database.external.user")),
            database=ext.get("database", _d("spec.accounting.database.external.database")),
            password=SecretRef(ext["passwordSecret"]["name"], ext["passwordSecret"]["key"]),
        ))
    emb = db.get("embedded", {})
    storage = Storage(str(emb.get("storage", _d("spec.accounting.database.embedded.storage"))), emb.get("storageClassName"))
    return Accounting(enabled, storage if enabled else None, None)


def check_accounting(spec: dict) -> list[Problem]:
    acc = spec.get("accounting", {})
    if acc.get("enabled") is False and acc.get("database"):
        return [(("spec", "accounting", "database"), "a database is configured but accounting.enabled is false", True)]
    return []


def _d(path: str) -> Any:
    return DEFAULTS[path]


def _get(obj: dict, key: str, default_path: str | None = None) -> Any:
    if key in obj:
        return obj[key]
    return _d(default_path) if default_path else None
