"""Only slurmk8s.kube may import the Kubernetes client (read from the sources with ast)."""

from __future__ import annotations

import ast
from pathlib import Path

import slurmk8s

PACKAGE = Path(slurmk8s.__file__).parent


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_only_the_kube_package_imports_kubernetes():
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if "kubernetes" in imported_roots(p) and p.parent.name != "kube"]
    assert offenders == []
    assert "kubernetes" in imported_roots(PACKAGE / "kube" / "client.py")  # the check can see an import


def test_pure_kube_modules_stay_pure():
    for name in ("stages.py", "ownership.py", "__init__.py"):
        assert "kubernetes" not in imported_roots(PACKAGE / "kube" / name), name
