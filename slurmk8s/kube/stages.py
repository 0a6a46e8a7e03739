"""Apply order: the stages of render/order.py's INSTALL_ORDER, grouped (pure; no client import).

Objects of one stage do not depend on each other and are applied in parallel; a stage
starts when the previous one has been accepted by the API server.
"""

from __future__ import annotations

from typing import Any, Iterable

from slurmk8s.render.order import SECRETS, STAGE_NAMES, stage_of

__all__ = ["SECRETS", "STAGE_NAMES", "group_by_stage", "object_ref", "stage_of"]


def group_by_stage(objects: Iterable[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Non-empty stages in apply order, each with its objects in their given order."""
    buckets: dict[int, list[dict[str, Any]]] = {}
    for obj in objects:
        buckets.setdefault(stage_of(obj), []).append(obj)
    return [(STAGE_NAMES[i], buckets[i]) for i in sorted(buckets)]


def object_ref(obj: dict[str, Any]) -> str:
    """Kind/name, as kubectl prints it."""
    return f"{obj['kind']}/{obj['metadata']['name']}"
