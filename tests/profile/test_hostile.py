"""Hostile profiles (issue 16): injection, YAML's base-60 numbers, name collisions, unbounded work.

Each case is one located `FILE:LINE:COL: path: message` line and exit code 2; the
unbounded-work cases also finish quickly where the old code took minutes and gigabytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ProfileError
from profile_texts import BASE

EXTERNAL_DB = """\
  accounting:
    database:
      external:
        host: db.example
        passwordSecret: {name: db, key: password}
"""
SIDE_BY_SIDE = """\
  sideBySide:
    shapes:
      - name: dgx
        nodes: [dgx-01]
        cpus: '0-63'
        memory: 64Gi
        system: {cpus: '0-3', memory: 4Gi}
        slurm: {cpus: '4-31', memory: 32Gi}
"""
TOPOLOGY = """\
    - {name: a-b, replicas: 1, cpus: 1, memory: 1Gi}
  partitions:
    - {name: main, pools: [cpu, a-b]}
  topology:
    plugin: tree
    domains:
      - {name: b-c, nodeLabels: {rack: r1}, slots: {cpu: 1}}
      - {name: c, nodeLabels: {rack: r2}, slots: {a-b: 1}}
"""
SCHED = BASE + "  scheduling:\n"


def edit(text: str, old: str, new: str) -> str:
    """text with one exact substring replaced (fails loudly if the substring is gone)."""
    assert old in text
    return text.replace(old, new, 1)


# (id, content, expected lines)
CASES: list[tuple[str, str, list[str]]] = [
    ("dbhost-newline", BASE + EXTERNAL_DB.replace("host: db.example", 'host: "db.example\\nPurgeJobAfter=1"'),
     ["bad.yaml:14:15: spec.accounting.database.external.host: expected a host name or an IP address such as "
      "db.example.org, found 'db.example\\nPurgeJobAfter=1'"]),
    ("dbuser-space", BASE + EXTERNAL_DB.replace("host: db.example", "host: db.example\n        user: slurm user"),
     ["bad.yaml:15:15: spec.accounting.database.external.user: expected a name of letters, digits, '_', '.' and '-', "
      "found 'slurm user'"]),
    ("dbname-return", BASE + EXTERNAL_DB.replace("host: db.example", 'host: db.example\n        database: "a\\rb"'),
     ["bad.yaml:15:19: spec.accounting.database.external.database: expected a name of letters, digits and '_', "
      "found 'a\\rb'"]),
    ("registry-newline", BASE + '  slurm:\n    images: {registry: "reg.example\\nx"}\n',
     ["bad.yaml:12:24: spec.slurm.images.registry: expected a registry and path such as registry.example.org/slurm, "
      "found 'reg.example\\nx'"]),
    ("storage-class-invalid", BASE + '  controller:\n    storage: {storageClassName: "Not A Class!"}\n',
     ["bad.yaml:12:33: spec.controller.storage.storageClassName: expected a DNS-1123 subdomain (lowercase letters, "
      "digits, '-' and '.') such as fast-ssd, found 'Not A Class!'"]),
    ("storage-class-too-long", BASE + f'  controller:\n    storage: {{storageClassName: {"s" * 300}}}\n',
     [f"bad.yaml:12:33: spec.controller.storage.storageClassName: '{'s' * 59}...(300 characters) is 300 characters "
      "long; the maximum is 253"]),
    # A label value follows the API server's rule, which has no room for a line break.
    ("node-selector-newline", edit(BASE, "memory: 2Gi\n", 'memory: 2Gi\n      nodeSelector: {rack: "r1\\nx"}\n'),
     ["bad.yaml:11:28: spec.pools[0].nodeSelector.rack: 'r1\\nx' is not a label value: it must be empty or "
      "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"]),
    # Fields without a pattern are guarded by the one rule for every value: no control characters.
    ("keda-query-bell", edit(BASE, "replicas: 1\n", "replicas: 1\n      minReplicas: 0\n      maxReplicas: 2\n")
     + '      keda: {serverAddress: "http://p:9090", query: "up\\a", threshold: "1"}\n',
     ["bad.yaml:13:53: spec.pools[0].keda.query: 'up\\x07' contains a control character (U+0007); values are "
      "written into Slurm and Kubernetes files, where it would break the line"]),
    ("partition-config-nul", BASE + '  partitions:\n    - {name: main, pools: [cpu], config: {OverSubscribe: "NO\\0"}}\n',
     ["bad.yaml:12:58: spec.partitions[0].config.OverSubscribe: 'NO\\x00' contains a control character (U+0000); "
      "values are written into Slurm and Kubernetes files, where it would break the line"]),
    ("maxtime-base60", BASE + "  partitions:\n    - {name: main, pools: [cpu], maxTime: 12:00:00}\n",
     ['bad.yaml:12:43: spec.partitions[0].maxTime: 12:00:00 is read by YAML as the base-60 number 43200; '
      'quote it: "12:00:00"']),
    ("maxwall-base60", SCHED + "    qos:\n      - {name: urgent, limits: {maxWall: 1:00:00}}\n",
     ['bad.yaml:13:42: spec.scheduling.qos[0].limits.maxWall: 1:00:00 is read by YAML as the base-60 number 3600; '
      'quote it: "1:00:00"']),
    ("replicas-huge", edit(BASE, "replicas: 1", "replicas: 100000000"),
     ["bad.yaml:8:17: spec.pools[0].replicas: 100000000 is greater than the maximum of 4096"]),
    ("cpulist-huge", BASE + SIDE_BY_SIDE.replace("cpus: '0-63'", "cpus: '0-100000000'"),
     ["bad.yaml:15:15: spec.sideBySide.shapes[0].cpus: expected a CPU list such as 0-3,8-11 (CPU ids below 10000), "
      "found '0-100000000'"]),
    ("cpulist-5000-digits", BASE + SIDE_BY_SIDE.replace("cpus: '0-63'", f"cpus: '0-{'5' * 5000}'"),
     [f"bad.yaml:15:15: spec.sideBySide.shapes[0].cpus: '0-{'5' * 57}...(5002 characters) is 5002 characters "
      "long; the maximum is 1024"]),
    ("memory-5000-digits", edit(BASE, "memory: 2Gi", f"memory: {'5' * 5000}Mi"),
     [f"bad.yaml:10:15: spec.pools[0].memory: '{'5' * 59}...(5002 characters) is 5002 characters long; "
      "the maximum is 24"]),
    ("too-many-nodes", BASE + "".join(f"    - {{name: p{i}, replicas: 1, maxReplicas: 4096, cpus: 1, memory: 1Gi}}\n"
                                      for i in range(17)),
     ["bad.yaml:6:3: spec.pools: the pools hold 69633 Slurm nodes (the sum of maxReplicas); at most 65536 are "
      "supported"]),
]


def write(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize("content, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_profile_is_one_located_line(content: str, expected: list[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, content)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError) as info:
        read_profile("bad.yaml")
    assert str(info.value).splitlines() == expected
    assert info.value.exit_code == 2


def test_each_case_is_one_edit_from_valid(tmp_path: Path) -> None:
    """The unedited sections are valid, so each case above tests exactly its edit."""
    assert read_profile(write(tmp_path, BASE + EXTERNAL_DB)).accounting.external.host == "db.example"
    assert read_profile(write(tmp_path, BASE + SIDE_BY_SIDE)).side_by_side.shapes[0].slurm.cpus == tuple(range(4, 32))
    assert read_profile(write(tmp_path, BASE + '  partitions:\n    - {name: main, pools: [cpu], maxTime: "12:00:00"}\n')
                        ).partitions[0].max_time == "12:00:00"
    assert len(read_profile(write(tmp_path, BASE + TOPOLOGY)).topology.leaves()) == 2


def test_topology_pool_and_domain_names_that_alias_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool cpu in leaf b-c and pool cpu-b in leaf c would both be StatefulSet demo-cpu-b-c."""
    content = (BASE + TOPOLOGY).replace("a-b", "cpu-b")
    write(tmp_path, content)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError) as info:
        read_profile("bad.yaml")
    assert str(info.value).splitlines() == [
        "bad.yaml:18:51: spec.topology.domains[1].slots.cpu-b: pool 'cpu-b' in domain 'c' and pool 'cpu' in domain "
        "'b-c' (spec.topology.domains[0]) would both be StatefulSet 'demo-cpu-b-c'; rename a pool or a domain"]


def test_render_refuses_any_two_objects_with_one_name() -> None:
    """The last guard: whatever the profile checks miss, render never emits one (kind, name) twice."""
    from slurmk8s.profile import load_profile
    from slurmk8s.render import render
    profile = load_profile(BASE.encode(), "p.yaml")
    clone = profile.pools[0]
    import dataclasses
    twin = dataclasses.replace(profile, pools=(clone, clone))
    with pytest.raises(ProfileError) as info:
        render(twin)
    assert str(info.value).splitlines() == [
        "p.yaml:7:13: spec.pools[0].name: pool 'cpu' would make PodDisruptionBudget/demo-cpu twice; rename one of them"]


def test_deep_nesting_is_a_clean_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """170 nested topology switches once crashed jsonschema with RecursionError."""
    leaf: dict = {"name": "d0", "nodeLabels": {"x": "0"}, "slots": {"cpu": 1}}
    for depth in range(1, 171):
        leaf = {"name": f"d{depth}", "nodeLabels": {"x": str(depth)}, "children": [leaf]}
    doc = {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "demo"},
           "spec": {"pools": [{"name": "cpu", "replicas": 1, "cpus": 1, "memory": "1Gi"}],
                    "topology": {"plugin": "tree", "domains": [leaf]}}}
    write(tmp_path, json.dumps(doc))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError) as info:
        read_profile("bad.yaml")
    (line,) = str(info.value).splitlines()
    assert line.startswith("bad.yaml:1:") and line.endswith(
        ": spec.topology.domains[0].children[0]...: nested deeper than 48 levels; no profile needs that many")


def validate_timed(path: Path, limit: float) -> tuple[subprocess.CompletedProcess, float]:
    """`slurmk8s validate path` in a subprocess, killed after limit seconds (a failure, not a hang)."""
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "validate", str(path)], capture_output=True,
                         text=True, timeout=limit)
    return run, time.monotonic() - started


def test_a_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    """A 57 MB profile took 323 s and 5.8 GB before its rejection; now its size alone refuses it (3 MiB here)."""
    big = tmp_path / "big.yaml"
    with big.open("w") as f:
        f.write("apiVersion: slurmk8s.io/v1alpha1\nkind: ClusterProfile\nmetadata: {name: big}\nspec:\n  pools:\n")
        line = "  - {name: p, replicas: 1, cpus: 1, memory: 1Gi}\n"
        f.write(line * (3 * 2**20 // len(line)))
    run, _ = validate_timed(big, 60)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (f"{big}: the file is larger than 1 MiB; a profile is a few kilobytes "
                          "(is this the right file?)\n")


@pytest.mark.parametrize("shape", ["chain", "cycle"])
def test_a_large_account_tree_is_checked_in_linear_time(shape: str, tmp_path: Path) -> None:
    """10,000 accounts: the old cubic cycle check took 54 s for 3,000; this must take seconds."""
    n = 10_000
    parents = [f"a{i - 1}" for i in range(n)] if shape == "chain" else [f"a{(i - 1) % n}" for i in range(n)]
    accounts = "".join(f"      - {{name: a{i}" + (f", parent: {p}}}\n" if i or shape == "cycle" else "}\n")
                       for i, p in enumerate(parents))
    path = write(tmp_path, SCHED + "    accounts:\n" + accounts)
    run, _ = validate_timed(path, 60)
    if shape == "chain":
        assert (run.returncode, run.stderr) == (0, ""), run.stderr
    else:
        assert run.returncode == 2
        assert run.stderr.splitlines() == [
            f"{path}:13:28: spec.scheduling.accounts[0].parent: accounts form a cycle: a0 -> a9999 -> a9998 -> a9997 "
            "-> a9996 -> a9995 -> ... -> a5 -> a4 -> a3 -> a2 -> a1 -> a0 (10000 accounts)"]
