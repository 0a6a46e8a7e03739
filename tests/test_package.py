"""The wheel holds what users run: no test data in the package."""

from __future__ import annotations

from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "slurmk8s"


def test_the_package_stays_small_and_holds_no_test_data() -> None:
    files = [p for p in PKG.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    size = sum(p.stat().st_size for p in files)
    # Code and its data, about 1.1 MB (148 modules, the schema, 14 templates); test data would be far more.
    assert size < 1_250_000, f"slurmk8s/ holds {size} bytes; largest: " + \
        ", ".join(f"{p.relative_to(PKG)} {p.stat().st_size}" for p in sorted(files, key=lambda p: -p.stat().st_size)[:5])
    assert not [p for p in files if "crdschemas" in p.parts or p.name.startswith("test_")]


def test_every_test_module_has_its_own_name():
    """pytest imports test modules by basename (no packages under tests/): two files of one name in
    different folders stop the whole run at collection, which a run of one folder never shows."""
    from collections import Counter
    tests = Path(__file__).resolve().parent
    names = Counter(p.name for p in tests.rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []
