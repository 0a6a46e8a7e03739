"""spec.pods: what every pod of the cluster carries besides what the generator writes (pull secrets,
priority, labels, annotations)."""

from __future__ import annotations

from dataclasses import dataclass

Problem = tuple[tuple, str, bool]

# Label and annotation prefixes the generator's selectors and tooling read.
OWNED_PREFIXES = ("app.kubernetes.io/", "slurmk8s.io/")
# Pod labels the workload controllers set themselves (the StatefulSet and DaemonSet controllers'
# revision, the Deployment's ReplicaSet): they overwrite a value given here, and rollout reads them.
CONTROLLER_LABELS = frozenset({"controller-revision-hash", "pod-template-hash"})
# Label domains reserved for Kubernetes' own components (statefulset.kubernetes.io/pod-name, ...).
KUBERNETES_DOMAINS = ("kubernetes.io", "k8s.io")


@dataclass(frozen=True)
class PodSettings:
    """spec.pods: what every pod gets: pull secrets, priority class, labels, annotations."""

    image_pull_secrets: tuple[str, ...] = ()
    priority_class: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()


def load_pods(raw: dict | None) -> PodSettings:
    raw = raw or {}
    return PodSettings(tuple(raw.get("imagePullSecrets", [])), raw.get("priorityClassName"),
                       tuple(sorted(raw.get("labels", {}).items())), tuple(sorted(raw.get("annotations", {}).items())))


def check_pods(spec: dict) -> list[Problem]:
    raw = spec.get("pods") or {}
    out: list[Problem] = []
    for section in ("labels", "annotations"):
        for key in raw.get(section, {}):
            at = ("spec", "pods", section, key)
            if key.startswith(OWNED_PREFIXES) and not (section == "annotations" and key.startswith("app.kubernetes.io/")):
                out.append((at, f"{key!r} is the generator's (its selectors and tools read "
                            f"{', '.join(OWNED_PREFIXES)} keys)", True))
            elif section == "labels" and key in CONTROLLER_LABELS:
                out.append((at, f"{key!r} is set on each pod by its workload controller, which would overwrite it "
                            "(and rollout reads it); leave it out", True))
            elif section == "labels" and _kubernetes_domain(key):
                out.append((at, f"{key!r} has a prefix in {_kubernetes_domain(key)}, which Kubernetes reserves for "
                            "its own components (they set these labels themselves); leave it out", True))
    return out


def _kubernetes_domain(key: str) -> str | None:
    """The reserved domain (kubernetes.io, k8s.io) a label key's prefix is or ends in, else None."""
    prefix, slash, _ = key.rpartition("/")
    if not slash:
        return None
    return next((d for d in KUBERNETES_DOMAINS if prefix == d or prefix.endswith("." + d)), None)
