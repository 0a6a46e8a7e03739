"""yamlout writes what reviewers read: key order as built, literal blocks, no aliases, text that loads back."""

from __future__ import annotations

import yaml

from slurmk8s.output.yamlout import dump, dump_all


def test_key_order_as_built_and_multi_line_text_as_a_literal_block() -> None:
    assert dump({"z": 1, "a": "two\nlines\n"}) == "z: 1\na: |\n  two\n  lines\n"


def test_a_shared_mapping_prints_twice_without_aliases() -> None:
    shared = {"name": "x"}
    text = dump({"a": shared, "b": shared})
    assert "&" not in text and "*" not in text and text.count("name: x") == 2


def test_strings_that_read_as_other_types_stay_strings() -> None:
    doc = {"v": ["yes", "null", "1", "0o17", "1e3", "- a", "a: b", "#x", "é", "22.05", ""]}
    assert yaml.safe_load(dump(doc)) == doc


def test_dump_all_starts_each_document() -> None:
    assert dump_all([{"a": 1}, {"b": 2}]) == "---\na: 1\n---\nb: 2\n"
