"""The profile's JSON Schema (draft 2020-12), shipped in the package."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema

from slurmk8s.errors import FieldError
from slurmk8s.profile.kubevalues import FORMATS
from slurmk8s.quantity import PATTERN as QUANTITY_PATTERN
from slurmk8s.profile.yamlpos import Positions, format_path

@lru_cache(maxsize=1)
def profile_schema() -> dict[str, Any]:
    """The ClusterProfile JSON Schema as a dict."""
    return json.loads(resources.files("slurmk8s.profile").joinpath("schema.json").read_text("utf-8"))


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict) -> Any:
    """`pattern` with ECMA-262 semantics: Python's `$` would also accept a trailing newline."""
    if not validator.is_type(instance, "string"):
        return
    if not re.search(pattern, instance) or (pattern.endswith("$") and instance.endswith("\n")):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _is_integer(checker: Any, instance: Any) -> bool:
    """Integers only: JSON Schema's `integer` admits 2.0, which would render as `replicas: 2.0`."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _format_checker() -> jsonschema.FormatChecker:
    """The formats of Kubernetes-side values, checked by the API server's rules (profile.kubevalues)."""
    checker = jsonschema.FormatChecker(formats=())
    for name, problem in FORMATS.items():
        checker.checks(name, raises=ValueError)(_raising(problem))
    return checker


def _raising(problem: Any) -> Any:
    """A format check: True, or ValueError(the rule's message), which _word reports as is."""
    def check(instance: Any) -> bool:
        if isinstance(instance, str) or (isinstance(instance, int) and not isinstance(instance, bool)):
            message = problem(instance)
            if message:
                raise ValueError(message)
        return True
    return check


def _build_validator() -> jsonschema.protocols.Validator:
    """The validator of the draft the schema names, with ECMA `pattern` and integers that exclude 2.0."""
    schema = profile_schema()
    base = jsonschema.validators.validator_for(schema)
    cls = jsonschema.validators.extend(
        base, validators={"pattern": _pattern},
        type_checker=base.TYPE_CHECKER.redefine("integer", _is_integer))
    return cls(schema, format_checker=_format_checker())


# Built once per process. The shipped schema is held to its meta-schema by tests/profile/test_schema.py,
# not at each start: check_schema takes about 0.1 s, as long as the rest of a render.
VALIDATOR = _build_validator()


@dataclass(frozen=True)
class SchemaFinding:
    """One schema violation: where it is (path), and for a missing field, which one (missing)."""

    path: tuple
    error: FieldError
    missing: str | None = None
    missing_schema: dict | None = None
    unknown: bool = False  # an unknown field: dropping it changes nothing the checks read


def validate_schema(document: Any, positions: Positions) -> list[FieldError]:
    """Every schema violation of a parsed profile, located and worded for people."""
    return [f.error for f in schema_findings(document, positions)]


def is_schema_valid(document: Any) -> bool:
    """True when the document has no schema violation at all."""
    try:
        return next(VALIDATOR.iter_errors(document), None) is None
    except RecursionError:
        return False


def schema_findings(document: Any, positions: Positions) -> list[SchemaFinding]:
    """validate_schema's problems with their raw paths (profile.repair works on those)."""
    found: dict[tuple, list[tuple[jsonschema.ValidationError, SchemaFinding]]] = {}

    def add(err: jsonschema.ValidationError, path: tuple, message: str, key: bool, missing: str | None = None,
            unknown: bool = False) -> None:
        sub = _resolve(_properties(err).get(missing, {})) if missing else None
        finding = SchemaFinding(path, FieldError(*positions.of(path, key=key), format_path(path), message), missing,
                                sub, unknown)
        found.setdefault(path, []).append((err, finding))

    try:
        found_errors = list(VALIDATOR.iter_errors(document))
    except RecursionError:  # yamlpos bounds nesting; this keeps a deeper document from a traceback
        return [SchemaFinding((), FieldError(*positions.of(()), "", "nested too deeply to check"))]
    for err in found_errors:
        path = tuple(err.absolute_path)
        value: Any = err.validator_value  # its type follows the keyword (err.validator)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = sorted(_properties(err))
            hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
            for extra in sorted(k for k in err.instance if k not in _properties(err)):
                add(err, path + (extra,), f"unknown field{hint}", True, unknown=True)
        elif err.validator == "required" and isinstance(err.instance, dict):
            # jsonschema yields one error per missing key; each carries the whole list.
            for missing in value:
                if missing not in err.instance:
                    add(err, path, f"missing required field '{missing}'", False, missing)
        elif "propertyNames" in err.schema_path:
            if err.validator == "format" and err.cause is not None:
                words = str(err.cause)
            elif err.validator == "pattern":
                words = f"expected {_pattern_words(value)} as a key, found {err.instance!r}"
            elif err.validator == "maxLength":  # a label key over 317 characters, say (found by the fuzz campaign)
                words = f"key {describe_value(err.instance)} is longer than {value} characters"
            else:
                words = f"key {describe_value(err.instance)}: {err.message}"
            add(err, path + (err.instance,), words, True)
        else:
            add(err, path, _word(err), False)
    findings = []
    for items in found.values():
        # A value of the wrong type also fails its enum/pattern: report only the type. A value
        # far too long for its pattern is reported by its length alone.
        typed = [f for e, f in items if e.validator == "type"]
        too_long = [f for e, f in items if e.validator == "maxLength"]
        findings += typed or too_long or [f for _, f in items]
    return findings


def _properties(err: jsonschema.ValidationError) -> Mapping[str, Any]:
    """The `properties` of the failing subschema (every subschema of the profile schema is a mapping)."""
    return err.schema.get("properties", {}) if isinstance(err.schema, Mapping) else {}


def _resolve(sub: dict) -> dict:
    """A property's schema with its local $ref followed (one level: the schema's $defs)."""
    ref = sub.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return {**profile_schema()["$defs"][ref.rsplit("/", 1)[1]], **{k: v for k, v in sub.items() if k != "$ref"}}
    return sub


_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "boolean": "true or false", "number": "a number"}

# What each schema pattern means, so messages don't show regular expressions.
_PATTERNS = {
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "a DNS-1123 label (lowercase letters, digits and '-', "
                                       "starting and ending with a letter or digit)",
    "^[a-z]([-a-z0-9]*[a-z0-9])?$": "a DNS-1035 label (lowercase letters, digits and '-', "
                                    "starting with a letter and ending with a letter or digit)",
    QUANTITY_PATTERN: "a Kubernetes quantity such as 512Mi, 16Gi, 2G or 2147483648 (bytes)",
    "^(UNLIMITED|INFINITE|([0-9]+-)?[0-9]{1,2}:[0-9]{2}:[0-9]{2}|[0-9]+)$":
        "UNLIMITED, minutes, or [days-]hours:minutes:seconds such as 2-00:00:00",
    "^[0-9]{4,5}-[0-9]{4,5}$": "a port range LOW-HIGH such as 60001-63000",
    "^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$": "a CPU list such as 0-3,8-11 (CPU ids below 10000)",
    "^(([0-9]+-)?[0-9]{1,2}(:[0-9]{2}){0,2}|[0-9]+)$":
        "minutes, or days-hours[:minutes[:seconds]] or hours:minutes:seconds such as 7-0 or 2:00:00",
    "^[a-z_][a-z0-9_-]*$": "a Unix login name (lowercase letters, digits, '_' and '-')",
    "^[a-z0-9][a-zA-Z0-9./_:@-]*$": "an image reference such as registry.example.org/slurmd:24.11",
    "^[a-z0-9][a-z0-9_-]*$": "a name of lowercase letters, digits, '_' and '-'",
    "^[a-z0-9][a-z0-9_.-]*$": "a name of lowercase letters, digits, '_', '.' and '-'",
    "^[a-z0-9.-]+/[a-zA-Z0-9._-]+$": "an extended resource name such as nvidia.com/gpu",
    "^[A-Za-z0-9_.-]+$": "a word of letters, digits, '_', '.' and '-'",
    "^[A-Za-z][A-Za-z0-9]*$": "a key of letters and digits",
    "^[0-9a-fA-F:.]+/[0-9]{1,3}$": "a CIDR such as 10.0.0.0/8",
    "^[-._a-zA-Z0-9]+$": "a Secret key of letters, digits, '-', '_' and '.'",
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$":
        "a DNS-1123 subdomain (lowercase letters, digits, '-' and '.') such as fast-ssd",
    "^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$": "a host name or an IP address such as db.example.org",
    "^[A-Za-z0-9_][A-Za-z0-9_.-]*$": "a name of letters, digits, '_', '.' and '-'",
    "^[A-Za-z0-9_]+$": "a name of letters, digits and '_'",
    "^[a-z0-9][a-z0-9._:/-]*$": "a registry and path such as registry.example.org/slurm",
}


def _pattern_words(pattern: str) -> str:
    if pattern in _PATTERNS:
        return _PATTERNS[pattern]
    if pattern.startswith("^(ssh-"):
        return "an OpenSSH public key line (type, base64 key, optional comment)"
    return f"the format {pattern}"


def describe_value(value: Any) -> str:
    """A value as messages quote it: 'a mapping', 'a list', 'nothing (null)', or its repr (shortened)."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, (str, int, float)):
        return _short(value)
    return f"{value} ({type(value).__name__})"


def _short(value: Any, limit: int = 60) -> str:
    """repr of a value, cut to about limit characters so one problem stays one readable line."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else f"a {len(str(value))}-digit number"
    return text if len(text) <= limit else f"{text[:limit]}...({len(value) if isinstance(value, str) else len(text)} characters)"


def _word(err: jsonschema.ValidationError) -> str:
    """A message for one schema error (path and position are added by the caller)."""
    v = err.validator
    inst: Any = err.instance
    value: Any = err.validator_value  # its type follows the keyword (v)
    if v == "type":
        wanted = value if isinstance(value, list) else [value]
        want = " or ".join(_TYPE_WORDS.get(w) or str(w) for w in wanted)
        msg = f"expected {want}, found {describe_value(inst)}"
        if isinstance(inst, float) and "string" in wanted:
            msg += " (quote it: YAML reads 22.05 as a number)"
        return msg
    if v == "enum":
        return f"{describe_value(inst)} is not one of: {', '.join(str(o) for o in value)}"
    if v == "const":
        return f"expected {value!r}, found {describe_value(inst)}"
    if v == "pattern":
        return f"expected {_pattern_words(value)}, found {_short(inst)}"
    if v == "format" and err.cause is not None:
        return str(err.cause)
    if v == "maxProperties" and set(_properties(err)) == {"embedded", "external"}:
        return "choose one of 'embedded' or 'external', not both"
    if v == "minItems":
        return f"expected at least {value} item(s), found {len(inst)}"
    if v == "maxItems":
        return f"expected at most {value} item(s), found {len(inst)}"
    if v == "maxLength":
        return f"{_short(inst)} is {len(inst)} characters long; the maximum is {value}"
    if v == "minLength":
        return "must not be empty" if value == 1 else \
            f"{_short(inst)} is shorter than {value} characters"
    if v in ("maximum", "minimum"):
        return f"{_short(inst)} is {'greater' if v == 'maximum' else 'less'} than the {v} of {value}"
    return err.message
