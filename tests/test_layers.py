"""The layers of docs/architecture.md hold: one ordered list, imports only point down, the pure core does no I/O,
kubernetes stays in kube, no import cycles, lazy imports only in the CLI, and the code shipped into pods (podside)
needs nothing but the standard library.

cli -> actions -> output | kube | lab | images -> debian -> render -> profile -> material, naming, errors,
versions, quantity, podside (see LAYERS and docs/architecture.md).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "slurmk8s"
IO = {"subprocess", "socket", "http", "urllib", "requests", "shutil", "os", "tempfile", "asyncio", "ctypes", "pathlib"}


def imported(node: ast.AST) -> list[str]:
    """The dotted names an import statement names: `from pkg import x` names pkg and pkg.x (x may be a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(every module a file imports, those imported at module level), as dotted names."""
    tree, found, top = ast.parse(path.read_text()), set(), set()
    # Run at import: the module's statements and those of its `with` blocks (cli.py imports typer in one).
    module_level = [*tree.body, *(n for w in tree.body if isinstance(w, ast.With) for n in w.body)]
    for node in ast.walk(tree):
        names = imported(node)
        found.update(names)
        top.update(names if node in module_level else [])
    return found, top


def run_imports(path: Path) -> tuple[set[str], set[str]]:
    """(every name a file imports when it runs, those imported inside a function), as dotted names.

    Imports under `if TYPE_CHECKING:` never run: they are left out."""
    run: set[str] = set()
    deferred: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            node = ast.Module(body=node.orelse, type_ignores=[])
        run.update(imported(node))
        deferred.update(imported(node) if in_function else [])
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return run, deferred


# The code that runs inside pods. The renderer ships each file as text into a ConfigMap (or a Job's
# `python3 -c`), where the files lie flat in one directory: a shipped file can import only the standard
# library and its shipped siblings, by their bare names (`import kubeapi`), never `slurmk8s.anything`.
PODSIDE = "slurmk8s.podside"
# Bare names a shipped file may import: the files of podside, and versions.py (shipped as slurm_versions.py).
SHIPPED_NAMES = {p.stem for p in (PKG / "podside").glob("*.py")} | {"slurm_versions"}
# The programs the pods run; slurmk8s imports only the modules they share (rollout_core, sacctmgr, nodestate).
POD_PROGRAMS = tuple(f"{PODSIDE}.{name}" for name in ("busy", "power", "rollout", "upgrade_check", "accounts_job"))
FILES = {".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"): p for p in PKG.rglob("*.py")}
MODULES = {m: imports(p) for m, p in FILES.items()}
RUN_IMPORTS = {m: run_imports(FILES[m]) for m in MODULES}


CLI = ("slurmk8s.cli", "slurmk8s.cli_cluster", "slurmk8s.cli_lab", "slurmk8s.cli_topology", "slurmk8s.cli_images")

# The one order of the layers, top to bottom (docs/architecture.md). A layer holds
# units; a unit is a package (or, for the CLI, its modules together). A module imports only its
# own unit and the layers below its own: never up, never sideways into another unit of its layer.
LAYERS: list[list[tuple[str, ...]]] = [
    [CLI],
    [("slurmk8s.actions",)],
    [("slurmk8s.output",), ("slurmk8s.kube",), ("slurmk8s.lab",), ("slurmk8s.images",)],
    [("slurmk8s.debian",)],
    [("slurmk8s.render",)],
    [("slurmk8s.profile",)],
    [("slurmk8s.material",), ("slurmk8s.naming",), ("slurmk8s.errors",), ("slurmk8s.versions",), ("slurmk8s.quantity",),
     ("slurmk8s.progress",), (PODSIDE,)],
]


def under(module: str, *packages: str) -> bool:
    """True when module is one of packages or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def place(module: str) -> tuple[int, tuple[str, ...]] | None:
    """(layer index, unit) of a slurmk8s module; None for a module outside every layer."""
    for index, layer in enumerate(LAYERS):
        for unit in layer:
            if under(module, *unit):
                return index, unit
    return None


def layer_violation(module: str, name: str) -> bool:
    """True when `module` importing `name` goes up the layer list or sideways to another unit of its layer."""
    if not under(name, "slurmk8s") or name == "slurmk8s":
        return False
    (here, unit), target = place(module), place(name)
    if target is None:
        return True  # a module that is in no layer is a layer list to extend, not a free pass
    there, other = target
    return there < here or (there == here and other != unit)


def violations(rule, modules=None) -> list[str]:
    """`module imports name` for every import the rule refuses."""
    modules = MODULES if modules is None else modules
    return sorted(f"{m} imports {n}" for m, (names, top) in modules.items() for n in names if rule(m, n, n in top))


def shipped_import_violation(module: str, name: str) -> bool:
    """True when a podside module imports what a pod does not have: slurmk8s, or anything outside the stdlib."""
    top = name.split(".")[0]
    return under(module, PODSIDE) and module != PODSIDE and top != "__future__" \
        and top not in sys.stdlib_module_names and top not in SHIPPED_NAMES


# Rules besides the order: what may do I/O, who may touch the kubernetes client, the pod programs.
RULES = {
    "layers-in-one-order": lambda m, n, top: layer_violation(m, n),
    "pod-programs-are-never-imported": lambda m, n, top: under(n, *POD_PROGRAMS),
    "podside-needs-only-the-stdlib-and-its-siblings": lambda m, n, top: shipped_import_violation(m, n),
    "pure-core-no-io-no-kubernetes": lambda m, n, top: under(m, "slurmk8s.render", "slurmk8s.profile")
    and m != "slurmk8s.profile.files"  # the one reader of profile files
    and n.split(".")[0] in IO | {"kubernetes"},
    "only-kube-imports-kubernetes": lambda m, n, top: under(n, "kubernetes") and not under(m, "slurmk8s.kube"),
    # Actions talk to a cluster through the client the CLI builds with actions.interface.connect (its one factory).
    "cli-reaches-clusters-only-through-actions": lambda m, n, top: under(m, *CLI) and under(n, "slurmk8s.kube", "slurmk8s.lab"),
    "one-factory-builds-cluster-clients": lambda m, n, top: under(m, "slurmk8s.actions") and m != "slurmk8s.actions.interface"
    and under(n, "slurmk8s.kube.client", "slurmk8s.kube.kubecluster", "slurmk8s.lab.access"),
    "cli-imports-actions-lazily": lambda m, n, top: under(m, *CLI)
    and top and under(n, "slurmk8s.actions", "slurmk8s.kube", "slurmk8s.lab", "slurmk8s.images", "slurmk8s.render",
                       "slurmk8s.output"),
}


def import_graph(run_imports: dict[str, tuple[set[str], set[str]]]) -> dict[str, set[str]]:
    """module -> the slurmk8s modules its imports run, at module level or in a function (lazy imports are
    where cycles hide). A package is its __init__: `from pkg import mod` runs pkg.mod and reads pkg (while
    pkg's __init__ may still be running), and importing a module first runs the packages above it that are
    not the importer's own (those have started before the importer did)."""
    def parents(name: str) -> list[str]:
        return [name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)]
    return {m: {t for n in names if n in run_imports for t in [n, *(p for p in parents(n) if not under(m, p))]} - {m}
            for m, (names, _) in run_imports.items()}


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str]:
    """A shortest import cycle from start back to start, in import order; [] when there is none."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for there in sorted(graph[here]):
            if there == start:
                path = [here]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if there not in came_from:
                came_from[there] = here
                queue.append(there)
    return []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that importing start runs, start itself included."""
    seen, todo = {start}, [start]
    while todo:
        new = graph[todo.pop()] - seen
        seen |= new
        todo.extend(new)
    return seen


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """`a -> b -> a`, one shortest cycle for each knot of modules that import each other, from its first module."""
    found: list[str] = []
    knotted: set[str] = set()
    for module in sorted(graph):
        if module not in knotted and (cycle := cycle_through(graph, module)):
            found.append(" -> ".join(cycle))
            knotted |= {m for m in reachable(graph, module) if module in reachable(graph, m)}
    return found


def test_every_module_has_a_layer() -> None:
    assert sorted(m for m in MODULES if place(m) is None and m != "slurmk8s") == []


@pytest.mark.parametrize("added, expected", [
    (("slurmk8s.kube.wait", "slurmk8s.actions.up"), "up"),
    (("slurmk8s.kube.wait", "slurmk8s.lab.lifecycle"), "sideways"),
    (("slurmk8s.naming", "slurmk8s.errors"), "sideways"),
    (("slurmk8s.profile.model", "slurmk8s.render"), "up"),
    (("slurmk8s.lab.lifecycle", "slurmk8s.render"), None),
    (("slurmk8s.cli", "slurmk8s.cli_lab"), None),
])
def test_the_order_refuses_upward_and_sideways_imports(added, expected) -> None:
    """An import added where it does not belong fails the layer rule; a downward one passes."""
    module, name = added
    modules = dict(MODULES)
    names, top = modules[module]
    modules[module] = (names | {name}, top)
    found = violations(RULES["layers-in-one-order"], modules)
    assert (f"{module} imports {name}" in found) == (expected is not None), found


@pytest.mark.parametrize("rule, added", [
    ("cli-reaches-clusters-only-through-actions", ("slurmk8s.cli_cluster", "slurmk8s.kube.client")),
    ("one-factory-builds-cluster-clients", ("slurmk8s.actions.scale", "slurmk8s.lab.access")),
    ("one-factory-builds-cluster-clients", ("slurmk8s.actions.up", "slurmk8s.kube.client")),
])
def test_the_client_rules_refuse_a_second_way_to_a_cluster(rule, added) -> None:
    """A CLI module that connects by itself, or an action that builds its own client, fails its rule."""
    module, name = added
    modules = dict(MODULES)
    names, top = modules[module]
    modules[module] = (names | {name}, top)
    assert violations(RULES[rule], modules) == [f"{module} imports {name}"]


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_layer_rule(rule) -> None:
    assert violations(rule) == []


def test_no_import_cycles() -> None:
    """Not even inside a package, nor through a package's __init__: each module's imports are below it."""
    assert import_cycles(import_graph(RUN_IMPORTS)) == []


@pytest.mark.parametrize("added, cycle", [
    (("slurmk8s.actions.slurmview", "slurmk8s.actions.status"),
     "slurmk8s.actions.slurmview -> slurmk8s.actions.status -> slurmk8s.actions.slurmview"),
    # `from slurmk8s.render import Bundle` in a builder that render/__init__.py imports
    (("slurmk8s.render.k8s.workers", "slurmk8s.render"),
     "slurmk8s.render -> slurmk8s.render.k8s.workers -> slurmk8s.render"),
    (("slurmk8s.render.topology", "slurmk8s.render.slurmfiles"),
     "slurmk8s.render.slurmfiles -> slurmk8s.render.topology -> slurmk8s.render.slurmfiles"),
], ids=["inside-a-package", "through-a-package-init", "lazy"])
def test_the_cycle_rule_reports_a_cycle_in_import_order(added, cycle) -> None:
    """An import added inside a function that closes a loop fails the rule, which names the loop's modules."""
    module, name = added
    run = dict(RUN_IMPORTS)
    names, deferred = run[module]
    run[module] = (names | {name}, deferred | {name})
    assert import_cycles(import_graph(run)) == [cycle]


# The slurmk8s imports that stay inside a function outside the CLI, each with why. The CLI defers every command's
# imports to its dispatch (rule cli-imports-actions-lazily); below it, modules import at the top.
DEFERRED_ALLOWED = {
    # connect() builds one of two clients: KubeCluster loads the kubernetes package (tens of ms), which a lab
    # (`scale --lab`) and the actions' own imports must not pay for; the lab's client loads the lab.
    ("slurmk8s.actions.interface", "slurmk8s.kube.kubecluster"): "the kubernetes client only when one is built",
    ("slurmk8s.actions.interface", "slurmk8s.lab.access"): "the lab's client only when a lab is asked for",
}


def deferred_violations(run_imports: dict[str, tuple[set[str], set[str]]]) -> list[str]:
    """`module imports name in a function` for each slurmk8s module imported lazily outside the CLI and the list."""
    return sorted(f"{m} imports {n} in a function" for m, (_, deferred) in run_imports.items() if not under(m, *CLI)
                  for n in deferred if n in run_imports and (m, n) not in DEFERRED_ALLOWED)


def test_lazy_imports_only_at_the_cli_boundary() -> None:
    assert deferred_violations(RUN_IMPORTS) == []
    assert set(DEFERRED_ALLOWED) <= {(m, n) for m, (_, deferred) in RUN_IMPORTS.items() for n in deferred}, \
        "an allowed lazy import that is gone: drop it from DEFERRED_ALLOWED"


def test_the_lazy_import_rule_can_fail() -> None:
    """An import of a slurmk8s module inside an action's function fails; the same import at the top passes."""
    run = dict(RUN_IMPORTS)
    names, deferred = run["slurmk8s.actions.up"]
    run["slurmk8s.actions.up"] = (names | {"slurmk8s.kube.wait"}, deferred | {"slurmk8s.kube.wait"})
    assert deferred_violations(run) == ["slurmk8s.actions.up imports slurmk8s.kube.wait in a function"]
    run["slurmk8s.actions.up"] = (names | {"slurmk8s.kube.wait"}, deferred)
    assert deferred_violations(run) == []


def test_the_import_graph_resolves_names() -> None:
    """`from pkg import mod` reaches the module; a lazy import counts; an import only for type checking does not."""
    graph = import_graph(RUN_IMPORTS)
    assert {"slurmk8s.lab", "slurmk8s.lab.kubelet"} <= graph["slurmk8s.lab.lifecycle"]  # from slurmk8s.lab import kubelet
    assert "slurmk8s.kube.kubecluster" in graph["slurmk8s.actions.interface"]  # inside connect()
    assert "slurmk8s.render.k8s" in graph["slurmk8s.render"]  # the package above a module it imports
    assert "slurmk8s.render" not in graph["slurmk8s.render.slurmfiles"]  # its own package: already running
    assert "slurmk8s.lab.lifecycle" in MODULES["slurmk8s.lab.runtime"][0]
    assert "slurmk8s.lab.lifecycle" not in graph["slurmk8s.lab.runtime"]  # under `if TYPE_CHECKING:`


def test_the_rules_see_imports() -> None:
    """Guard against a parser that finds nothing (every rule would pass vacuously)."""
    assert "slurmk8s.naming" in MODULES["slurmk8s.render.k8s.workers"][0]
    assert "slurmk8s.actions.render" in MODULES["slurmk8s.cli"][0] - MODULES["slurmk8s.cli"][1]
    assert violations(lambda m, n, top: m == "slurmk8s.cli" and n == "typer" and top) == ["slurmk8s.cli imports typer"]
    assert {"ssl", "socket"} <= MODULES["slurmk8s.podside.kubeapi"][0]


@pytest.mark.parametrize("added, refused", [
    (("slurmk8s.podside.busy", "slurmk8s.naming"), True),
    (("slurmk8s.podside.rollout_core", "slurmk8s.podside.kubeapi"), True),  # no package in the pod's directory
    (("slurmk8s.podside.power", "yaml"), True),
    (("slurmk8s.podside.power", "kubeapi"), False),
    (("slurmk8s.podside.upgrade_check", "slurm_versions"), False),
    (("slurmk8s.podside.busy", "http.client"), False),
])
def test_shipped_code_imports_only_what_a_pod_has(added, refused) -> None:
    """A podside module importing slurmk8s or a third-party package fails; a stdlib or shipped sibling import passes."""
    module, name = added
    modules = dict(MODULES)
    names, top = modules[module]
    modules[module] = (names | {name}, top)
    found = violations(RULES["podside-needs-only-the-stdlib-and-its-siblings"], modules)
    assert (f"{module} imports {name}" in found) == refused, found


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
