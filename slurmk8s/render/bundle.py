"""The render result: Kubernetes objects in apply order, the Slurm files, the Secrets to create."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RequiredSecret:
    """A Secret the bundle references but never contains; `up` creates it once.

    kind says what material goes in: "slurm.key" (1024 random bytes), "munge.key"
    (1024 random bytes), "password" (32 alphanumerics), "jwt" (32 random bytes, HS256), "empty"
    (no bytes: a Secret that a Job of the cluster fills, the token Secrets).
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

    def referenced_secrets(self) -> dict[str, tuple[str, ...]]:
        """Secret name -> keys, for the Secrets the pods read that `up` does not create (an external
        database's password): they must exist before the pods can start."""
        created = {s.name for s in self.secrets}
        found: dict[str, set[str]] = {}
        for obj in self.objects:
            pod = (obj.get("spec") or {}).get("template", {}).get("spec") if isinstance(obj.get("spec"), dict) else None
            if not pod:
                continue
            for c in pod.get("initContainers", []) + pod.get("containers", []):
                for env in c.get("env", []):
                    ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                    if ref and not ref.get("optional"):
                        found.setdefault(ref["name"], set()).add(ref["key"])
            for volume in pod.get("volumes", []):
                secret = volume.get("secret")
                if secret and not secret.get("optional"):
                    found.setdefault(secret["secretName"], set()).update(i["key"] for i in secret.get("items", []))
        return {name: tuple(sorted(keys)) for name, keys in sorted(found.items()) if name not in created}

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Every object of one kind, in apply order."""
        return [o for o in self.objects if o["kind"] == kind]
