"""The wheel holds what users run: no test data in the package."""

from __future__ import annotations

from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "slurmk8s"


def test_the_package_stays_small_and_holds_no_test_data() -> None:
    files = [p for p in PKG.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    size = sum(p.stat().st_size for p in files)
    assert size < 1_000_000, f"slurmk8s/ holds {size} bytes; largest: " + \
        ", ".join(f"{p.relative_to(PKG)} {p.stat().st_size}" for p in sorted(files, key=lambda p: -p.stat().st_size)[:5])
    assert not [p for p in files if "crdschemas" in p.parts or p.name.startswith("test_")]
