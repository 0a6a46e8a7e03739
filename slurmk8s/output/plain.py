"""The plain output: one YAML file per Kubernetes object plus the Slurm files."""

from __future__ import annotations

from slurmk8s.output.tree import MARKER, write_tree
from slurmk8s.output.yamlout import dump
from slurmk8s.render import Bundle

__all__ = ["MARKER", "object_filename", "plain_tree", "secrets_notice", "write_tree"]


def object_filename(obj: dict) -> str:
    """manifests/<kind>-<name>.yaml: stable when other objects come and go."""
    return f"manifests/{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def plain_tree(bundle: Bundle) -> dict[str, str]:
    """Relative path -> file content of the plain rendering (apply order kept in the index)."""
    tree = {object_filename(o): dump(o) for o in bundle.objects}
    tree.update({f"slurm/{name}": text for name, text in bundle.files.items()})
    index = "".join(f"{object_filename(o)}\n" for o in bundle.objects)
    tree["manifests/ORDER"] = index
    if bundle.secrets:
        tree["SECRETS.txt"] = secrets_notice(bundle)
    return dict(sorted(tree.items()))


def secrets_notice(bundle: Bundle) -> str:
    """Which Secrets the manifests reference (never their content) and how they are made."""
    lines = ["# Secrets referenced by these manifests. They are never rendered; `slurmk8s up` creates",
             "# each once with random material (`slurmk8s secrets create` for GitOps) and never overwrites it.",
             f"# namespace: {bundle.namespace}"]
    lines += [f"{s.name}\t{s.key}\t({s.kind}, for {s.component})" for s in bundle.secrets]
    return "\n".join(lines) + "\n"
