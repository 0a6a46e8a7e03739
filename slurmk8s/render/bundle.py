"""The render result: Kubernetes objects in apply order, the Slurm files, the Secrets to create."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RequiredSecret:
    """A Secret the bundle references but never contains; `up` creates it once.

    kind says what material goes in: "slurm.key" (1024 random bytes), "munge.key"
    (1024 random bytes), "password" (32 alphanumerics), "jwt" (32 random bytes, HS256).
    """

    name: str
    key: str
    kind: str
    component: str


@dataclass(frozen=True)
class Bundle:
    """Everything `render` produces for one profile."""

    cluster: str
    namespace: str
    version: str
    objects: tuple[dict[str, Any], ...]
    files: dict[str, str]
    secrets: tuple[RequiredSecret, ...]
    cluster_domain: str = "cluster.local"  # the profile's spec.clusterDomain
    # Objects for GitOps tools only, run after each sync (the account tree's Job); `up` does their work itself.
    hooks: tuple[dict[str, Any], ...] = ()

    def find(self, kind: str, name: str) -> dict[str, Any]:
        """The object of that kind and name (KeyError when absent)."""
        for obj in self.objects:
            if obj["kind"] == kind and obj["metadata"]["name"] == name:
                return obj
        raise KeyError(f"{kind}/{name}")

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Every object of one kind, in apply order."""
        return [o for o in self.objects if o["kind"] == kind]
