"""The plain output and the YAML writer: stable names, apply order, no key material, no YAML aliases."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slurmk8s.actions.render import render_file
from slurmk8s.errors import UsageError
from slurmk8s.output.plain import MARKER, plain_tree, write_tree
from slurmk8s.output.yamlout import dump, dump_all


def test_plain_tree_lists_secrets_without_material(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    tree = plain_tree(bundle)
    assert list(tree) == sorted(tree)
    notice = tree["SECRETS.txt"]
    assert [line.split("\t")[0] for line in notice.splitlines() if not line.startswith("#")] == [s.name for s in bundle.secrets]
    assert all(o["kind"] != "Secret" for o in bundle.objects)


@pytest.mark.parametrize("value, text", [
    ({"a": "x\ny\n"}, "a: |\n  x\n  y\n"),
    ({"a": "0755"}, "a: '0755'\n"),
    ({"b": 1, "a": 2}, "b: 1\na: 2\n"),
    ({"yes": "yes", "n": None}, "'yes': 'yes'\nn: null\n"),
], ids=["literal-block", "octal-looking-string-quoted", "key-order-kept", "yaml11-booleans-quoted"])
def test_dump(value: dict, text: str) -> None:
    assert dump(value) == text
    assert yaml.safe_load(text) == value


def test_shared_nodes_are_written_out_not_aliased() -> None:
    shared = [{"name": "x"}]
    assert dump({"a": shared, "b": shared}) == "a:\n- name: x\nb:\n- name: x\n"
    assert dump_all([{"a": 1}, {"b": 2}]) == "---\na: 1\n---\nb: 2\n"


def test_write_tree_replaces_its_own_files_and_prunes_empty_dirs(tmp_path: Path) -> None:
    write_tree({"a/x.yaml": "1\n", "b/y.yaml": "2\n"}, tmp_path)
    write_tree({"a/x.yaml": "3\n"}, tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == sorted(["a", "a/x.yaml", MARKER])
    assert (tmp_path / "a/x.yaml").read_text() == "3\n"


def test_write_tree_refuses_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("x")
    with pytest.raises(UsageError, match="not written by slurmk8s render"):
        write_tree({"a.yaml": "1\n"}, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
