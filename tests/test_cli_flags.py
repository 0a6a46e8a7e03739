"""What a kubectl or helm user reaches for first (issue 16): --version, -h, completion, '-' for stdin and stdout,
and `init` failures as one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import slurmk8s
from slurmk8s.actions.init import STARTER
from inprocess import run_cli

ROOT = Path(__file__).resolve().parents[1]
CODE = str(Path(slurmk8s.__file__).resolve().parents[1])  # subprocesses run the code under test
KIND_DEV = ROOT / "profiles" / "kind-dev.yaml"


def run(*args: str, stdin: str | None = None, cwd: Path | None = None, env_extra: dict | None = None,
        as_script: bool = False) -> subprocess.CompletedProcess:
    """slurmk8s ARGS through cli.main in this process; as_script runs a new interpreter under the console
    script's name (completion keys on it, and on the environment the shell starts it with)."""
    env = {**os.environ, "PYTHONPATH": CODE, **(env_extra or {})}
    if not as_script:
        return run_cli(args, env=env, input=stdin, cwd=cwd, timeout=60)
    command = [sys.executable, "-c", "import sys; sys.argv[0] = 'slurmk8s'; from slurmk8s.cli import main; main()"]
    return subprocess.run([*command, *args], input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd,
                          env=env)


def test_version() -> None:
    result = run("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"slurmk8s {slurmk8s.__version__}\n", "")


@pytest.mark.parametrize("args", [["-h"], ["render", "-h"], ["secrets", "create", "-h"]], ids=" ".join)
def test_dash_h_is_help(args: list[str]) -> None:
    result = run(*args)
    assert result.returncode == 0 and "Usage:" in result.stdout, result.stderr
    assert result.stdout == run(*args[:-1], "--help").stdout


@pytest.mark.parametrize("shell, marker", [
    ("bash", "complete -o default -F _slurmk8s_completion slurmk8s"),
    ("zsh", "#compdef slurmk8s"),
    ("fish", "complete --command slurmk8s"),
    ("powershell", "Register-ArgumentCompleter -Native -CommandName slurmk8s"),
])
def test_show_completion_prints_the_named_shells_script(shell, marker) -> None:
    """`--show-completion zsh` printed bash's script whenever typer could detect the running shell (issue 24.19);
    the shell detection is left on here, as a user has it."""
    script = run("--show-completion", shell, as_script=True)
    assert script.returncode == 0 and marker in script.stdout, script.stderr
    others = [m for s, m in [("bash", "complete -o default -F"), ("zsh", "#compdef"), ("fish", "complete --command")]
              if s != shell]
    assert not any(m in script.stdout for m in others)


def test_show_completion_refuses_an_unknown_shell() -> None:
    result = run("--show-completion", "tcsh", as_script=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "'tcsh': choose one of bash, zsh, fish, powershell, pwsh" in result.stderr


@pytest.mark.parametrize("shell, env", [
    ("bash", {"COMP_WORDS": "slurmk8s ren", "COMP_CWORD": "1"}),
    ("zsh", {"_TYPER_COMPLETE_ARGS": "slurmk8s ren"}),
    ("fish", {"_TYPER_COMPLETE_ARGS": "slurmk8s ren", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}),
])
def test_the_completion_protocol_answers_each_shell(shell, env) -> None:
    """What the printed script asks the command for, under the variable it names."""
    script = run("--show-completion", shell, as_script=True)
    assert f"_SLURMK8S_COMPLETE=complete_{shell}" in script.stdout
    words = run(env_extra={"_SLURMK8S_COMPLETE": f"complete_{shell}", **env}, as_script=True)
    assert words.returncode == 0 and "render" in words.stdout, words.stderr


def test_init_dash_prints_the_starter(tmp_path: Path) -> None:
    result = run("init", "-", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, STARTER, "")
    assert list(tmp_path.iterdir()) == []  # no file named '-'


@pytest.mark.parametrize("target, expected", [
    ("no/such/dir/p.yaml", "no/such/dir/p.yaml: directory no/such/dir does not exist (create it first)"),
    ("adir", "adir: is a directory; give the profile's file name, e.g. adir/profile.yaml"),
    ("dangling", "dangling: already exists (use --force to overwrite)"),
], ids=["missing-directory", "a-directory", "dangling-symlink"])
def test_init_failures_are_one_line(tmp_path: Path, target: str, expected: str) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    result = run("init", target, *(["--force"] if target == "adir" else []), cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", expected + "\n")
    assert not (tmp_path / "nowhere").exists()  # the link's target was never written


def test_init_force_replaces_a_symlink_not_its_target(tmp_path: Path) -> None:
    target = tmp_path / "precious.yaml"
    target.write_text("mine\n")
    (tmp_path / "p.yaml").symlink_to(target)
    result = run("init", "p.yaml", "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == "mine\n" and not (tmp_path / "p.yaml").is_symlink()
    assert (tmp_path / "p.yaml").read_text() == STARTER


def test_render_and_validate_read_a_profile_from_stdin() -> None:
    text = KIND_DEV.read_text()
    rendered = run("render", "-", "-o", "-", stdin=text)
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout == run("render", str(KIND_DEV), "-o", "-").stdout
    assert [d["kind"] for d in yaml.safe_load_all(rendered.stdout)][0] == "Namespace"
    bad = run("validate", "-", stdin=text.replace("cpus: 1", "cpus: one"))
    assert (bad.returncode, bad.stderr) == (2, "<stdin>:23:13: spec.pools[0].cpus: expected an integer, found 'one'\n")
