"""Fuzz `validate`: any document gives a Profile or a ProfileError (exit 2), never a traceback."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from inprocess import run_cli

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
    """load_profile returns a Profile that renders, or raises a ProfileError with located lines; render's own
    checks (names, the API server's rules), which `validate` runs too, refuse with a file position."""
    try:
        profile = load_profile(data, "fuzz.yaml")
    except ProfileError as e:
        assert e.errors, "a ProfileError must carry at least one problem"
        for line in str(e).splitlines():
            assert line.startswith("fuzz.yaml:"), line
        return
    assert isinstance(profile, Profile)
    try:
        render(profile)
    except ProfileError as e:
        assert e.errors and all(LOCATED.match(line) for line in str(e).splitlines()), str(e)


LOCATED = re.compile(r"fuzz\.yaml:[0-9]+:[0-9]+: ")


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
    run = run_cli(["validate", str(tmp_path / "p.yaml")], timeout=60)  # cli.main in this process
    assert run.returncode in (0, 2), run.stderr
    assert "Traceback" not in run.stderr
    assert (run.returncode == 0) == (run.stderr == "")


# ---------------------------------------------------------------- the seeded campaign (issues 16, 24)
#
# 10,000 profiles from one seed (the `slow` tier; the default tier runs its first SAMPLE_SIZE): mutations of
# the examples (most one edit away from valid, so many pass and go on to render), random documents and
# corrupted bytes. Every case must load to a Profile or a located ProfileError within CASE_BOUND_S. Every
# valid one renders, or render refuses it with a located line (as `validate` does, which renders too).
# Every bundle rendered passes the API server's checks as far as they run without one: each object the
# strict schema of the oldest Kubernetes minor we claim (custom resources their CRD's), and the API
# server's uniqueness rules (checked here independently of render/apirules.py). It builds one of the four
# output trees (rotating) whose paths all stay inside it, and every 25th is written to disk and must touch
# nothing outside its output directory. The bound is per case (a hang fails at once); the whole run is
# timed by the print, not asserted (a busy machine is slow).

import hashlib
import json
import os
import posixpath
import random
import signal
import time
from functools import lru_cache

import jsonschema
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

from crdschema import SCHEMA_FILES, validate_custom_resource
from kubevalidate import minor_serving
from slurmk8s.actions.render import FORMATS, build_tree
from slurmk8s.output.plain import write_tree

SEED = 20260516
CAMPAIGN_SIZE = 10_000
SAMPLE_SIZE = 400
CASE_BOUND_S = 10.0
WRITE_EVERY = 25
# The oldest minor of those we claim (tests/render/test_kube_schemas.py checks the examples against all of them).
KUBERNETES_VERSION = "1.29.0"


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


# Paths the generator mounts in login and pool pods itself, outside the paths check_volumes refuses: a volume
# nudged onto one gives a pod two mounts at one path (issue 24 item 11), and `..` walks out of a home.
GENERATOR_PATHS = ["/mnt/login-config", "/mnt/ssh-host-keys", "/mnt/identity", "/mnt/identity-files/",
                   "/opt/slurmk8s/health", "/home/../etc/slurm/x", "/home/ada"]


def _nudge(rng: random.Random, value):
    """A value close to a valid one: a neighbouring number, another valid-looking name or path, a toggled flag."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return max(0, value + rng.choice([-2, -1, 1, 2, 10]))
    if isinstance(value, str) and value.startswith("/") and rng.random() < 0.5:
        return rng.choice(GENERATOR_PATHS)
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


@lru_cache(maxsize=None)
def _kube_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """kubernetes-validate's strict schema of a kind at KUBERNETES_VERSION, compiled once (its validate()
    reads the 3 MB of definitions again at every call: 50 ms an object, hours for a campaign)."""
    version = minor_serving({"apiVersion": api_version, "kind": kind}, KUBERNETES_VERSION)
    tree = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # rbac.authorization.k8s.io/v1 -> rbac-v1
    schema = schema_contents(f"{tree}/{kind.lower()}-{group}.json", version)
    registry = Resource.from_contents(schema_contents(f"{tree}/_definitions.json", version)) @ (
        Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def strict_schema_errors(obj: dict) -> list[str]:
    """Every strict schema error of one object: its CRD's for a custom resource, else the Kubernetes minor's."""
    where = f"{obj['kind']}/{obj['metadata']['name']}"
    if (obj["apiVersion"], obj["kind"]) in SCHEMA_FILES:
        return validate_custom_resource(obj)
    return [f"{where}: /{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _kube_validator(obj["apiVersion"], obj["kind"]).iter_errors(obj)]


def _twice(values: list) -> list:
    return sorted({v for i, v in enumerate(values) if v in values[:i]}, key=str)


def uniqueness_errors(obj: dict) -> list[str]:
    """The API server's uniqueness rules for one object (k8s.io/kubernetes pkg/apis/core/validation):
    in a pod, volume names, container names across init and regular containers, and per container the
    mountPaths (cleaned), port names and env names (a duplicate env name only warns, and hides a value);
    every mount names a volume; in a Service, port names and (port, protocol)."""
    where = f"{obj['kind']}/{obj['metadata']['name']}"
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    out = []
    if obj["kind"] == "Service":
        ports = spec.get("ports") or []
        out += [f"{where}: port name {n!r} twice" for n in _twice([p.get("name") for p in ports])]
        out += [f"{where}: port {p} twice" for p in _twice([(p["port"], p.get("protocol", "TCP")) for p in ports])]
    pod = (spec.get("template") or {}).get("spec")
    if not pod:
        return out
    claims = [t["metadata"]["name"] for t in spec.get("volumeClaimTemplates") or []]
    volumes = [v["name"] for v in pod.get("volumes") or []] + claims
    containers = (pod.get("initContainers") or []) + pod["containers"]
    out += [f"{where}: volume {n!r} twice" for n in _twice(volumes)]
    out += [f"{where}: container {n!r} twice" for n in _twice([c["name"] for c in containers])]
    for c in containers:
        mounts = c.get("volumeMounts") or []
        out += [f"{where}/{c['name']}: mountPath {m} twice"
                for m in _twice([posixpath.normpath(m["mountPath"]) for m in mounts])]
        out += [f"{where}/{c['name']}: mount of no volume {m['name']!r}" for m in mounts if m["name"] not in volumes]
        out += [f"{where}/{c['name']}: env {n} twice" for n in _twice([e["name"] for e in c.get("env") or []])]
        out += [f"{where}/{c['name']}: port name {n!r} twice"
                for n in _twice([p["name"] for p in c.get("ports") or [] if p.get("name")])]
    return out


def bundle_errors(bundle, checked: set[bytes]) -> list[str]:
    """What the API server would refuse in a bundle; an object already checked (the same bytes in an
    earlier case: most are) is not checked again."""
    objects = list(bundle.objects + bundle.hooks)
    out = [f"{kind}/{name} twice" for kind, name in _twice([(o["kind"], o["metadata"]["name"]) for o in objects])]
    for obj in objects:
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).digest()
        if digest not in checked:
            out += strict_schema_errors(obj) + uniqueness_errors(obj)
            checked.add(digest)
    return out


def test_the_bundle_oracle_can_fail() -> None:
    """The campaign's oracle sees a duplicate mountPath (what N6a's profiles rendered) and a schema error."""
    bundle = render(load_profile(EXAMPLES["kind-dev.yaml"], "kind-dev.yaml"))
    login = next(o for o in bundle.objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "dev-login")
    pod = copy.deepcopy(login)
    pod["spec"]["template"]["spec"]["volumes"].append({"name": "vol-x", "emptyDir": {}})
    pod["spec"]["template"]["spec"]["initContainers"][0]["volumeMounts"].append(
        {"name": "vol-x", "mountPath": "/mnt/login-config/"})
    pod["spec"]["template"]["spec"]["containers"][0]["bogus"] = 1
    errors = strict_schema_errors(pod) + uniqueness_errors(pod)
    assert any("Additional properties are not allowed ('bogus' was unexpected)" in e for e in errors), errors
    assert "StatefulSet/dev-login/init-config: mountPath /mnt/login-config twice" in errors
    assert strict_schema_errors(login) == uniqueness_errors(login) == []


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


def run_campaign(size: int, tmp_path: Path) -> dict[str, int]:
    """The first `size` cases of the seeded campaign; returns what it counted."""
    rng = random.Random(SEED)
    sandbox = tmp_path / "sandbox"
    (sandbox / "bystander").mkdir(parents=True)
    (sandbox / "bystander" / "keep.txt").write_text("not the renderer's\n")
    started = time.monotonic()
    slowest, checking = 0.0, 0.0
    counts = {"valid": 0, "refused by render": 0, "bundles checked": 0, "written": 0}
    checked: set[bytes] = set()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for n in range(size):
            data = campaign_case(rng, n)
            case_started = time.monotonic()
            bundle = None
            signal.setitimer(signal.ITIMER_REAL, CASE_BOUND_S)
            try:
                try:
                    profile = load_profile(data, "fuzz.yaml")
                except ProfileError as e:
                    assert e.errors and all(line.startswith("fuzz.yaml:") for line in str(e).splitlines()), (n, str(e))
                    continue
                counts["valid"] += 1
                fmt = FORMATS[counts["valid"] % len(FORMATS)]
                try:
                    bundle = render(profile)
                except ProfileError as e:  # render's checks (validate runs them too): located like the others
                    assert e.errors and all(LOCATED.match(line) for line in str(e).splitlines()), (n, str(e))
                    counts["refused by render"] += 1
                    continue
                tree = build_tree(bundle, fmt, repo_url="https://git.example/r.git", revision="main",
                                  repo_path="clusters/fuzz")
                for rel in tree:
                    parts = rel.split("/")
                    assert rel and not rel.startswith("/") and ".." not in parts and "" not in parts, (n, rel)
                if counts["valid"] % WRITE_EVERY == 0:
                    out = sandbox / "out"
                    before = {k: v for k, v in _snapshot(sandbox).items() if not k.startswith("out")}
                    write_tree(tree, out, note=lambda line: None)
                    after = {k: v for k, v in _snapshot(sandbox).items() if not k.startswith("out")}
                    assert after == before, (n, "a render touched a file outside its output directory")
                    counts["written"] += 1
            except CaseTimeout:
                pytest.fail(f"case {n} (seed {SEED}) ran past {CASE_BOUND_S} s:\n{data[:500]!r}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                slowest = max(slowest, time.monotonic() - case_started)
            if bundle is not None:  # the oracle's own time is outside the bound
                check_started = time.monotonic()
                assert bundle_errors(bundle, checked) == [], (n, data.decode(errors="replace")[:2000])
                counts["bundles checked"] += 1
                checking += time.monotonic() - check_started
    finally:
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.monotonic() - started
    print(f"\nfuzz campaign: {size} profiles (seed {SEED}), " + ", ".join(f"{v} {k}" for k, v in counts.items())
          + f", {len(checked)} distinct objects checked in {checking:.1f} s, slowest case {slowest * 1000:.0f} ms, "
          f"{elapsed:.1f} s in all")
    assert counts["valid"] >= size // 10, "too few valid profiles: the campaign would not exercise render"
    assert (sandbox / "bystander" / "keep.txt").read_text() == "not the renderer's\n"
    return counts


def test_seeded_campaign_sample(tmp_path: Path) -> None:
    """The campaign's first SAMPLE_SIZE cases, in the default tier."""
    counts = run_campaign(SAMPLE_SIZE, tmp_path)
    assert counts["bundles checked"] >= SAMPLE_SIZE // 20 and counts["written"] >= 1


@pytest.mark.slow
def test_seeded_campaign_of_ten_thousand_profiles(tmp_path: Path) -> None:
    counts = run_campaign(CAMPAIGN_SIZE, tmp_path)
    assert counts["bundles checked"] >= CAMPAIGN_SIZE // 20 and counts["written"] >= 20


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(mutated_examples(), corrupted_bytes()))
def test_cli_render_exits_0_or_2_and_writes_only_its_directory(data: bytes, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil_rmtree(work)
    work.mkdir()
    (work / "p.yaml").write_bytes(data)
    run = run_cli(["render", "p.yaml", "-o", "out", "--format", "helm"], timeout=60, cwd=work)  # in this process
    assert run.returncode in (0, 2), run.stderr
    assert "Traceback" not in run.stderr
    assert sorted(p.name for p in work.iterdir()) == (["out", "p.yaml"] if run.returncode == 0 else ["p.yaml"])


def shutil_rmtree(path: Path) -> None:
    import shutil
    if path.exists():
        shutil.rmtree(path)
