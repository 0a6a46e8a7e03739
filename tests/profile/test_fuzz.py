"""Fuzz `validate`: any document gives a Profile or a ProfileError (exit 2), never a traceback."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from slurmk8s.errors import ProfileError
from slurmk8s.profile import Profile, load_profile
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {p.name: p.read_bytes() for p in sorted((ROOT / "profiles").glob("*.yaml"))}
KEYS = ["apiVersion", "kind", "metadata", "name", "spec", "pools", "partitions", "replicas", "minReplicas",
        "maxReplicas", "cpus", "memory", "gpus", "count", "rdma", "hugepages", "slurm", "version", "auth",
        "config", "default", "accounting", "database", "embedded", "external", "x", ""]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**20), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["22.05", "26.05", "2Gi", "0Mi", "munge", "slurm", "cpu", "gpu", "-1"]),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), children, max_size=5)),
    max_leaves=25,
)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a nested document (keys and list indexes)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, prefix + (i,))
    return out


@st.composite
def mutated_examples(draw: st.DrawFn) -> bytes:
    """A real profile with a few keys deleted or values swapped for random ones."""
    doc = copy.deepcopy(yaml.safe_load(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))]))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(doc)[1:]))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        if draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(documents)
        if not doc:
            break
    return yaml.safe_dump(doc, sort_keys=False).encode()


@st.composite
def corrupted_bytes(draw: st.DrawFn) -> bytes:
    """A real profile's bytes with random bytes spliced in."""
    data = bytearray(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        data[at:at + draw(st.integers(0, 3))] = draw(st.binary(min_size=1, max_size=4))
    return bytes(data)


inputs = st.one_of(
    documents.map(lambda d: yaml.safe_dump(d).encode()),
    mutated_examples(),
    corrupted_bytes(),
    st.binary(max_size=64),
    st.text(alphabet="{}[]:-,&*!|>'\"#%@ \n\tab1", max_size=40).map(str.encode),
)


def check(data: bytes) -> None:
    """load_profile returns a Profile that renders, or raises a ProfileError with located lines."""
    try:
        profile = load_profile(data, "fuzz.yaml")
    except ProfileError as e:
        assert e.errors, "a ProfileError must carry at least one problem"
        for line in str(e).splitlines():
            assert line.startswith("fuzz.yaml:"), line
        return
    assert isinstance(profile, Profile)
    render(profile)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs)
def test_load_profile_never_raises_anything_else(data: bytes) -> None:
    check(data)


def test_unmutated_examples_pass_the_check() -> None:
    """The oracle accepts valid input (so the fuzz above tests the error path, not a broken check)."""
    for data in EXAMPLES.values():
        check(data)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(mutated_examples(), corrupted_bytes()))
def test_cli_validate_exits_0_or_2(data: bytes, tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_bytes(data)
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "validate", str(tmp_path / "p.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode in (0, 2), run.stderr
    assert "Traceback" not in run.stderr
    assert (run.returncode == 0) == (run.stderr == "")
