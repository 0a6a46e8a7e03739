"""Editors validate profiles (issue 16): `slurmk8s schema` prints the JSON Schema, `init` writes a
yaml-language-server modeline and the schema it names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

from inprocess import run_cli
from slurmk8s.profile.schema import profile_schema

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """slurmk8s ARGS through cli.main in this process (what it imports is checked in a process below)."""
    return run_cli(args, cwd=cwd, timeout=60)


def test_schema_prints_the_profile_schema() -> None:
    result = run("schema")
    assert result.returncode == 0 and result.stderr == ""
    assert json.loads(result.stdout) == profile_schema()
    jsonschema.Draft202012Validator.check_schema(json.loads(result.stdout))


def test_schema_does_not_load_the_kubernetes_client() -> None:
    code = ("import sys; sys.argv = ['slurmk8s', 'schema']\nimport slurmk8s.cli\ntry:\n    slurmk8s.cli.main()\n"
            "except SystemExit as e:\n    assert not e.code\nassert 'kubernetes' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_init_writes_the_modeline_and_the_schema_it_names(tmp_path: Path) -> None:
    result = run("init", "cluster.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    profile = (tmp_path / "cluster.yaml").read_text()
    first = profile.splitlines()[0]
    assert first == "# yaml-language-server: $schema=slurmk8s.schema.json"
    # what an editor does: resolve the path next to the profile, validate the document against it
    schema = json.loads((tmp_path / first.split("$schema=", 1)[1]).read_text())
    assert schema == profile_schema()
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(profile))
    broken = yaml.safe_load(profile)
    broken["spec"]["pools"][0]["cpus"] = "two"
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(broken))  # and the editor would flag this


def test_init_leaves_someone_elses_file_of_that_name_alone(tmp_path: Path) -> None:
    (tmp_path / "slurmk8s.schema.json").write_text('{"title": "mine"}\n')
    result = run("init", "p.yaml", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "wrote p.yaml\n", result.stderr
    assert (tmp_path / "slurmk8s.schema.json").read_text() == '{"title": "mine"}\n'


def test_init_refreshes_an_older_slurmk8s_schema(tmp_path: Path) -> None:
    stale = {**profile_schema(), "description": "an older release"}
    (tmp_path / "slurmk8s.schema.json").write_text(json.dumps(stale))
    assert run("init", "p.yaml", cwd=tmp_path).returncode == 0
    assert json.loads((tmp_path / "slurmk8s.schema.json").read_text()) == profile_schema()
