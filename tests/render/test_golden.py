"""Golden trees: `render -o DIR` of each example profile equals tests/golden/<profile>/ byte for byte, except
that each verbatim copy of a file shipped into pods (slurmk8s/podside/*, versions.py) is one placeholder
line in the golden tree, and the shipped file's sha256 is in tests/golden/SHIPPED.sha256. So a change to a
shipped program changes one digest line, not a copy in every tree that ships it.

Refresh deliberately with `pytest tests/render/test_golden.py --update-golden` and review the diff.
"""

from __future__ import annotations

import difflib
import hashlib
import shutil
from pathlib import Path

from slurmk8s.actions.render import render_to

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
DIGESTS = GOLDEN / "SHIPPED.sha256"
PLACEHOLDER = "# slurmk8s golden: here the render holds {path} verbatim (sha256 in tests/golden/SHIPPED.sha256)"


def shipped_files() -> dict[str, str]:
    """Repository path -> text of every file the renderer copies into a ConfigMap or a Job."""
    paths = [p for p in sorted((ROOT / "slurmk8s" / "podside").iterdir())
             if p.suffix in (".py", ".sh") and p.name != "__init__.py"] + [ROOT / "slurmk8s" / "versions.py"]
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in paths}


def digests(files: dict[str, str]) -> str:
    """SHIPPED.sha256's text: `sha256sum` lines, one per shipped file."""
    return "".join(f"{hashlib.sha256(text.encode()).hexdigest()}  {path}\n" for path, text in sorted(files.items()))


def _copy_at(lines: list[str], at: int, want: list[str]) -> str | None:
    """The indentation of a copy of want's lines starting at lines[at] (as YAML's literal block style writes a
    string: every line indented alike, empty lines bare), None when there is none."""
    first = lines[at]
    indent = first[:len(first) - len(first.lstrip(" "))]
    if first[len(indent):] != want[0] or at + len(want) > len(lines):
        return None
    same = all(lines[at + k] == (indent + w if w else "") for k, w in enumerate(want))
    return indent if same else None


def collapse(text: str, files: dict[str, str]) -> str:
    """text with each verbatim copy of a shipped file replaced by one placeholder line at its indentation."""
    lines = text.split("\n")
    for path, source in sorted(files.items(), key=lambda f: -len(f[1])):  # longest first
        want = source.rstrip("\n").split("\n")
        out, at = [], 0
        while at < len(lines):
            indent = _copy_at(lines, at, want)
            if indent is None:
                out.append(lines[at])
                at += 1
            else:
                out.append(indent + PLACEHOLDER.format(path=path))
                at += len(want)
        lines = out
    return "\n".join(lines)


MARKER = ".slurmk8s-rendered"  # the render's `sha256sum` of every file it wrote


def tree(root: Path, files: dict[str, str] | None = None) -> dict[str, bytes]:
    """Relative path -> bytes of every file under root (hidden files included).

    With files: shipped copies collapsed, and the marker's digest of a collapsed file is that of its golden
    form, once the marker was checked against the file as rendered.
    """
    found = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    if files is None:
        return found
    out = {rel: collapse(data.decode(), files).encode() if rel.endswith(".yaml") else data for rel, data in found.items()}
    if MARKER in found:
        lines = []
        for line in found[MARKER].decode().splitlines():
            digest, rel = line.split("  ", 1)
            if rel in out and out[rel] != found[rel]:
                assert digest == hashlib.sha256(found[rel]).hexdigest(), f"{MARKER} misstates {rel}"
                digest = hashlib.sha256(out[rel]).hexdigest()
            lines.append(f"{digest}  {rel}\n")
        out[MARKER] = "".join(lines).encode()
    return out


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_render_matches_golden_tree(example_profile: Path, tmp_path: Path, update_golden: bool) -> None:
    out = tmp_path / "out"
    render_to(str(example_profile), str(out))
    golden = GOLDEN / example_profile.stem
    got = tree(out, shipped_files())
    if update_golden:
        shutil.rmtree(golden, ignore_errors=True)
        write_tree(golden, got)
    want = tree(golden)
    assert want, f"{golden} is empty: run pytest --update-golden once"
    assert sorted(set(want) - set(got)) == [], "files missing from the render"
    assert sorted(set(got) - set(want)) == [], "files the golden tree lacks"
    for rel in sorted(want):
        if want[rel] != got[rel]:
            diff = difflib.unified_diff(want[rel].decode(errors="replace").splitlines(),
                                        got[rel].decode(errors="replace").splitlines(),
                                        f"golden/{rel}", f"render/{rel}", lineterm="")
            raise AssertionError("\n".join(diff))


def test_shipped_files_are_the_reviewed_ones(update_golden: bool) -> None:
    """The golden trees hold placeholders for the shipped files: their digests stand for the copies."""
    if update_golden:
        DIGESTS.write_text(digests(shipped_files()))
    recorded = dict(reversed(line.split("  ", 1)) for line in DIGESTS.read_text().splitlines())
    current = dict(reversed(line.split("  ", 1)) for line in digests(shipped_files()).splitlines())
    changed = sorted(p for p in recorded.keys() | current.keys() if recorded.get(p) != current.get(p))
    assert changed == [], f"shipped file(s) changed: {', '.join(changed)}; review, then run " \
                          "pytest tests/render/test_golden.py --update-golden (it rewrites tests/golden/SHIPPED.sha256)"


def test_the_golden_trees_hold_placeholders_not_copies() -> None:
    """A shipped program appears in the golden trees only as its placeholder (and the render does ship it)."""
    trees = {name: tree(GOLDEN / name) for name in ("kind-dev", "gpu-ib", "legacy-munge")}
    busy = trees["kind-dev"]["manifests/configmap-dev-busy.yaml"].decode()
    assert "  busy.py: |\n    " + PLACEHOLDER.format(path="slurmk8s/podside/busy.py") + "\n" in busy
    assert "    " + PLACEHOLDER.format(path="slurmk8s/podside/kubeapi.py") + "\n" in busy
    health = trees["kind-dev"]["manifests/configmap-dev-health.yaml"].decode()
    assert "GPU_COUNT=0" in health and PLACEHOLDER.format(path="slurmk8s/podside/healthcheck.sh") in health
    longest = {path: max(text.split("\n"), key=len) for path, text in shipped_files().items()}
    copies = sorted(f"{name}/{rel}: {path}" for name, files in trees.items() for rel, data in files.items()
                    for path, line in longest.items() if line in data.decode())
    assert copies == []


def test_collapse_replaces_only_whole_copies() -> None:
    files = {"a.py": "one\n\ntwo\n"}
    text = "data:\n  a.py: |\n    one\n\n    two\n  b.py: |\n    one\n    two\n"
    assert collapse(text, files) == ("data:\n  a.py: |\n    " + PLACEHOLDER.format(path="a.py") +
                                     "\n  b.py: |\n    one\n    two\n")
    assert collapse("  one\n  two\n", files) == "  one\n  two\n"  # the empty line is missing: not a copy


def test_golden_tree_is_complete() -> None:
    """The comparison above is only as good as the golden data: it must hold objects and Slurm files."""
    for name in ("kind-dev", "gpu-ib", "legacy-munge"):
        files = tree(GOLDEN / name)
        assert "slurm/slurm.conf" in files and "manifests/ORDER" in files
        assert any(rel.startswith("manifests/statefulset-") for rel in files)
    assert "slurm/gres.conf" in tree(GOLDEN / "gpu-ib")
