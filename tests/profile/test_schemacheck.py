"""The compiled schema check (profile.schemacheck) says "valid" exactly when jsonschema finds nothing.

It lets a valid profile skip jsonschema; a wrong "valid" would let a bad profile through, a wrong
"not sure" only costs time. Both are checked: on every example profile, and on the fuzz campaign's
mutated documents (valid and invalid ones).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from slurmk8s.profile import schema
from slurmk8s.profile.schemacheck import _compiled, surely_valid
from slurmk8s.profile.yamlpos import parse
from tests.profile.test_fuzz import SEED, campaign_case

ROOT = Path(__file__).resolve().parents[2]
CASES = 3000


def jsonschema_valid(document) -> bool:
    return next(schema._validator().iter_errors(document), None) is None


def test_the_shipped_schema_compiles() -> None:
    """A keyword the compiler does not know would silently send every profile to jsonschema."""
    assert _compiled(schema.profile_schema()) is not None


@pytest.mark.parametrize("path", sorted((ROOT / "profiles").glob("*.yaml")), ids=lambda p: p.name)
def test_example_profiles_take_the_fast_path(path: Path) -> None:
    document, _, errors = parse(path.read_text())
    assert not errors
    assert jsonschema_valid(document)
    assert surely_valid(document, schema.profile_schema())


def test_agrees_with_jsonschema_on_the_fuzz_campaign() -> None:
    rng = random.Random(SEED)
    fast = slow = 0
    for n in range(CASES):
        document, _, errors = parse(campaign_case(rng, n).decode("utf-8", "replace"))
        if errors or not isinstance(document, dict):
            continue
        quick, exact = surely_valid(document, schema.profile_schema()), jsonschema_valid(document)
        assert not quick or exact, (n, "the compiled check passed a document jsonschema refuses")
        fast += quick
        slow += exact
    # Every document jsonschema accepts is recognised without it (none fall back to it).
    assert fast == slow and fast > CASES // 20, (fast, slow)


def test_a_refused_profile_still_gets_jsonschema_messages() -> None:
    document, positions, _ = parse((ROOT / "profiles" / "kind-dev.yaml").read_text())
    document["spec"]["pools"][0]["replicas"] = 2.0
    assert not surely_valid(document, schema.profile_schema())
    assert [e.message for e in schema.validate_schema(document, positions)] == ["expected an integer, found 2.0"]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 0, 2**70, 1.0, True, None, "", "x", [], {}, [1]],
                         ids=repr)
@pytest.mark.parametrize("field", ["replicas", "maxReplicas", "cpus", "memory", "name", "features"])
def test_edge_values_of_pool_fields(field: str, value) -> None:
    """NaN passes a minimum in jsonschema, booleans are no integers, and so on: never a wrong "valid"."""
    document, _, _ = parse((ROOT / "profiles" / "kind-dev.yaml").read_text())
    document["spec"]["pools"][0][field] = value
    quick, exact = surely_valid(document, schema.profile_schema()), jsonschema_valid(document)
    assert quick == exact, (quick, exact)
