"""`diff`: a server-side dry run of `up`, shown as unified diffs of YAML."""

from __future__ import annotations

import difflib
from typing import Any, Callable

import yaml


class _ReadableDumper(yaml.SafeDumper):
    """Multi-line strings (slurm.conf in a ConfigMap) as literal blocks, so a diff shows changed lines."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ReadableDumper.add_representer(str, _represent_str)


def object_yaml(obj: dict[str, Any] | None) -> list[str]:
    """Block-style YAML lines of obj (keys sorted, so a diff shows content, not order)."""
    if obj is None:
        return []
    return yaml.dump(obj, Dumper=_ReadableDumper, sort_keys=True, default_flow_style=False,
                     width=1000).splitlines(keepends=True)


def unified_object_diff(ref: str, before: dict | None, after: dict | None) -> str:
    """A unified diff between live and applied versions of one object ('' when equal)."""
    return "".join(difflib.unified_diff(object_yaml(before), object_yaml(after),
                                        fromfile=f"live/{ref}", tofile=f"applied/{ref}", n=3))


def format_plan_diff(plan) -> str:
    """Every change of a dry-run Plan as a diff; Secrets only by name (their material is never shown)."""
    from slurmk8s.kube.apply import CREATED, UNCHANGED, KEPT
    parts = []
    for change in plan.changes:
        if change.action in (UNCHANGED, KEPT):
            continue
        if change.ref.startswith("Secret/"):
            parts.append(f"# {change.ref}: would be created with new random material (not shown)\n")
            continue
        text = unified_object_diff(change.ref, change.before, change.after)
        if change.action == CREATED and change.after is None:
            text = f"# {change.ref}: would be created\n"
        parts.append(text)
    return "".join(parts)


def run_diff(profile_path: str, access, verbose: bool = False, echo: Callable[[str], None] = print,
             workers: int = 8):
    """Print what `up` would change; returns the dry-run Plan."""
    from slurmk8s.actions.render import render_file
    from slurmk8s.actions.secrets import secret_factory
    from slurmk8s.actions.up import summary_line
    from slurmk8s.kube.apply import apply_bundle
    from slurmk8s.kube.client import connect

    bundle = render_file(profile_path)
    kube = connect(access, verbose=verbose)
    plan = apply_bundle(kube, bundle, secret_factory(bundle), dry_run=True, workers=workers)
    text = format_plan_diff(plan)
    if text:
        echo(text.rstrip("\n"))
    echo(("would change: " if plan.changed else "") + summary_line(plan, len(bundle.secrets)))
    return plan
