"""spec.pods applied to every workload's pod template: pull secrets, priority class, labels, annotations."""

from __future__ import annotations

from typing import Any

from slurmk8s import naming
from slurmk8s.profile.model import Profile

Obj = dict[str, Any]



def with_pod_settings(profile: Profile, obj: Obj) -> Obj:
    """A copy of a workload with the profile's pod settings (other objects, or none set: obj itself)."""
    settings = profile.pod_settings
    if obj.get("kind") not in naming.POD_TEMPLATE_KINDS or settings == type(settings)():
        return obj
    template = obj["spec"]["template"]
    meta = dict(template.get("metadata", {}))
    if settings.labels:
        meta["labels"] = {**dict(settings.labels), **meta.get("labels", {})}  # ours win (selectors)
    if settings.annotations:
        meta["annotations"] = dict(sorted({**dict(settings.annotations), **meta.get("annotations", {})}.items()))
    pod = dict(template["spec"])
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in settings.image_pull_secrets]
    if settings.priority_class:
        pod["priorityClassName"] = settings.priority_class
    return {**obj, "spec": {**obj["spec"], "template": {**template, "metadata": meta, "spec": pod}}}
