"""The kustomize output: the plain tree plus a kustomization.yaml listing the manifests in apply order.

It also holds the bundle's hooks (the upgrade check, the rollout and the Job applying the account
tree) after everything else: a GitOps tool applies them with the rest, and `up`, which does that work
itself, never reads this tree. Without hooks (plain `kubectl apply -k`, Flux) a finished Job must stay:
a Job the TTL controller removed is one the next apply or Flux reconcile creates and runs again, so
this format's Jobs carry no ttlSecondsAfterFinished. Their names change with their input
(render/k8s/common.py named_by_content), so a new input is a new Job and the same input never reruns.
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


def kept_when_finished(obj: dict) -> dict:
    """A Job without ttlSecondsAfterFinished: applied as a plain object, it must not be removed and rerun."""
    if obj["kind"] != "Job" or "ttlSecondsAfterFinished" not in obj["spec"]:
        return obj
    return {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "ttlSecondsAfterFinished"}}


def kustomize_tree(bundle: Bundle, objects: list[dict] | tuple[dict, ...] | None = None,
                   hooks: list[dict] | tuple[dict, ...] | None = None) -> dict[str, str]:
    """Relative path -> content: the plain tree (of objects and hooks) and kustomization.yaml.

    By default the bundle's objects, and its hooks as plain Jobs kept when finished; a tool with hooks
    of its own (Argo CD) passes its hook objects.
    """
    objects = bundle.objects if objects is None else tuple(objects)
    hooks = tuple(kept_when_finished(h) for h in bundle.hooks) if hooks is None else tuple(hooks)
    tree = plain_tree(bundle)
    tree.update({object_filename(o): dump(o) for o in tuple(objects) + tuple(hooks)})
    tree[KUSTOMIZATION] = dump(build_kustomization(tuple(objects) + tuple(hooks)))
    return dict(sorted(tree.items()))
