"""The plain output: one YAML file per Kubernetes object plus the Slurm files."""

from __future__ import annotations

import os
from pathlib import Path

from slurmk8s.errors import UsageError
from slurmk8s.output.yamlout import dump
from slurmk8s.render import Bundle

MARKER = ".slurmk8s-rendered"


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


def write_tree(tree: dict[str, str], out_dir: Path) -> list[str]:
    """Write the tree, replacing what an earlier render wrote there; refuse a foreign non-empty dir."""
    marker = out_dir / MARKER
    if out_dir.exists() and any(out_dir.iterdir()) and not marker.exists():
        raise UsageError(f"{out_dir}: directory is not empty and was not written by slurmk8s render; "
                         "choose an empty or new directory")
    if marker.exists():
        for rel in marker.read_text().split():
            old = out_dir / rel
            if rel not in tree and old.is_file():
                old.unlink()
    for rel, text in tree.items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    for d in sorted({(out_dir / r).parent for r in marker.read_text().split()} if marker.exists() else set(), reverse=True):
        if d != out_dir and d.is_dir() and not any(d.iterdir()):
            os.rmdir(d)
    marker.write_text("".join(f"{r}\n" for r in tree))
    return list(tree)
