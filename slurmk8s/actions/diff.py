"""`diff`: a server-side dry run of `up`, shown as unified diffs of YAML."""

from __future__ import annotations

import difflib
import json
from typing import Any, Callable

import yaml

from slurmk8s.actions.interface import header
from slurmk8s.actions.converge import drain_dropped, into_range
from slurmk8s.actions.secrets import secret_factory
from slurmk8s.actions.up import day_two_of_plan, summary_line
from slurmk8s.kube.apply import ACTIONS, CREATED, KEPT, UNCHANGED
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render


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


def plan_document(plan, bundle, cluster) -> dict[str, Any]:
    """`diff -o json|yaml`: what would change, object by object (live and applied), Secrets by name only."""
    changes = []
    for c in plan.changes:
        if c.action in (UNCHANGED, KEPT):
            continue
        entry: dict[str, Any] = {"ref": c.ref, "kind": c.ref.split("/", 1)[0], "name": c.ref.split("/", 1)[1],
                                 "action": c.action, "stage": c.stage}
        if not c.ref.startswith("Secret/"):
            entry.update(live=c.before, applied=c.after)
        changes.append(entry)
    return {"cluster": bundle.cluster, "namespace": bundle.namespace, "context": cluster.context, "server": cluster.host,
            "changed": plan.changed, "counts": {a: plan.count(a) for a in ACTIONS}, "changes": changes}


def run_diff(profile_path: str, cluster, echo: Callable[[str], None] = print, workers: int = 8,
             output: str = "text", note: Callable[[str], None] | None = None, timeout: float = 60,
             namespace: str | None = None):
    """Print what `up` would change (unified diffs, or one JSON/YAML document); returns the dry-run Plan."""
    profile = read_profile(profile_path, namespace)
    bundle = render(profile)
    say = echo if output == "text" else note or echo
    say(header(bundle, cluster))

    def resize() -> None:
        """What `up` does to the pools before its writes, as a dry run (reads only)."""
        into_range(profile, bundle, cluster, timeout, dry_run=True, log=say)
        drain_dropped(bundle, cluster, timeout, dry_run=True, log=say)

    plan = cluster.apply(bundle, secret_factory(bundle), dry_run=True, workers=workers, before_writes=resize)
    day_two = day_two_of_plan(plan, bundle, bundle.version)
    if output != "text":
        document = plan_document(plan, bundle, cluster)
        document["restarts"] = [{"workload": r.ref, "pods": list(r.pods), "reasons": list(r.reasons)}
                                for r in day_two.restarts]
        document["inPlace"] = list(day_two.in_place)
        document["identityInPlace"] = list(day_two.identity)
        echo(format_document(document, output).rstrip("\n"))
        return plan
    text = format_plan_diff(plan)
    if text:
        echo(text.rstrip("\n"))
    for line in day_two.lines():
        echo(line)
    echo(("would change: " if plan.changed else "") + summary_line(plan, len(bundle.secrets)))
    return plan


def format_document(document: dict[str, Any], output: str) -> str:
    """A machine-readable document as JSON or YAML (keys in the order built)."""
    if output == "json":
        return json.dumps(document, indent=2) + "\n"
    return yaml.dump(document, Dumper=_ReadableDumper, sort_keys=False, default_flow_style=False, width=1000)
