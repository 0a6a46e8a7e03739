"""The shipped JSON Schema: valid draft 2020-12, closed, described, and defaulted from defaults.py."""

from __future__ import annotations

from typing import Any, Iterator

import jsonschema
import pytest

from slurmk8s.profile.defaults import DEFAULTS
from slurmk8s.profile.schema import profile_schema

SCHEMA = profile_schema()


def walk(node: Any, where: str = "#") -> Iterator[tuple[str, dict]]:
    """Every subschema of the schema with a JSON-pointer-like location."""
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    yield from walk(sub, f"{where}/{key}/{name}")
            elif isinstance(value, (dict, list)) and key not in ("enum", "const", "default", "required", "examples"):
                yield from walk(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from walk(item, f"{where}/{i}")


def resolve(node: dict) -> dict:
    """Follow a local $ref (siblings of the $ref override the target, as in 2020-12)."""
    if "$ref" in node:
        target = SCHEMA
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return {**resolve(target), **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def schema_defaults(node: dict, path: str = "", refs: frozenset = frozenset()) -> Iterator[tuple[str, Any]]:
    """(DEFAULTS-style path, default) for every `default` reachable from the root properties."""
    if node.get("$ref") in refs:  # a recursive definition (topology domains): its defaults were seen once
        return
    refs = refs | {node["$ref"]} if "$ref" in node else refs
    node = resolve(node)
    if "default" in node and path:
        yield path, node["default"]
    for name, sub in node.get("properties", {}).items():
        yield from schema_defaults(sub, f"{path}.{name}" if path else name, refs)
    if isinstance(node.get("items"), dict):
        yield from schema_defaults(node["items"], f"{path}[]", refs)


def test_schema_is_valid_draft_2020_12() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_meta_validation_can_fail() -> None:
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema({"type": "object", "properties": {"x": {"type": "int"}}})


def test_every_object_with_properties_is_closed() -> None:
    open_ = [where for where, node in walk(SCHEMA)
             if "properties" in node and node.get("additionalProperties") is not False]
    assert open_ == []


def test_every_property_has_a_description() -> None:
    missing = [f"{where}/properties/{name}" for where, node in walk(SCHEMA)
               for name, sub in node.get("properties", {}).items()
               if "description" not in sub]
    assert missing == []


def test_every_example_is_valid_where_it_stands() -> None:
    examples = [(where, node, example) for where, node in walk(SCHEMA) for example in node.get("examples", [])]
    assert examples  # or this proves nothing
    for where, node, example in examples:
        errors = list(jsonschema.Draft202012Validator({**node, "$defs": SCHEMA["$defs"]}).iter_errors(example))
        assert errors == [], where


def test_schema_defaults_equal_defaults_module() -> None:
    found = dict(schema_defaults(SCHEMA))
    assert found == DEFAULTS


def test_every_default_is_reachable() -> None:
    """The walk above must see nested and list defaults, or the equality test proves little."""
    found = dict(schema_defaults(SCHEMA))
    assert "spec.pools[].rdma.hugepages.size" in found
    assert "spec.controller.storage.size" in found
