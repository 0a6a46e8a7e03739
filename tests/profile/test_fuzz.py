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


# ---------------------------------------------------------------- the seeded campaign (issue 16)
#
# 10,000 profiles from one seed, fast enough for every CI run: mutations of the examples (most one
# edit away from valid, so many pass and go on to render), random documents and corrupted bytes.
# Every case must load to a Profile or a located ProfileError within CASE_BOUND_S; every valid one
# renders, builds one of the four output trees (rotating) whose paths all stay inside it, and every
# 25th valid one is written to disk and must touch nothing outside its output directory. The bound is
# per case (a hang fails at once); the whole run is timed by the print, not asserted (a busy machine is slow).

import os
import random
import signal
import time

from slurmk8s.actions.render import FORMATS, build_tree
from slurmk8s.output.plain import write_tree

SEED = 20260516
CAMPAIGN_SIZE = 10_000
CASE_BOUND_S = 10.0
WRITE_EVERY = 25

HOSTILE_STRINGS = [
    "", " ", "a" * 70, "x" * 5000, "../../etc/passwd", "/abs/path", "a\nb", "a\rb", "a\x00b", "\u2028", "ünïcödé",
    "2Gi", "2G", "2048M", "1.5Gi", "1e999999999", "99999999999999999999Ti", "-1Gi", "0", "0-100000000", "5-2",
    "12:00:00", "UNLIMITED", "bad key", "example.com/gpu", "GPU", "gpu", "cpu", "main", "default", "root", "normal",
    "10.0.0.0/8", "999.999.999.999/99", "__helm_value_0__", "{{ .Values.x }}", "${HOME}", "$(id)", "`id`",
    "'", '"', "\\", "*", "&anchor", "!!python/object", "26.05", "22.05", "munge", "slurm", "NoExecute", "Exists",
]
HOSTILE_NUMBERS = [-1, 0, 1, 2, 3, 4, 63, 64, 4096, 4097, 65536, 10**8, 2**63, -(2**63) - 1, 10**400]


def _random_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(HOSTILE_STRINGS)
    if roll < 0.6:
        return rng.choice(HOSTILE_NUMBERS)
    if roll < 0.7:
        return rng.choice([None, True, False, 1.5, float("inf")])
    if depth < 3 and roll < 0.85:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3:
        return {rng.choice(KEYS + HOSTILE_STRINGS[:12]): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return rng.choice(HOSTILE_STRINGS)


def _nudge(rng: random.Random, value):
    """A value close to a valid one: a neighbouring number, another valid-looking name, a toggled flag."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return max(0, value + rng.choice([-2, -1, 1, 2, 10]))
    if isinstance(value, str):
        return rng.choice([value + "x", value.upper(), value[:-1] or "a", "cpu", "gpu", "2Gi", "4G", "1-00:00:00"])
    return value


def campaign_case(rng: random.Random, n: int) -> bytes:
    kind = n % 10
    if kind == 9:
        return yaml.safe_dump(_random_value(rng)).encode()
    source = EXAMPLES[rng.choice(sorted(EXAMPLES))]
    if kind == 8:
        data = bytearray(source)
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, len(data))
            data[at:at + rng.randint(0, 3)] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        return bytes(data)
    doc = yaml.safe_load(source)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths(doc)[1:])
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        action = rng.random()
        if kind < 5:  # one nudge: often still valid, so render and the writers get exercised
            parent[path[-1]] = _nudge(rng, parent[path[-1]])
        elif action < 0.3:
            del parent[path[-1]]
        elif action < 0.45 and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = _random_value(rng)
        if not doc:
            break
    return yaml.safe_dump(doc, sort_keys=False).encode()


class CaseTimeout(Exception):
    """A case ran past CASE_BOUND_S."""


def _alarm(signum, frame):
    raise CaseTimeout()


def _snapshot(root: Path) -> dict[str, tuple[int, float]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return out


def test_seeded_campaign_of_ten_thousand_profiles(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    sandbox = tmp_path / "sandbox"
    (sandbox / "bystander").mkdir(parents=True)
    (sandbox / "bystander" / "keep.txt").write_text("not the renderer's\n")
    started = time.monotonic()
    slowest, valid, written = 0.0, 0, 0
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for n in range(CAMPAIGN_SIZE):
            data = campaign_case(rng, n)
            case_started = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, CASE_BOUND_S)
            try:
                try:
                    profile = load_profile(data, "fuzz.yaml")
                except ProfileError as e:
                    assert e.errors and all(line.startswith("fuzz.yaml:") for line in str(e).splitlines()), (n, str(e))
                    continue
                valid += 1
                fmt = FORMATS[valid % len(FORMATS)]
                try:
                    bundle = render(profile)
                except ProfileError as e:  # a name collision found while rendering: located too
                    assert e.errors, n
                    continue
                tree = build_tree(bundle, fmt, repo_url="https://git.example/r.git", revision="main",
                                  repo_path="clusters/fuzz")
                for rel in tree:
                    parts = rel.split("/")
                    assert rel and not rel.startswith("/") and ".." not in parts and "" not in parts, (n, rel)
                if valid % WRITE_EVERY == 0:
                    out = sandbox / "out"
                    before = {k: v for k, v in _snapshot(sandbox).items() if not k.startswith("out")}
                    write_tree(tree, out, note=lambda line: None)
                    after = {k: v for k, v in _snapshot(sandbox).items() if not k.startswith("out")}
                    assert after == before, (n, "a render touched a file outside its output directory")
                    written += 1
            except CaseTimeout:
                pytest.fail(f"case {n} (seed {SEED}) ran past {CASE_BOUND_S} s:\n{data[:500]!r}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                slowest = max(slowest, time.monotonic() - case_started)
    finally:
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.monotonic() - started
    print(f"\nfuzz campaign: {CAMPAIGN_SIZE} profiles (seed {SEED}), {valid} valid, {written} written to disk, "
          f"slowest case {slowest * 1000:.0f} ms, {elapsed:.1f} s in all")
    assert valid >= CAMPAIGN_SIZE // 10, "too few valid profiles: the campaign would not exercise render"
    assert written >= 20
    assert (sandbox / "bystander" / "keep.txt").read_text() == "not the renderer's\n"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(mutated_examples(), corrupted_bytes()))
def test_cli_render_exits_0_or_2_and_writes_only_its_directory(data: bytes, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil_rmtree(work)
    work.mkdir()
    (work / "p.yaml").write_bytes(data)
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "render", "p.yaml", "-o", "out", "--format", "helm"],
                         capture_output=True, text=True, timeout=60, cwd=work)
    assert run.returncode in (0, 2), run.stderr
    assert "Traceback" not in run.stderr
    assert sorted(p.name for p in work.iterdir()) == (["out", "p.yaml"] if run.returncode == 0 else ["p.yaml"])


def shutil_rmtree(path: Path) -> None:
    import shutil
    if path.exists():
        shutil.rmtree(path)
