"""What makes an object ours: our labels AND our field manager (pure; no client import).

What `up` may write over, and `down` may delete, is narrower than "same name": an existing object
must carry this cluster's instance label or its ApplySet membership (`claimed`). Anything else was
made by someone else; server-side apply would merge into it without a conflict, so `up` refuses it
unless the user adopts it on purpose (`--adopt KIND/NAME`).
"""

from __future__ import annotations

from typing import Any

from slurmk8s import naming

FIELD_MANAGER = naming.MANAGER
LABEL_PART_OF = "applyset.kubernetes.io/part-of"


def owned_selector(cluster: str) -> str:
    """labelSelector matching the objects we render for a cluster."""
    return f"{naming.LABEL_INSTANCE}={cluster},{naming.LABEL_MANAGED_BY}={naming.MANAGER}"


def foreign_selector(cluster: str) -> str:
    """labelSelector matching objects slurmk8s applied for any other cluster (another instance label)."""
    return f"{naming.LABEL_MANAGED_BY}={naming.MANAGER},{naming.LABEL_INSTANCE}!={cluster}"


def owner_of(obj: dict[str, Any]) -> str:
    """The cluster an object is labelled for ('' when it carries no instance label)."""
    return str((obj.get("metadata", {}).get("labels") or {}).get(naming.LABEL_INSTANCE, ""))


def has_our_labels(obj: dict[str, Any], cluster: str) -> bool:
    """True when obj carries the instance and managed-by labels of this cluster."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return labels.get(naming.LABEL_INSTANCE) == cluster and labels.get(naming.LABEL_MANAGED_BY) == naming.MANAGER


def managed_by_us(obj: dict[str, Any], cluster: str) -> bool:
    """Labels alone can be copied by anyone; the field manager proves we applied the object."""
    fields = obj.get("metadata", {}).get("managedFields") or []
    return has_our_labels(obj, cluster) and any(f.get("manager") == FIELD_MANAGER for f in fields)


def claimed(obj: dict[str, Any], cluster: str, set_id: str) -> bool:
    """True when obj carries this cluster's instance label or membership of its ApplySet (set_id)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(naming.LABEL_INSTANCE) == cluster or labels.get(LABEL_PART_OF) == set_id


def key_of(obj: dict[str, Any]) -> tuple[str, str]:
    """(kind, name): unique within one namespace for the kinds we render."""
    return obj["kind"], obj["metadata"]["name"]
