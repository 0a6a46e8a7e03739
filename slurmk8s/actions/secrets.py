"""Key material for the Secrets a bundle needs, and `secrets create` (create once, never overwrite)."""

from __future__ import annotations

import base64
from typing import Any, Callable

from slurmk8s import naming
from slurmk8s.actions.render import render_file
from slurmk8s.kube.apply import CREATED, KEPT
from slurmk8s.material import generate
from slurmk8s.render import Bundle, RequiredSecret

def secret_factory(bundle: Bundle) -> Callable[[RequiredSecret], dict[str, Any]]:
    """A function that builds the Secret object for a RequiredSecret, with new material each call."""
    def build_secret(required: RequiredSecret) -> dict[str, Any]:
        """The Secret object, labelled as ours, holding fresh material."""
        material = base64.b64encode(generate(required.kind)).decode()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": required.name, "namespace": bundle.namespace,
                         "labels": naming.object_labels(bundle.cluster, required.component)},
            "type": "Opaque",
            # Rotation is by replacement (delete, then `up`), never by an edit: the API server refuses
            # any change to the data, so a key cannot be swapped under running pods. A token Secret is the
            # exception: its Job refills it.
            "immutable": required.kind != "empty",
            "data": {required.key: material},
        }
    return build_secret


def run_secrets_create(profile_path: str, cluster, echo: Callable[[str], None] = print,
                       namespace: str | None = None) -> None:
    """Create the profile's missing Secrets (and its Namespace when missing); existing Secrets stay as they are."""
    bundle = render_file(profile_path, namespace)
    plan = cluster.ensure_secrets(bundle, secret_factory(bundle), progress=echo)
    secrets = [c for c in plan.changes if c.ref.startswith("Secret/")]
    created = sum(1 for c in secrets if c.action == CREATED)
    kept = sum(1 for c in secrets if c.action == KEPT)
    echo(f"secrets in {bundle.namespace}: {created} created, {kept} kept as they were")
