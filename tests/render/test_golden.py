"""Golden trees: `render -o DIR` of each example profile equals tests/golden/<profile>/ byte for byte.

Refresh deliberately with `pytest tests/render/test_golden.py --update-golden` and review the diff.
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

from slurmk8s.actions.render import render_to

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def tree(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under root (hidden files included)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_render_matches_golden_tree(example_profile: Path, tmp_path: Path, update_golden: bool) -> None:
    out = tmp_path / "out"
    render_to(str(example_profile), str(out))
    golden = GOLDEN / example_profile.stem
    if update_golden:
        shutil.rmtree(golden, ignore_errors=True)
        shutil.copytree(out, golden)
    want, got = tree(golden), tree(out)
    assert want, f"{golden} is empty: run pytest --update-golden once"
    assert sorted(set(want) - set(got)) == [], "files missing from the render"
    assert sorted(set(got) - set(want)) == [], "files the golden tree lacks"
    for rel in sorted(want):
        if want[rel] != got[rel]:
            diff = difflib.unified_diff(want[rel].decode(errors="replace").splitlines(),
                                        got[rel].decode(errors="replace").splitlines(),
                                        f"golden/{rel}", f"render/{rel}", lineterm="")
            raise AssertionError("\n".join(diff))


def test_golden_tree_is_complete() -> None:
    """The comparison above is only as good as the golden data: it must hold objects and Slurm files."""
    for name in ("kind-dev", "gpu-ib", "legacy-munge"):
        files = tree(GOLDEN / name)
        assert "slurm/slurm.conf" in files and "manifests/ORDER" in files
        assert any(rel.startswith("manifests/statefulset-") for rel in files)
    assert "slurm/gres.conf" in tree(GOLDEN / "gpu-ib")
