"""Programs shipped into pods as source import nothing of slurmk8s, so they carry copies of naming's
labels; each copy must equal the one fact in naming.py."""

from __future__ import annotations

import ast
from pathlib import Path

from slurmk8s import naming
from slurmk8s.render import rollout

SCRIPTS = Path(__file__).resolve().parents[2] / "slurmk8s" / "render" / "scripts"


def constants(path: Path) -> dict[str, object]:
    """Module-level NAME = "literal" assignments of a script that is never imported."""
    tree = ast.parse(path.read_text())
    return {node.targets[0].id: node.value.value for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)}


def test_the_rollout_driver_uses_naming_s_labels() -> None:
    assert (rollout.POOL_LABEL, rollout.COMPONENT_LABEL, rollout.FIRST_NODE_ANNOTATION, rollout.WORKER) == \
        (naming.LABEL_POOL, naming.LABEL_COMPONENT, naming.ANNOTATION_FIRST_NODE, naming.WORKER)


def test_the_busy_marker_sets_naming_s_busy_label() -> None:
    assert constants(SCRIPTS / "busy.py")["LABEL"] == naming.LABEL_BUSY
