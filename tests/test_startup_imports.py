"""`--help` and the render of a valid profile stay light: the heavy libraries load only when needed.

jsonschema words the errors of an invalid profile, rich would format help, kubernetes is for cluster
commands, jinja2 renders
only a template edited since tools/compile_templates.py ran. Each would
cost tens of milliseconds at every start (issue 17: --help <= 0.08 s, render no slower than helm).
pydantic is not on the list: typer coerces every parameter through it, and the CLI uses typer's public API only.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("jsonschema", "rich", "kubernetes", "jinja2")


def loaded_after(argv: list[str]) -> tuple[int, set[str]]:
    """(exit code, heavy top-level modules imported) of one CLI run in a fresh interpreter."""
    code = ("import sys\nsys.argv = ['slurmk8s', *sys.argv[1:]]\nimport slurmk8s.cli\n"
            "try:\n    slurmk8s.cli.main()\nexcept SystemExit as e:\n    status = e.code\n"
            f"print(status, ' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    status, _, modules = run.stderr.strip().splitlines()[-1].partition(" ")
    return int(status or 0), set(modules.split())


@pytest.mark.parametrize("argv", [["--help"], ["render", "--help"],
                                  ["render", "profiles/gpu-ib.yaml", "-o", "-"],
                                  ["validate", "profiles/side-by-side.yaml"]], ids=" ".join)
def test_no_heavy_import(argv: list[str]) -> None:
    assert loaded_after(argv) == (0, set())


def test_an_invalid_profile_still_gets_jsonschema(tmp_path: Path) -> None:
    """The check can fail: a bad profile loads jsonschema for its messages."""
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "profiles" / "kind-dev.yaml").read_text().replace("spec:", "spec:\n  bogus: 1", 1))
    status, modules = loaded_after(["validate", str(bad)])
    assert status == 2 and "jsonschema" in modules
