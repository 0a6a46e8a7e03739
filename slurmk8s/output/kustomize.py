"""The kustomize output: the plain tree plus a kustomization.yaml listing the manifests in apply order.

It also holds the bundle's hooks (the Job applying the account tree) after everything else: a
GitOps tool applies it with the rest, and `up`, which does that work itself, never reads this tree.
"""

from __future__ import annotations

from slurmk8s.output.plain import object_filename, plain_tree
from slurmk8s.output.yamlout import dump
from slurmk8s.render import Bundle

KUSTOMIZATION = "kustomization.yaml"


def build_kustomization(objects: list[dict] | tuple[dict, ...]) -> dict:
    """A Kustomization that emits the objects unchanged, in the order given (fifo, not kustomize's kind order)."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [object_filename(o) for o in objects],
        "sortOptions": {"order": "fifo"},
    }


def kustomize_tree(bundle: Bundle, objects: list[dict] | tuple[dict, ...] | None = None,
                   hooks: list[dict] | tuple[dict, ...] | None = None) -> dict[str, str]:
    """Relative path -> content: the plain tree (of objects and hooks, the bundle's by default) and kustomization.yaml."""
    objects = bundle.objects if objects is None else tuple(objects)
    hooks = bundle.hooks if hooks is None else tuple(hooks)
    tree = plain_tree(bundle)
    tree.update({object_filename(o): dump(o) for o in tuple(objects) + tuple(hooks)})
    tree[KUSTOMIZATION] = dump(build_kustomization(tuple(objects) + tuple(hooks)))
    return dict(sorted(tree.items()))
