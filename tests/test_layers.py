"""The layers of DESIGN.md hold: imports only point down, the pure core does no I/O, kubernetes stays in kube.

cli -> actions -> output | kube | lab | images -> render -> profile -> naming, errors, versions, quantity;
slurmk8s.debian (Debian suites, debootstrap) sits under lab and images, which never import each other.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "slurmk8s"
IO = {"subprocess", "socket", "http", "urllib", "requests", "shutil", "os", "tempfile", "asyncio", "ctypes", "pathlib"}


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(every module a file imports, those imported at module level), as dotted names."""
    tree, found, top = ast.parse(path.read_text()), set(), set()
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] + [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module else []
        found.update(names)
        top.update(names if node in tree.body else [])
    return found, top


# Scripts that run inside the pods (shipped in a ConfigMap as text); slurmk8s never imports them.
POD_SCRIPTS = "slurmk8s.render.scripts"
ALL_MODULES = {".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"): imports(p)
               for p in PKG.rglob("*.py")}
MODULES = {m: i for m, i in ALL_MODULES.items() if not m.startswith(POD_SCRIPTS)}


CLI = ("slurmk8s.cli", "slurmk8s.cli_cluster", "slurmk8s.cli_lab", "slurmk8s.cli_topology", "slurmk8s.cli_images")
# The packages between actions and render: each stands alone.
SIDE_BY_SIDE = ("slurmk8s.output", "slurmk8s.kube", "slurmk8s.lab", "slurmk8s.images")


def under(module: str, *packages: str) -> bool:
    """True when module is one of packages or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def violations(rule) -> list[str]:
    """`module imports name` for every import the rule refuses."""
    return sorted(f"{m} imports {n}" for m, (names, top) in MODULES.items() for n in names if rule(m, n, n in top))


RULES = {
    "pod-scripts-are-never-imported": lambda m, n, top: under(n, POD_SCRIPTS),
    "pure-core-no-io-no-kubernetes": lambda m, n, top: under(m, "slurmk8s.render", "slurmk8s.profile")
    and (n.split(".")[0] in IO | {"kubernetes"} or under(n, "slurmk8s.actions", "slurmk8s.output", "slurmk8s.kube",
                                                         "slurmk8s.lab", "slurmk8s.images", "slurmk8s.debian",
                                                         "slurmk8s.cli")),
    "profile-below-render": lambda m, n, top: under(m, "slurmk8s.profile") and under(n, "slurmk8s.render"),
    "bottom-imports-no-slurmk8s": lambda m, n, top: m in ("slurmk8s.naming", "slurmk8s.errors", "slurmk8s.versions",
                                                          "slurmk8s.quantity") and under(n, "slurmk8s"),
    "only-kube-imports-kubernetes": lambda m, n, top: under(n, "kubernetes") and not under(m, "slurmk8s.kube"),
    "only-actions-and-cli-use-lab-kube-images": lambda m, n, top: under(n, "slurmk8s.lab", "slurmk8s.kube", "slurmk8s.images")
    and not under(m, *CLI, "slurmk8s.actions", "slurmk8s.lab", "slurmk8s.kube", "slurmk8s.images"),
    "no-sideways-imports-between-lab-kube-images-output": lambda m, n, top: any(
        under(m, a) and under(n, b) for a in SIDE_BY_SIDE for b in SIDE_BY_SIDE if a != b),
    "images-never-import-actions-or-cli": lambda m, n, top: under(m, "slurmk8s.images")
    and under(n, "slurmk8s.actions", *CLI),
    "debian-is-imported-by-lab-and-images-only": lambda m, n, top: under(n, "slurmk8s.debian")
    and not under(m, "slurmk8s.lab", "slurmk8s.images", "slurmk8s.debian"),
    "debian-imports-only-errors": lambda m, n, top: under(m, "slurmk8s.debian") and under(n, "slurmk8s")
    and not under(n, "slurmk8s.errors"),
    "cli-imports-actions-lazily": lambda m, n, top: under(m, *CLI)
    and top and under(n, "slurmk8s.actions", "slurmk8s.kube", "slurmk8s.lab", "slurmk8s.images", "slurmk8s.render",
                       "slurmk8s.output"),
}


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_layer_rule(rule) -> None:
    assert violations(rule) == []


def test_the_rules_see_imports() -> None:
    """Guard against a parser that finds nothing (every rule would pass vacuously)."""
    assert "slurmk8s.naming" in MODULES["slurmk8s.render.k8s.workers"][0]
    assert "slurmk8s.actions.render" in MODULES["slurmk8s.cli"][0] - MODULES["slurmk8s.cli"][1]
    assert violations(lambda m, n, top: m == "slurmk8s.cli" and n == "typer" and top) == ["slurmk8s.cli imports typer"]


@pytest.mark.parametrize("code", [
    "import slurmk8s.cli",
    "import sys; sys.argv = ['slurmk8s', 'render', 'profiles/gpu-ib.yaml', '-o', '-']\n"
    "import slurmk8s.cli\ntry:\n    slurmk8s.cli.main()\nexcept SystemExit as e:\n    assert not e.code, e.code",
], ids=["import-cli", "render"])
def test_kubernetes_client_is_not_loaded(code: str) -> None:
    check = "\nassert 'kubernetes' not in sys.modules, 'kubernetes was imported'\nprint('clean', file=sys.stderr)"
    run = subprocess.run([sys.executable, "-c", "import sys\n" + code + check], cwd=PKG.parent,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stderr.endswith("clean\n"), run.stderr
