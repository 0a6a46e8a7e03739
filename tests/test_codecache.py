"""slurmk8s.codecache: the standard dataclass, its generated code compiled once and kept beside the .pyc.

Each run is a fresh interpreter with its own bytecode cache directory (PYTHONPYCACHEPREFIX), as a
user's second run finds the first one's cache.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MODULE = '''
from __future__ import annotations
from dataclasses import field
from slurmk8s.codecache import dataclass

@dataclass(frozen=True, order=True)
class Shape:
    """A shape."""
    name: str
    cpus: int = 4
    tags: tuple[str, ...] = field(default_factory=tuple)
    source: str = field(default="<x>", compare=False)
'''

# What a class does, as text: the same whether its methods were compiled now or found in the cache,
# and the same as the standard library's own dataclass of the same source gives.
PROBE = '''
import dataclasses, inspect, json, sys
sys.path.insert(0, sys.argv[1])
import shape
from slurmk8s import codecache
S = shape.Shape
a, b = S("a", 8, ("x",), source="one"), S("a", 8, ("x",), source="two")
try:
    a.cpus = 1
    frozen = "no"
except dataclasses.FrozenInstanceError as e:
    frozen = str(e)
print(json.dumps({"misses": codecache.misses, "repr": repr(a), "eq": a == b, "hash": hash(a) == hash(b),
                  "lt": S("a") < S("b"), "frozen": frozen, "signature": str(inspect.signature(S)),
                  "doc": S.__doc__, "fields": [f.name for f in dataclasses.fields(S)],
                  "init_code": S.__init__.__code__.co_code.hex(), "replace": repr(dataclasses.replace(a, cpus=2)),
                  "annotations": {k: str(v) for k, v in S.__init__.__annotations__.items()}}))
'''


def run_probe(module_dir: Path, cache: Path, write: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(cache))
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    run = subprocess.run([sys.executable, "-c", PROBE, str(module_dir)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture
def module_dir(tmp_path: Path) -> Path:
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "shape.py").write_text(MODULE)
    return tmp_path / "mod"


def without_misses(found: dict) -> dict:
    return {k: v for k, v in found.items() if k != "misses"}


def test_a_second_run_compiles_nothing_and_behaves_the_same(module_dir: Path, tmp_path: Path) -> None:
    first = run_probe(module_dir, tmp_path / "pyc")
    second = run_probe(module_dir, tmp_path / "pyc")
    assert first["misses"] > 0 and second["misses"] == 0
    assert without_misses(second) == without_misses(first)
    assert list((tmp_path / "pyc").rglob("shape.*.dataclasses"))


def test_the_class_is_the_standard_librarys(module_dir: Path, tmp_path: Path) -> None:
    """The same source under the plain dataclasses.dataclass gives the same class, to the bytecode."""
    cached = run_probe(module_dir, tmp_path / "pyc")
    cached_again = run_probe(module_dir, tmp_path / "pyc")
    (module_dir / "shape.py").write_text(MODULE.replace("from slurmk8s.codecache import dataclass",
                                                        "from dataclasses import dataclass"))
    plain = run_probe(module_dir, tmp_path / "pyc-plain")
    assert without_misses(cached) == without_misses(plain) == without_misses(cached_again)
    assert cached["frozen"] == "cannot assign to field 'cpus'" and cached["eq"] and cached["lt"]
    assert cached["annotations"]["cpus"] == "int"  # not the text 'int': compiled without this module's __future__


def test_a_changed_class_misses_and_gets_its_new_code(module_dir: Path, tmp_path: Path) -> None:
    run_probe(module_dir, tmp_path / "pyc")
    (module_dir / "shape.py").write_text(MODULE + "    gpus: int = 0\n")
    changed = run_probe(module_dir, tmp_path / "pyc")
    assert changed["misses"] > 0 and changed["repr"].endswith("gpus=0)")
    assert run_probe(module_dir, tmp_path / "pyc")["misses"] == 0


def test_no_cache_written_under_dont_write_bytecode(module_dir: Path, tmp_path: Path) -> None:
    run_probe(module_dir, tmp_path / "pyc", write=False)
    assert not list((tmp_path / "pyc").rglob("*.dataclasses"))
    assert run_probe(module_dir, tmp_path / "pyc", write=False)["misses"] > 0


def test_a_corrupt_cache_is_ignored_and_replaced(module_dir: Path, tmp_path: Path) -> None:
    first = run_probe(module_dir, tmp_path / "pyc")
    (cache,) = (tmp_path / "pyc").rglob("shape.*.dataclasses")
    cache.write_bytes(b"\x00garbage")
    again = run_probe(module_dir, tmp_path / "pyc")
    assert again["misses"] > 0 and without_misses(again) == without_misses(first)
    assert run_probe(module_dir, tmp_path / "pyc")["misses"] == 0


# Shipped into pods as source, where slurmk8s is not installed: the plain dataclass (their importers
# import them within codecache.caching()).
SHIPPED = {"slurmk8s/versions.py", "slurmk8s/render/sacctmgr.py", "slurmk8s/render/rollout.py"}


def test_slurmk8s_dataclasses_use_the_cache() -> None:
    """A module that takes dataclass from the standard library compiles its methods at every start."""
    plain = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "slurmk8s").rglob("*.py")
                   if re.search(r"^from dataclasses import .*\bdataclass\b", p.read_text(), re.M)
                   and not str(p.relative_to(ROOT)).startswith("slurmk8s/lab/"))
    assert plain == sorted(SHIPPED)


def test_a_render_from_warm_caches_compiles_no_dataclass(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"))
    code = ("import sys\nsys.argv = ['slurmk8s', 'render', 'profiles/gpu-ib.yaml', '-o', '-']\n"
            "import slurmk8s.cli\ntry:\n    slurmk8s.cli.main()\nexcept SystemExit:\n    pass\n"
            "from slurmk8s import codecache\nprint('misses', codecache.misses, file=sys.stderr)")
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60) for _ in range(2)]
    assert [r.stderr.strip().splitlines()[-1] for r in runs][1] == "misses 0"
    cached = {p.name.split(".")[0] for p in (tmp_path / "pyc").rglob("*.dataclasses")}
    assert {"model", "sacctmgr", "rollout", "_coercion"} <= cached, cached  # shipped ones and typer's too
    assert runs[0].stdout == runs[1].stdout and "\nkind: StatefulSet\n" in runs[0].stdout

