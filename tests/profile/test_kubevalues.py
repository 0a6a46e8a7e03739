"""Kubernetes-side values follow the API server's rules, and validate reports everything in one pass (issue 16)."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ProfileError
from slurmk8s.profile import load_profile
from slurmk8s.profile.kubevalues import (
    annotation_key_problem, annotations_size_problem, cidr_problem, ip_problem, label_key_problem, label_value_problem,
)
from slurmk8s.profile.schema import profile_schema, schema_findings
from slurmk8s.profile.yamlpos import Positions, format_path
from slurmk8s.quantity import MAX_QUANTITY, PATTERN, parse_quantity, to_mib
from profile_texts import BASE

ROOT = Path(__file__).resolve().parents[2]


def errors_of(content: str, tmp_path: Path) -> list[str]:
    (tmp_path / "bad.yaml").write_text(content)
    with pytest.raises(ProfileError) as info:
        read_profile(str(tmp_path / "bad.yaml"))
    return [line.split(":", 1)[1] for line in str(info.value).splitlines()]  # without the directory


# ---------------------------------------------------------------- quantities


@pytest.mark.parametrize("memory, mib", [
    ("2Gi", 2048), ("2G", 1907), ("2048M", 1953), ("2147483648", 2048), (2147483648, 2048), ("1.5Gi", 1536),
    ("2e9", 1907), ("2E9", 1907), ("+4Gi", 4096), ("0.5Ti", 524288), ("1048576k", 1000), (".75Gi", 768),
], ids=str)
def test_memory_takes_every_kubernetes_quantity(memory, mib: int, tmp_path: Path) -> None:
    """RealMemory is the quantity in whole MiB, rounded down (never more than the pod's limit)."""
    path = tmp_path / "p.yaml"
    path.write_text(BASE.replace("memory: 2Gi", f"memory: {memory}"))
    pool = read_profile(str(path)).pools[0]
    assert pool.memory_mib == mib
    assert parse_quantity(pool.memory) is not None  # the pod's limit is the value as written


@pytest.mark.parametrize("memory, message", [
    ("2GB", "expected a Kubernetes quantity such as 512Mi, 16Gi, 2G or 2147483648 (bytes), found '2GB'"),
    # Kubernetes' decimal kilo is a lowercase k ("1K" is refused by the Go parser, though the Python client takes it).
    ("1K", "expected a Kubernetes quantity such as 512Mi, 16Gi, 2G or 2147483648 (bytes), found '1K'"),
    ("-1Gi", "expected a Kubernetes quantity such as 512Mi, 16Gi, 2G or 2147483648 (bytes), found '-1Gi'"),
    ("-5", "-5 is less than the minimum of 0"),
    ("99999999999999999999Ti", "99999999999999999999Ti is more than Kubernetes can hold (9223372036854775807 bytes)"),
    ("1e999999999", "1e999999999 is more than Kubernetes can hold (9223372036854775807 bytes)"),
    ("2.5", "expected a string or an integer, found 2.5 (quote it: YAML reads 22.05 as a number)"),
], ids=str)
def test_memory_refuses_what_kubernetes_refuses(memory: str, message: str, tmp_path: Path) -> None:
    started = time.monotonic()
    lines = errors_of(BASE.replace("memory: 2Gi", f"memory: {memory}"), tmp_path)
    assert lines == [f"10:15: spec.pools[0].memory: {message}"]
    assert time.monotonic() - started < 5  # 1e999999999 is bounded before it is computed


digits = st.text("0123456789", min_size=1, max_size=6)
numbers = st.one_of(digits, st.tuples(digits, digits).map(".".join), digits.map(lambda d: d + "."),
                    digits.map(lambda d: "." + d))
suffixes = st.one_of(st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "m", "k", "M", "G", "T", "n", "u"]),
                     st.tuples(st.sampled_from("eE"), st.sampled_from(["", "+", "-"]),
                               st.integers(0, 12).map(str)).map("".join))


@settings(max_examples=300, deadline=None)
@given(numbers, suffixes)
def test_quantities_agree_with_the_kubernetes_client(number: str, suffix: str) -> None:
    """Every quantity of the grammar parses to the value the kubernetes client's parser gives."""
    from decimal import Decimal

    from kubernetes.utils import parse_quantity as client_parse

    text = number + suffix
    ours = parse_quantity(text)
    theirs = client_parse(text)
    if theirs > MAX_QUANTITY:
        assert ours is None
    else:
        assert ours is not None and Decimal(ours.numerator) / Decimal(ours.denominator) == theirs


def test_the_schema_pattern_is_the_parser_pattern() -> None:
    assert profile_schema()["$defs"]["quantity"]["pattern"] == PATTERN


def test_to_mib_rounds_down() -> None:
    assert to_mib("1Mi") == 1 and to_mib(2**20 - 1) == 0 and to_mib("1.5Mi") == 1


# ---------------------------------------------------------------- labels, tolerations, CIDRs


@pytest.mark.parametrize("key, ok", [
    ("rack", True), ("example.com/gpu", True), ("node.kubernetes.io/instance-type", True), ("a" * 63, True),
    ("A_b.c-D", True), ("", False), ("bad key", False), ("-rack", False), ("rack-", False), ("a" * 64, False),
    ("a/b/c", False), ("/rack", False), ("example.com/", False), ("Example.com/rack", False),
    (f"{'a' * 254}/rack", False), ("ex_ample.com/rack", False),
], ids=repr)
def test_label_keys_follow_is_qualified_name(key: str, ok: bool) -> None:
    assert (label_key_problem(key) is None) == ok


@pytest.mark.parametrize("key, ok", [
    ("example.com/gpu", True), ("Example.COM/rack", True), ("service.beta.kubernetes.io/aws-load-balancer-type", True),
    ("", False), ("a/b/c", False), ("ex_ample.com/rack", False), ("example.com/-rack", False), ("a" * 64, False),
], ids=repr)
def test_annotation_keys_are_label_keys_in_any_case(key: str, ok: bool) -> None:
    """ValidateAnnotations lowercases a key before IsQualifiedName: only the prefix's case differs."""
    assert (annotation_key_problem(key) is None) == ok
    if ok and key.islower():
        assert label_key_problem(key) is None


def test_annotations_size_counts_utf8_bytes_of_keys_and_values() -> None:
    assert annotations_size_problem({"k": "é" * (131072 - 1)}) is None  # 1 + 262142 bytes
    assert annotations_size_problem({"k": "x" * 262143}) is None
    assert annotations_size_problem({"k": "x" * 262144}) == (
        "the annotations hold 262145 bytes (keys and values, UTF-8); Kubernetes takes at most 262144 (256 KiB) on "
        "one object")


@pytest.mark.parametrize("text, ok", [
    ("203.0.113.10", True), ("2001:db8::10", True), ("::ffff:203.0.113.10", True), ("203.0.113.300", False),
    ("203.0.113.10/32", False), ("fe80::1%eth0", False), ("010.0.0.1", False), ("", False),
], ids=repr)
def test_ip_addresses(text: str, ok: bool) -> None:
    assert (ip_problem(text) is None) == ok


@pytest.mark.parametrize("value, ok", [
    ("", True), ("h100", True), ("a.b_c-d", True), ("a" * 63, True), ("a" * 64, False), ("r1\nx", False),
    ("-a", False), ("a b", False),
], ids=repr)
def test_label_values_follow_is_valid_label_value(value: str, ok: bool) -> None:
    assert (label_value_problem(value) is None) == ok


@pytest.mark.parametrize("cidr, ok", [
    ("10.0.0.0/8", True), ("10.1.2.3/8", True), ("fd00::/8", True), ("0.0.0.0/0", True),
    ("999.999.999.999/99", False), ("10.0.0.0/33", False), ("10.0.0.1", False), ("fd00::/129", False),
], ids=repr)
def test_cidrs_are_networks(cidr: str, ok: bool) -> None:
    assert (cidr_problem(cidr) is None) == ok


# The profile of the hostile review's F18 (k8s-invalid-fields.yaml): every value the API server rejects.
K8S_INVALID = BASE.replace("      memory: 2Gi\n", """\
      memory: 2Gi
      nodeSelector: {"": a, "bad key with space": b, rack: "r1\\nx"}
      tolerations:
        - {key: gpu, operator: Exists, value: "yes"}
        - {key: "bad key", operator: Exists}
        - {key: gpu, operator: Exists, effect: NoSchedule, tolerationSeconds: -5}
        - {operator: Equal, value: x}
  controller:
    storage: {storageClassName: "Not A Valid Class!"}
  login:
    sshFrom: ["999.999.999.999/99"]
  topology:
    plugin: tree
    domains:
      - {name: r1, nodeLabels: {"rack zone": r1}, slots: {cpu: 1}}
""")


def test_every_value_the_api_server_rejects_is_refused_with_its_rule(tmp_path: Path) -> None:
    assert errors_of(K8S_INVALID, tmp_path) == [
        "11:22: spec.pools[0].nodeSelector['']: a label key must not be empty",
        "11:29: spec.pools[0].nodeSelector['bad key with space']: 'bad key with space' is not a label key: its name "
        "part must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        "11:60: spec.pools[0].nodeSelector.rack: 'r1\\nx' is not a label value: it must be empty or letters, "
        "digits, '-', '_' and '.', starting and ending with a letter or digit",
        "13:47: spec.pools[0].tolerations[0].value: must be empty with operator: Exists (Exists matches any value)",
        "14:17: spec.pools[0].tolerations[1].key: 'bad key' is not a label key: its name part must be letters, "
        "digits, '-', '_' and '.', starting and ending with a letter or digit",
        "15:79: spec.pools[0].tolerations[2].tolerationSeconds: applies only to effect: NoExecute; set that effect "
        "or drop tolerationSeconds",
        "16:22: spec.pools[0].tolerations[3].operator: a toleration without a key tolerates every taint and needs "
        "operator: Exists",
        "18:33: spec.controller.storage.storageClassName: expected a DNS-1123 subdomain (lowercase letters, digits, "
        "'-' and '.') such as fast-ssd, found 'Not A Valid Class!'",
        "20:15: spec.login.sshFrom[0]: '999.999.999.999/99' is not a CIDR ('999.999.999.999/99' does not appear to "
        "be an IPv4 or IPv6 network)",
        "24:33: spec.topology.domains[0].nodeLabels['rack zone']: 'rack zone' is not a label key: its name part "
        "must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
    ]


# ---------------------------------------------------------------- one pass


def test_schema_and_cross_field_errors_come_in_one_pass(tmp_path: Path) -> None:
    """The review's case: a typo (cpu for cpus) and replicas above maxReplicas in the same pool."""
    content = BASE.replace("      cpus: 2\n", "      cpu: 2\n      maxReplicas: 4\n").replace("replicas: 1", "replicas: 9")
    assert errors_of(content, tmp_path) == [
        "7:7: spec.pools[0]: missing required field 'cpus'",
        "8:17: spec.pools[0].replicas: 9 is greater than maxReplicas 4",
        "9:7: spec.pools[0].cpu: unknown field (allowed: cpus, features, gpus, healthChecks, image, keda, maxReplicas, "
        "memory, minReplicas, name, nodeSelector, rdma, replicas, tmpSize, tolerations)",
    ]


def test_the_two_phase_profile_shows_both_errors(tmp_path: Path) -> None:
    """F19's two-phase.yaml: a login type error hid the duplicate pool name until it was fixed."""
    content = BASE + "    - {name: cpu, replicas: 1, cpus: 2, memory: 2Gi}\n  login:\n    replicas: two\n"
    assert errors_of(content, tmp_path) == [
        "11:14: spec.pools[1].name: duplicate pool name 'cpu' (also spec.pools[0])",
        "13:15: spec.login.replicas: expected an integer, found 'two'",
    ]


def test_a_broken_item_is_not_reported_again_by_what_refers_to_it(tmp_path: Path) -> None:
    """A pool whose name the schema refuses is left out of the cross-field pass, and so are references to it."""
    content = BASE + "    - {name: GPU, replicas: 1, cpus: 2, memory: 2Gi}\n  partitions:\n" \
                     "    - {name: main, pools: [cpu, GPU, nope]}\n"
    assert errors_of(content, tmp_path) == [
        "11:14: spec.pools[1].name: expected a DNS-1123 label (lowercase letters, digits and '-', starting and "
        "ending with a letter or digit), found 'GPU'",
        "13:38: spec.partitions[0].pools[2]: unknown pool 'nope' (pools: cpu, GPU)",
    ]


EXAMPLES = {p.name: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "profiles").glob("*.yaml"))}


def _leaves(doc, prefix=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, prefix + (i,))
    else:
        yield prefix


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_one_broken_value_is_reported_once_and_echoes_nothing(data) -> None:
    """Break one value of a valid example with a wrong type: every reported line is about that value (or the
    object that now lacks it), never a cross-field echo of the repair elsewhere."""
    name = data.draw(st.sampled_from(sorted(EXAMPLES)))
    doc = copy.deepcopy(EXAMPLES[name])
    path = data.draw(st.sampled_from(sorted(_leaves(doc), key=repr)))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    value = data.draw(st.sampled_from([{"x": 1}, [[1]], None, "Not Valid!", -7, 10**9]))
    # A new name for a pool really leaves what refers to the old one dangling: not an echo.
    assume(not (path[-1] == "name" and isinstance(value, str)))
    parent[path[-1]] = value
    data_ = yaml.safe_dump(doc).encode()
    # Only values the schema refuses: a schema-valid change may well break a cross-field rule for real.
    assume(any(f.path == path for f in schema_findings(doc, Positions())))
    with pytest.raises(ProfileError) as info:
        load_profile(data_, "p.yaml")
    allowed = {format_path(path), format_path(path[:-1])}
    assert all(err.path in allowed for err in info.value.errors), (path, [str(x) for x in info.value.errors])


def test_a_refused_name_quoted_in_another_message_stays_on_one_line(tmp_path: Path) -> None:
    """Found by the fuzz campaign: the name 'a\\nb', shown in another problem's list of pools, broke the line."""
    content = BASE.replace("name: cpu", 'name: "a\\nb"') + "  partitions:\n    - {name: main, pools: [cpu]}\n"
    lines = errors_of(content, tmp_path)
    assert lines == [
        "7:13: spec.pools[0].name: expected a DNS-1123 label (lowercase letters, digits and '-', starting and ending "
        "with a letter or digit), found 'a\\nb'",
        "12:28: spec.partitions[0].pools[0]: unknown pool 'cpu' (pools: 'a\\nb')",
    ]


def test_an_srun_port_range_over_the_daemons_ports_is_refused(tmp_path: Path) -> None:
    """F18: srunPortRange 6817-6819 validated; srun would listen where slurmctld, slurmd and slurmdbd do."""
    lines = errors_of(BASE.replace("spec:\n", "spec:\n  slurm: {srunPortRange: 6817-6819}\n", 1), tmp_path)
    assert lines == ["6:26: spec.slurm.srunPortRange: '6817-6819' overlaps the ports of the Slurm daemons "
                     "(6817-6820: slurmctld, slurmd, slurmdbd, slurmrestd); choose a range outside them, such as 60001-63000"]
