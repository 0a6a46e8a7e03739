"""A compiled yes/no check of the profile schema, so a valid profile never loads jsonschema.

The schema is turned once into nested closures, one per keyword, with the semantics of
profile.schema's validator (draft 2020-12, integers exclude 2.0 and booleans, ECMA `pattern`,
the Kubernetes formats). It answers only "valid": any problem, or anything it cannot decide
exactly (an unknown keyword or value type, a boolean among enum values), sends the caller to
jsonschema, which finds and words every error as before. Each keyword answers exactly as
jsonschema does (or raises Undecided), so `if`, `oneOf` and `not` over them stay exact too.
tests/profile/test_schemacheck.py holds the two to the same answer.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from slurmk8s.profile.kubevalues import FORMATS

Check = Callable[[Any], bool]


class Undecided(Exception):
    """The compiled check cannot answer exactly; jsonschema must."""


# Keywords that carry no constraint.
_ANNOTATIONS = {"description", "default", "title", "examples", "$schema", "$id", "$comment", "deprecated",
                "readOnly", "writeOnly"}
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_PLAIN = (dict, list, str, int, float, bool, type(None))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _all(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]

    def check(v: Any) -> bool:
        for c in checks:
            if not c(v):
                return False
        return True
    return check


def _scalar_in(allowed: list[Any]) -> Check:
    """enum/const over strings and (non-boolean) numbers; anything else is for jsonschema."""
    if not all(isinstance(a, str) or _is_number(a) for a in allowed):
        raise Undecided("enum of non-scalars")
    values = set(allowed)

    def check(v: Any) -> bool:
        if isinstance(v, str) or _is_number(v):
            return v in values
        if isinstance(v, (bool, dict, list)) or v is None:
            return False  # jsonschema's equal() never matches these to a string or a number
        raise Undecided(type(v).__name__)
    return check


class _Compiler:
    def __init__(self, root: dict) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, ref: str) -> Check:
        if not ref.startswith("#/$defs/"):
            raise Undecided(ref)
        if ref not in self.refs:
            # A placeholder first, so a recursive definition refers to itself once compiled.
            cell: list[Check] = []
            self.refs[ref] = lambda v: cell[0](v)
            cell.append(self.compile(self.root["$defs"][ref[len("#/$defs/"):]]))
        return self.refs[ref]

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return lambda v: True
        if schema is False:
            return lambda v: False
        if not isinstance(schema, dict):
            raise Undecided(repr(schema))
        checks: list[Check] = []
        for key, value in schema.items():
            if key in _ANNOTATIONS or key in ("$defs", "then", "else", "properties", "additionalProperties"):
                continue
            checks.append(self.keyword(key, value, schema))
        if "properties" in schema or "additionalProperties" in schema:
            checks.append(self.object_properties(schema.get("properties", {}), schema.get("additionalProperties", True)))
        return _all(checks) if checks else (lambda v: True)

    def object_properties(self, properties: dict, additional: Any) -> Check:
        compiled = {name: self.compile(sub) for name, sub in properties.items()}
        extra = None if additional is True else self.compile(additional)

        def check(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            for name, item in v.items():
                sub = compiled.get(name)
                if sub is not None:
                    if not sub(item):
                        return False
                elif extra is not None and not extra(item):
                    return False
            return True
        return check

    def keyword(self, key: str, value: Any, schema: dict) -> Check:  # noqa: C901 (one branch per keyword)
        if key == "type":
            tests = [_TYPES[t] for t in (value if isinstance(value, list) else [value])]

            def check_type(v: Any) -> bool:
                if not isinstance(v, _PLAIN):
                    raise Undecided(type(v).__name__)
                return any(t(v) for t in tests)
            return check_type
        if key == "$ref":
            return self.ref(value)
        if key == "required":
            return lambda v: not isinstance(v, dict) or all(name in v for name in value)
        if key == "items":
            sub = self.compile(value)
            return lambda v: not isinstance(v, list) or all(sub(item) for item in v)
        if key == "minItems":
            return lambda v: not isinstance(v, list) or len(v) >= value
        if key == "maxItems":
            return lambda v: not isinstance(v, list) or len(v) <= value
        if key == "minProperties":
            return lambda v: not isinstance(v, dict) or len(v) >= value
        if key == "maxProperties":
            return lambda v: not isinstance(v, dict) or len(v) <= value
        if key == "minLength":
            return lambda v: not isinstance(v, str) or len(v) >= value
        if key == "maxLength":
            return lambda v: not isinstance(v, str) or len(v) <= value
        if key == "minimum":
            return lambda v: not _is_number(v) or not v < value  # as jsonschema: NaN passes
        if key == "maximum":
            return lambda v: not _is_number(v) or not v > value
        if key == "pattern":
            # Compiled on first use: a profile touches few of the schema's patterns, and each costs a compile.
            dollar, compiled = value.endswith("$"), []

            def check_pattern(v: Any) -> bool:
                if not isinstance(v, str):
                    return True
                if not compiled:
                    compiled.append(re.compile(value).search)
                return compiled[0](v) is not None and not (dollar and v.endswith("\n"))
            return check_pattern
        if key == "format":
            problem = FORMATS.get(value)
            if problem is None:
                return lambda v: True  # profile.schema's checker knows only FORMATS

            def check_format(v: Any) -> bool:
                if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)):
                    return not problem(v)
                return True
            return check_format
        if key == "enum":
            return _scalar_in(value)
        if key == "const":
            return _scalar_in([value])
        if key == "uniqueItems":
            if not value:
                return lambda v: True

            def check_unique(v: Any) -> bool:
                if not isinstance(v, list):
                    return True
                # Strings and integers compare in a set as jsonschema's uniq() does; others it decides.
                if not all(isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool))
                           for item in v):
                    raise Undecided("uniqueItems over other values")
                return len(set(v)) == len(v)
            return check_unique
        if key == "propertyNames":
            sub = self.compile(value)
            return lambda v: not isinstance(v, dict) or all(sub(name) for name in v)
        if key == "oneOf":
            subs = [self.compile(s) for s in value]
            return lambda v: sum(1 for s in subs if s(v)) == 1
        if key == "anyOf":
            subs = [self.compile(s) for s in value]
            return lambda v: any(s(v) for s in subs)
        if key == "allOf":
            return _all([self.compile(s) for s in value])
        if key == "not":
            sub = self.compile(value)
            return lambda v: not sub(v)
        if key == "if":
            cond = self.compile(value)
            then = self.compile(schema.get("then", True))
            otherwise = self.compile(schema.get("else", True))
            return lambda v: then(v) if cond(v) else otherwise(v)
        raise Undecided(f"keyword {key}")


# id(schema) -> (schema, its check or None when it cannot be compiled); profile_schema() is one dict.
_CACHE: dict[int, tuple[dict, Check | None]] = {}


def _compiled(schema: dict) -> Check | None:
    cached = _CACHE.get(id(schema))
    if cached is None or cached[0] is not schema:
        try:
            check: Check | None = _Compiler(schema).compile(schema)
        except Undecided:
            check = None
        cached = _CACHE[id(schema)] = (schema, check)
    return cached[1]


def surely_valid(document: Any, schema: dict) -> bool:
    """True only when the document certainly has no schema violation; False means "ask jsonschema"."""
    check = _compiled(schema)
    if check is None:
        return False
    try:
        return check(document)
    except Exception:  # Undecided, RecursionError, a format rule that raises: jsonschema decides
        return False
