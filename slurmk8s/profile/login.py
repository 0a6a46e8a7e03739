"""spec.login: the login pods and their ssh Service, and their loading."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmk8s.profile.defaults import DEFAULTS


@dataclass(frozen=True)
class Login:
    replicas: int
    service_type: str
    service_port: int
    ssh_from: tuple[str, ...]
    authorized_keys: tuple[str, ...]


def load_login(raw: dict) -> Login:
    service = raw.get("service", {})
    return Login(
        replicas=_get(raw, "replicas", "spec.login.replicas"),
        service_type=_get(service, "type", "spec.login.service.type"),
        service_port=_get(service, "port", "spec.login.service.port"),
        ssh_from=tuple(raw.get("sshFrom", [])),
        authorized_keys=tuple(raw.get("authorizedKeys", [])),
    )


def _d(path: str) -> Any:
    return DEFAULTS[path]


def _get(obj: dict, key: str, default_path: str | None = None) -> Any:
    if key in obj:
        return obj[key]
    return _d(default_path) if default_path else None
