"""Every command in README.md and docs/*.md runs as written (issue 16).

The commands are the lines of the ```sh / ```bash blocks (synopses with placeholders live in ```text
blocks). Each one runs, in order, in a copy of the repository, with `slurmk8s` and `python` being
this checkout's; or it is in ALLOWLIST, with the reason it cannot run here (root, a cluster, podman,
the network), and is then only checked: bash parses it, every `slurmk8s` in it parses against the
real command line (options, arguments, subcommands), every script or file it names exists and
compiles. Inline `slurmk8s ...` spans in the prose must name real commands.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

_ROOT_LAB = "needs root: the pod lab runs real Slurm daemons in Linux namespaces"
_ROOT_IMAGES = "needs root and podman, and Debian's package mirrors (network)"
_KIND = "needs a kind cluster (root, podman, about 20 minutes)"
_PIP = "installs into the Python environment from the package index (network); the tests run in one already"
ALLOWLIST = {
    "pip install . && slurmk8s render profiles/kind-dev.yaml -o out/": _PIP,
    "pip install -q -e '.[test]' && bash tools/install-test-deps.sh && python -m pytest -q":
        _PIP + "; install-test-deps needs root; pytest is this suite",
    "sudo slurmk8s lab verify profiles/kind-dev.yaml": _ROOT_LAB,
    "sudo slurmk8s lab up profiles/legacy-munge.yaml": _ROOT_LAB,
    "sudo slurmk8s lab exec profiles/legacy-munge.yaml -- sinfo": _ROOT_LAB,
    "sudo slurmk8s lab down profiles/legacy-munge.yaml": _ROOT_LAB,
    "sudo python bench/lab.py": _ROOT_LAB,
    "sudo python bench/burst.py": _ROOT_LAB,
    "python bench/render.py --vs-helm CHART_DIR [--before CHECKOUT]":
        "needs helm (tools/install-helm.sh) and Slinky's chart fetched from GitHub (network)",
    "sudo python bench/kind.py": _KIND + "; --cold builds Kubernetes from source (about 5 minutes)",
    "sudo python bench/images.py": _ROOT_IMAGES,
    "sudo slurmk8s images build --slurm 26.05": _ROOT_IMAGES,
    "sudo slurmk8s images build --slurm 22.05 --slurm 24.11": _ROOT_IMAGES,
    "sudo slurmk8s images build --slurm 26.05 --registry registry.example.org/hpc": _ROOT_IMAGES,
    "sudo slurmk8s images save --slurm 26.05 -o images/": _ROOT_IMAGES + " (it saves images built first)",
    "sudo bash tools/install-test-deps.sh": "needs root: installs packages, podman, kind, the Slurm images",
    "python -m pytest tests/e2e -v": _KIND,
    "SLURMK8S_E2E_REUSE=1 python -m pytest tests/e2e": _KIND,
    # docs/kind-e2e.md's quick start: tests/e2e/test_quickstart.py runs it as written
    "KUBECONFIG=$(sudo tools/kind-cluster.sh up | tail -n 1)": _KIND,
    'slurmk8s up profiles/kind-dev.yaml --images local --kubeconfig "$KUBECONFIG"': _KIND,
    'kubectl --kubeconfig "$KUBECONFIG" -n slurm exec dev-login-0 -c sshd -- srun -N2 hostname': _KIND,
    'slurmk8s down profiles/kind-dev.yaml --kubeconfig "$KUBECONFIG"': _KIND,
    "sudo tools/kind-cluster.sh down": _KIND,
}
TIMEOUT = 300


def blocks(path: Path) -> list[list[str]]:
    """The commands of each sh/bash block: continuation lines joined, comments and blank lines dropped."""
    return text_blocks(path.read_text())


def text_blocks(text: str) -> list[list[str]]:
    found, current, inside = [], [], False
    for line in text.splitlines():
        fence = line.strip()
        if fence.startswith("```"):
            if inside:
                found.append(current)
                current, inside = [], False
            elif fence[3:].strip() in ("sh", "bash", "shell"):
                inside = True
            continue
        if inside:
            current.append(line.strip())
    commands_of = []
    for lines in found:
        joined, commands = "", []
        for line in lines:
            joined = f"{joined} {line[:-1].strip()}" if line.endswith("\\") else f"{joined} {line}"
            if line.endswith("\\"):
                continue
            command = without_comment(joined.strip())
            joined = ""
            if command:
                commands.append(command)
        commands_of.append(commands)
    return commands_of


def section_blocks(path: Path, heading: str) -> list[list[str]]:
    """The commands of each sh block under `heading` (a markdown heading line), up to the next heading."""
    lines, inside, section = path.read_text().splitlines(), False, None
    for i, line in enumerate(lines):
        if line.strip().startswith("```"):
            inside = not inside
        elif not inside and line.startswith("#"):
            if section is not None:
                return [b for b in text_blocks("\n".join(lines[section:i])) if b]
            section = i + 1 if line == heading else None
    assert section is not None, f"{path}: no heading {heading!r}"
    return [b for b in text_blocks("\n".join(lines[section:])) if b]


def without_comment(line: str) -> str:
    """line without a trailing `# comment` (one outside quotes)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return line
    if not words:
        return ""
    # keep the text as written up to the comment: cut at the first '#' preceded by whitespace outside quotes
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


DOC_COMMANDS = [(path.relative_to(ROOT).as_posix(), i, commands)
                for path in DOCS for i, commands in enumerate(blocks(path)) if commands]


def all_commands() -> list[str]:
    return [c for _, _, commands in DOC_COMMANDS for c in commands]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the repository, and an environment whose `slurmk8s` and `python` are this checkout's."""
    copy = tmp_path_factory.mktemp("docs") / "repo"
    # .hypothesis: the property tests' database, which a parallel run (-n 2) writes while this copies
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".hypothesis",
                                                              "*.egg-info"))
    bin_dir = copy.parent / "bin"
    bin_dir.mkdir()
    (bin_dir / "slurmk8s").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m slurmk8s.cli "$@"\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for tool in ("slurmk8s", "python"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    env.pop("KUBECONFIG", None)
    return copy, env


def test_the_docs_have_commands() -> None:
    assert len(all_commands()) >= 20
    assert "python bench/up.py" in all_commands()


def test_the_slow_blocks_are_blocks_that_run_a_benchmark() -> None:
    found = {(d, i): commands for d, i, commands in DOC_COMMANDS}
    assert all(any(c.startswith("python bench/") for c in found[block]) for block in SLOW_BLOCKS), SLOW_BLOCKS


def test_the_allowlist_is_current() -> None:
    """No reason is kept for a command the docs no longer have."""
    assert sorted(set(ALLOWLIST) - set(all_commands())) == []


# Blocks that run a whole benchmark (bench/up.py: about 20 s of timed rounds) belong to the full run only.
SLOW_BLOCKS = {("docs/benchmarks.md", 0)}


@pytest.mark.parametrize("doc, index, commands", [
    pytest.param(d, i, c, id=f"{d}#{i}", marks=[pytest.mark.slow] if (d, i) in SLOW_BLOCKS else [])
    for d, i, c in DOC_COMMANDS])
def test_each_block_runs_as_written(doc: str, index: int, commands: list[str], sandbox) -> None:
    copy, env = sandbox
    for command in commands:
        if command in ALLOWLIST:
            check_only(command)
            continue
        run = subprocess.run(["bash", "-c", f"set -euo pipefail\n{command}"], cwd=copy, env=env, capture_output=True,
                             text=True, timeout=TIMEOUT)
        assert run.returncode == 0, f"{doc}: `{command}` exited {run.returncode}:\n{run.stdout[-1500:]}{run.stderr[-1500:]}"
        assert "Traceback" not in run.stderr


def check_only(command: str) -> None:
    """What can be checked without root, a cluster or the network: syntax, slurmk8s's own parsing, files named."""
    parsed = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, f"`{command}`: {parsed.stderr}"
    for part in re.split(r"&&|\|\||;|\|", command.replace("$(", " ").replace(")", " ")):
        words = shlex.split(part)
        while words and (words[0] == "sudo" or re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0])):
            words = words[1:]
        if not words:
            continue
        if words[0] == "slurmk8s":
            dry_parse(words[1:])
        elif words[0] in ("python", "bash") and words[1:] and words[1].endswith((".py", ".sh")):
            named = ROOT / words[1]
            assert named.is_file(), f"`{command}`: {words[1]} does not exist"
            check = [sys.executable, "-m", "py_compile", str(named)] if named.suffix == ".py" else ["bash", "-n", str(named)]
            assert subprocess.run(check, capture_output=True, timeout=30).returncode == 0, f"{named} does not parse"
        elif words[0].startswith("tools/"):
            assert subprocess.run(["bash", "-n", str(ROOT / words[0])], capture_output=True, timeout=30).returncode == 0
        elif words[:3] == ["python", "-m", "pytest"]:
            for arg in words[3:]:
                if "/" in arg:
                    assert (ROOT / arg).exists(), f"`{command}`: {arg} does not exist"
        for arg in words[1:]:
            if arg.startswith(("profiles/", "bench/", "tools/")) and not arg.endswith("/"):
                assert (ROOT / arg).exists(), f"`{command}`: {arg} does not exist"


def dry_parse(args: list[str]) -> None:
    """Parse a slurmk8s command line as the CLI would (unknown options, missing arguments fail), without running it."""
    from typer.main import get_command

    from slurmk8s.cli import app
    command, name = get_command(app), "slurmk8s"
    while True:
        ctx = command.make_context(name, list(args))
        if not hasattr(command, "resolve_command"):
            return
        protected = getattr(ctx, "protected_args", None)
        rest = list(protected if protected is not None else getattr(ctx, "_protected_args", [])) + list(ctx.args)
        assert rest, f"`slurmk8s {' '.join(args)}`: no subcommand"
        name, command, args = command.resolve_command(ctx, rest)


INLINE = re.compile(r"`(slurmk8s [^`]+)`")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_inline_commands_name_real_commands(doc: Path) -> None:
    """`slurmk8s up / diff ...` in prose: each named command or group exists."""
    for span in INLINE.findall(doc.read_text()):
        words = span.split()[1:]
        path = []
        for word in words:
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            path.append(word)
        if not path:
            continue
        from typer.main import get_command

        from slurmk8s.cli import app
        command = get_command(app)
        ctx = command.make_context("slurmk8s", [path[0], "--help"], resilient_parsing=True)
        assert command.get_command(ctx, path[0]) is not None, f"{doc.name}: `{span}` names no command {path[0]!r}"


def test_a_bad_command_would_be_caught() -> None:
    """The checks can fail: a removed option, a missing argument, a misspelled subcommand."""
    for bad in (["render", "profiles/kind-dev.yaml", "--frmat", "helm"], ["up"], ["imgaes", "build"]):
        with pytest.raises(Exception):
            dry_parse(bad)
    dry_parse(["render", "profiles/kind-dev.yaml", "-o", "out", "--format", "helm"])


def test_the_kind_quick_start_is_found_under_its_heading() -> None:
    """tests/e2e/test_quickstart.py runs these blocks; here, fast: they are there and use no edited YAML."""
    start, clean_up = section_blocks(ROOT / "docs" / "kind-e2e.md", "### Quick start")
    assert start[0] == "KUBECONFIG=$(sudo tools/kind-cluster.sh up | tail -n 1)"
    assert any(c.startswith("slurmk8s up profiles/kind-dev.yaml --images local") for c in start)
    assert clean_up[-1] == "sudo tools/kind-cluster.sh down"
