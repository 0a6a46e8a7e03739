"""The profile's JSON Schema (draft 2020-12), shipped in the package."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema

from slurmk8s.errors import FieldError
from slurmk8s.profile.yamlpos import Positions, format_path


@lru_cache(maxsize=1)
def profile_schema() -> dict[str, Any]:
    """The ClusterProfile JSON Schema as a dict."""
    return json.loads(resources.files("slurmk8s.profile").joinpath("schema.json").read_text("utf-8"))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(profile_schema())


def validate_schema(document: Any, positions: Positions) -> list[FieldError]:
    """Every schema violation of a parsed profile, located and worded for people."""
    errors = []
    for err in _validator().iter_errors(document):
        path = tuple(err.absolute_path)
        message, at_key = _word(err)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = sorted(err.schema.get("properties", {}))
            for extra in sorted(k for k in err.instance if k not in err.schema.get("properties", {})):
                line, col = positions.of(path + (extra,), key=True)
                hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
                errors.append(FieldError(line, col, format_path(path + (extra,)), f"unknown field{hint}"))
            continue
        line, col = positions.of(path, key=at_key)
        errors.append(FieldError(line, col, format_path(path), message))
    return errors


_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "boolean": "true or false", "number": "a number"}


def _found(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return f"{value!r}"


def _word(err: jsonschema.ValidationError) -> tuple[str, bool]:
    """(message, whether to point at the key rather than the value)."""
    v, inst = err.validator, err.instance
    if v == "type":
        wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        want = " or ".join(_TYPE_WORDS.get(w, w) for w in wanted)
        msg = f"expected {want}, found {_found(inst)}"
        if isinstance(inst, float) and "string" in wanted:
            msg += " (quote it: YAML reads 22.05 as a number)"
        return msg, False
    if v == "required":
        missing = [k for k in err.validator_value if isinstance(inst, dict) and k not in inst]
        return f"missing required field '{missing[0] if missing else err.validator_value}'", False
    if v == "enum":
        options = ", ".join(str(o) for o in err.validator_value)
        hint = " (quote it: YAML reads 22.05 as a number)" if isinstance(inst, float) else ""
        return f"{inst!r} is not one of: {options}{hint}", False
    if v == "const":
        return f"expected {err.validator_value!r}, found {_found(inst)}", False
    if v == "pattern":
        return f"{inst!r} does not match the expected format {err.validator_value}", False
    if v == "maxProperties" and set(err.schema.get("properties", {})) == {"embedded", "external"}:
        return "choose one of 'embedded' or 'external', not both", False
    if v == "minItems":
        return f"expected at least {err.validator_value} item(s), found {len(inst)}", False
    if v in ("minimum", "maximum", "minLength", "maxLength"):
        return err.message, False
    return err.message, False
