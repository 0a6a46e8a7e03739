"""The kustomize output: the plain tree plus a kustomization.yaml listing the manifests in apply order.

It also holds the bundle's hooks (the upgrade check, the rollout and the Job applying the account
tree) after everything else: a GitOps tool applies them with the rest, and `up`, which does that work
itself, never reads this tree. Without hooks (plain `kubectl apply -k`, Flux) a finished Job must stay:
a Job the TTL controller removed is one the next apply or Flux reconcile creates and runs again, so
this format's Jobs carry no ttlSecondsAfterFinished. Their names change with their input
(render/k8s/common.py named_by_content), so a new input is a new Job and the same input never reruns.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.output.plain import object_filename, plain_tree
from slurmk8s.output.yamlout import dump
from slurmk8s.render import Bundle

KUSTOMIZATION = "kustomization.yaml"
# Each stage a kustomization of its own, so a tool without hooks (plain kubectl, Flux) can apply them in
# order and wait between them: the upgrade check, then the cluster, then the rollout and accounts Jobs.
BEFORE_SYNC, CLUSTER, AFTER_SYNC = "hooks/before-sync", "manifests", "hooks/after-sync"


def build_kustomization(resources: list[str]) -> dict:
    """A Kustomization that emits the resources unchanged, in the order given (fifo, not kustomize's kind order)."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(resources),
        "sortOptions": {"order": "fifo"},
    }


def kept_when_finished(obj: dict) -> dict:
    """A Job without ttlSecondsAfterFinished: applied as a plain object, it must not be removed and rerun."""
    if obj["kind"] != "Job" or "ttlSecondsAfterFinished" not in obj["spec"]:
        return obj
    return {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "ttlSecondsAfterFinished"}}


def hook_stage(hook: dict) -> str:
    """The directory of a hook object: before the sync (the upgrade check) or after it."""
    before = hook["metadata"].get("annotations", {}).get(naming.ANNOTATION_HOOK) == naming.HOOK_BEFORE_SYNC
    return BEFORE_SYNC if before else AFTER_SYNC


def _file(obj: dict) -> str:
    return object_filename(obj).removeprefix("manifests/")


def kustomize_tree(bundle: Bundle, objects: list[dict] | tuple[dict, ...] | None = None,
                   hooks: list[dict] | tuple[dict, ...] | None = None) -> dict[str, str]:
    """Relative path -> content: the plain tree, a kustomization per stage, and the root kustomization.yaml.

    By default the bundle's objects, and its hooks as plain Jobs kept when finished; a tool with hooks
    of its own (Argo CD) passes its hook objects. The root lists the stages in order (before-sync,
    manifests, after-sync), so `kubectl kustomize DIR` gives every object, the upgrade check first.
    """
    objects = bundle.objects if objects is None else tuple(objects)
    hooks = tuple(kept_when_finished(h) for h in bundle.hooks) if hooks is None else tuple(hooks)
    tree = plain_tree(bundle)
    tree.update({object_filename(o): dump(o) for o in objects})
    tree[f"{CLUSTER}/{KUSTOMIZATION}"] = dump(build_kustomization([_file(o) for o in objects]))
    stages = [CLUSTER]
    for stage in (BEFORE_SYNC, AFTER_SYNC):
        mine = [h for h in hooks if hook_stage(h) == stage]
        if not mine:
            continue
        tree.update({f"{stage}/{_file(h)}": dump(h) for h in mine})
        tree[f"{stage}/{KUSTOMIZATION}"] = dump(build_kustomization([_file(h) for h in mine]))
        stages.insert(0 if stage == BEFORE_SYNC else len(stages), stage)
    tree[KUSTOMIZATION] = dump(build_kustomization(stages))
    return dict(sorted(tree.items()))
