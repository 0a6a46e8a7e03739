"""Kubernetes quantities (the binary-suffix subset profiles use)."""

from __future__ import annotations

_MIB = {"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}


def to_mib(quantity: str) -> int:
    """MiB in a quantity like "512Mi", "16Gi" or "2Ti"."""
    return int(quantity[:-2]) * _MIB[quantity[-2:]]


def from_mib(mib: int) -> str:
    """The shortest exact quantity for a MiB count."""
    for suffix in ("Ti", "Gi"):
        if mib and mib % _MIB[suffix] == 0:
            return f"{mib // _MIB[suffix]}{suffix}"
    return f"{mib}Mi"
