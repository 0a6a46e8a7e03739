"""spec.pods: what every pod of the cluster carries besides what the generator writes (pull secrets,
priority, labels, annotations)."""

from __future__ import annotations

from dataclasses import dataclass

Problem = tuple[tuple, str, bool]

# Label and annotation prefixes the generator's selectors and tooling read.
OWNED_PREFIXES = ("app.kubernetes.io/", "slurmk8s.io/")


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
            if key.startswith(OWNED_PREFIXES) and not (section == "annotations" and key.startswith("app.kubernetes.io/")):
                out.append((("spec", "pods", section, key), f"{key!r} is the generator's (its selectors and tools read "
                            f"{', '.join(OWNED_PREFIXES)} keys)", True))
    return out
