"""Programs shipped into pods as source import nothing of slurmk8s, so they carry copies of naming's
labels; each copy must equal the one fact in naming.py."""

from __future__ import annotations

import ast
from pathlib import Path

from slurmk8s import naming
from slurmk8s.podside import rollout_core as rollout

SCRIPTS = Path(__file__).resolve().parents[2] / "slurmk8s" / "podside"


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


def test_the_hooks_copies_equal_the_facts_they_copy() -> None:
    from slurmk8s.actions.reconfigure import ANNOTATION_CONFIG_SEEN
    assert rollout.SHAPE_LABEL == naming.LABEL_SHAPE
    assert constants(SCRIPTS / "rollout.py")["ANNOTATION_CONFIG_SEEN"] == ANNOTATION_CONFIG_SEEN
    assert constants(SCRIPTS / "upgrade_check.py")["ANNOTATION_SLURM_VERSION"] == naming.ANNOTATION_SLURM_VERSION
