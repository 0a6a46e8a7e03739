"""Properties of render over generated valid profiles (hypothesis)."""

from __future__ import annotations

import copy
import re

import kubevalidate
import yaml
from hypothesis import HealthCheck, given, note, settings, strategies as st

from slurmk8s.output.plain import plain_tree
from slurmk8s.output.yamlout import dump_all
from slurmk8s.profile import load_profile
from slurmk8s.render import render

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODERN = ["23.11", "24.11", "25.05", "25.11", "26.05"]


def label(first: str, max_len: int) -> st.SearchStrategy[str]:
    """DNS labels of 1..max_len characters whose first character is in the class `first`."""
    return st.from_regex(rf"[{first}]([-a-z0-9]{{0,{max_len - 2}}}[a-z0-9])?", fullmatch=True)


@st.composite
def pool_docs(draw: st.DrawFn, name: str) -> dict:
    """One valid pool, optionally with GPUs, RDMA and hugepages."""
    high = draw(st.integers(1, 300))
    low = draw(st.integers(0, high))
    pool: dict = {"name": name, "replicas": draw(st.integers(low, high)), "minReplicas": low, "maxReplicas": high,
                  "cpus": draw(st.integers(1, 256)),
                  "memory": draw(st.sampled_from(["512Mi", "1Gi", "3000Mi", "64Gi", "1800Gi", "2Ti"]))}
    if draw(st.booleans()):
        gpus: dict = {"count": draw(st.integers(1, 16))}
        if draw(st.booleans()):
            gpus["type"] = draw(st.sampled_from(["h100", "a100", "l40s", "mi300x"]))
        if draw(st.booleans()):
            gpus["resource"] = draw(st.sampled_from(["nvidia.com/gpu", "amd.com/gpu"]))
        pool["gpus"] = gpus
    if draw(st.booleans()):
        rdma: dict = {"resource": "rdma/hca_shared_devices_a", "count": draw(st.integers(1, 4)),
                      "networks": draw(st.lists(st.sampled_from(["ib-0", "ib-1", "ib-2"]), unique=True, max_size=3))}
        if draw(st.booleans()):
            size = draw(st.sampled_from(["2Mi", "1Gi"]))
            rdma["hugepages"] = {"size": size, "amount": f"{draw(st.integers(1, 64))}Gi"}
        pool["rdma"] = rdma
    pool["features"] = draw(st.lists(st.sampled_from(["cpu", "avx512", "ib", "nvme"]), unique=True, max_size=3))
    return pool


@st.composite
def profile_docs(draw: st.DrawFn) -> dict:
    """A valid profile document covering the profile's options (names up to their length limits)."""
    name = draw(label("a-z", 40))
    pool_len = min(20, 51 - len(name))  # StatefulSet <name>-<pool> stays within 52
    pool_names = draw(st.lists(label("a-z0-9", pool_len), min_size=1, max_size=5,
                               unique=True).filter(lambda ns: not {"controller", "accounting", "mariadb", "login",
                                                                   "restapi", "slurmd", "default"} & set(ns)))
    version = draw(st.sampled_from(["22.05", "23.02"] + MODERN))
    auth = "munge" if version < "23.11" else draw(st.sampled_from(["slurm", "munge"]))
    slurm: dict = {"version": version, "auth": auth}
    if auth == "munge" or version not in ("24.11", "25.05", "25.11", "26.05") or draw(st.booleans()):
        slurm["images"] = {"registry": "registry.example.org/hpc", "tag": f"{version}-custom"}
    if draw(st.booleans()):
        slurm["config"] = {"PrologFlags": "Alloc", "MaxJobCount": 20000}
    spec: dict = {"slurm": slurm, "controller": {"replicas": draw(st.integers(1, 2))},
                  "login": {"replicas": draw(st.integers(0, 3)),
                            "service": {"type": draw(st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]))}},
                  "restapi": {"enabled": draw(st.booleans())},
                  "networkPolicy": {"enabled": draw(st.booleans())},
                  "pools": [draw(pool_docs(n)) for n in pool_names]}
    accounting = draw(st.sampled_from(["embedded", "external", "off"]))
    spec["accounting"] = {"enabled": False} if accounting == "off" else {"database": {accounting: (
        {"host": "db.example.org", "passwordSecret": {"name": "db", "key": "password"}} if accounting == "external"
        else {"storage": "5Gi"})}}
    if draw(st.booleans()):
        parts = []
        for i in range(draw(st.integers(1, 4))):
            members = draw(st.lists(st.sampled_from(pool_names), min_size=1, unique=True))
            parts.append({"name": f"part{i}", "pools": members, "maxTime": draw(st.sampled_from(["UNLIMITED", "1:00:00", 90]))})
        covered = {p for part in parts for p in part["pools"]}
        parts[0]["pools"] += [p for p in pool_names if p not in covered]
        parts[draw(st.integers(0, len(parts) - 1))]["default"] = True
        spec["partitions"] = parts
    namespace = draw(label("a-z0-9", 63))
    return {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def load(doc: dict):
    """Load a document through the real YAML path."""
    return load_profile(yaml.safe_dump(doc, sort_keys=False).encode(), "gen.yaml")


def output(profile) -> tuple[dict[str, str], str]:
    """Everything a user sees: the plain tree and the -o - stream."""
    bundle = render(profile)
    return plain_tree(bundle), dump_all(bundle.objects)


def expand(hostlist: str) -> list[str]:
    """Expand a Slurm hostlist of the forms we emit: a-[0-3],b-7."""
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", hostlist):
        m = re.fullmatch(r"(.*)\[(\d+)-(\d+)\]", part)
        out += [f"{m[1]}{i}" for i in range(int(m[2]), int(m[3]) + 1)] if m else [part]
    return out


def conf_lines(text: str, first_key: str) -> list[dict[str, str]]:
    """Lines of a Slurm config file that start with first_key=, as key -> value dicts."""
    return [dict(kv.split("=", 1) for kv in line.split()) for line in text.splitlines() if line.startswith(f"{first_key}=")]


@SETTINGS
@given(profile_docs(), st.data())
def test_shuffled_input_gives_identical_output(doc: dict, data: st.DataObject) -> None:
    shuffled = copy.deepcopy(doc)
    shuffled["spec"]["pools"] = data.draw(st.permutations(doc["spec"]["pools"]), label="pools")
    if "partitions" in doc["spec"]:
        parts = data.draw(st.permutations(shuffled["spec"]["partitions"]), label="partitions")
        for part in parts:
            part["pools"] = data.draw(st.permutations(part["pools"]))
        shuffled["spec"]["partitions"] = parts
    note(f"pools order: {[p['name'] for p in shuffled['spec']['pools']]}")
    assert output(load(shuffled)) == output(load(doc))


@SETTINGS
@given(profile_docs())
def test_same_profile_twice_gives_identical_bytes(doc: dict) -> None:
    profile = load(doc)
    assert output(profile) == output(load(doc))
    assert output(profile) == output(profile)


RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
SUBDOMAIN_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@SETTINGS
@given(profile_docs())
def test_names_are_dns_labels(doc: dict) -> None:
    profile = load(doc)
    bundle = render(profile)
    names = []
    for obj in bundle.objects:
        if obj["kind"] in RBAC_KINDS:  # the API server takes any path segment up to 253 for these (ValidateRBACName)
            name = obj["metadata"]["name"]
            assert len(name) <= 253 and not set(name) & {"/", "%"} and name not in (".", ".."), name
        elif obj["kind"] in SUBDOMAIN_KINDS:  # NameIsDNSSubdomain: dot-separated labels, up to 253 in all (the
            # API server's IsDNS1123Subdomain sets no length per label)
            name = obj["metadata"]["name"]
            assert len(name) <= 253 and all(DNS1123.match(part) for part in name.split(".")), name
        else:
            names.append(obj["metadata"]["name"])
        if obj["kind"] == "Service":
            assert DNS1035.match(obj["metadata"]["name"]) and len(obj["metadata"]["name"]) <= 63
            names += [f"{p['name']}" for p in obj["spec"]["ports"]]
        if obj["kind"] == "StatefulSet":
            pool = obj["metadata"]["labels"].get("slurmk8s.io/pool")
            count = profile.pool(pool).max_replicas if pool else obj["spec"]["replicas"]
            names.append(f"{obj['metadata']['name']}-{max(count - 1, 0)}")  # the longest pod hostname
            pod = obj["spec"]["template"]["spec"]
            names += [c["name"] for c in pod["containers"] + pod.get("initContainers", [])]
            names += [v["name"] for v in pod["volumes"]]
            for search in pod.get("dnsConfig", {}).get("searches", []):
                names += search.split(".")
        for value in obj["metadata"]["labels"].values():
            assert len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value)
    bad = [n for n in names if not (DNS1123.match(n) and len(n) <= 63)]
    assert bad == []


@SETTINGS
@given(profile_docs())
def test_gpu_counts_agree_in_three_places(doc: dict) -> None:
    bundle = render(load(doc))
    nodes = {line["NodeName"]: line for line in conf_lines(bundle.files["slurm.conf"], "NodeName")}
    gres = {line["NodeName"]: line for line in conf_lines(bundle.files.get("gres.conf", ""), "NodeName")}
    for pool in doc["spec"]["pools"]:
        hosts = f"{pool['name']}-[0-{pool['maxReplicas'] - 1}]" if pool["maxReplicas"] > 1 else f"{pool['name']}-0"
        sts = next(o for o in bundle.of_kind("StatefulSet") if o["metadata"]["labels"].get("slurmk8s.io/pool") == pool["name"])
        limits = sts["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        gpus = pool.get("gpus")
        if not gpus:
            assert "Gres" not in nodes[hosts] and hosts not in gres
            assert not [k for k in limits if k.endswith("/gpu")]
            continue
        kind = f"gpu:{gpus['type']}" if "type" in gpus else "gpu"
        assert nodes[hosts]["Gres"] == f"{kind}:{gpus['count']}"
        assert len(expand(gres[hosts]["File"])) == gpus["count"]
        assert gres[hosts].get("Type") == gpus.get("type")
        assert limits[gpus.get("resource", "nvidia.com/gpu")] == str(gpus["count"])


@SETTINGS
@given(profile_docs())
def test_every_node_is_in_a_partition(doc: dict) -> None:
    bundle = render(load(doc))
    nodes = [n for line in conf_lines(bundle.files["slurm.conf"], "NodeName") for n in expand(line["NodeName"])]
    in_partitions = {n for line in conf_lines(bundle.files["slurm.conf"], "PartitionName") for n in expand(line["Nodes"])}
    assert len(nodes) == len(set(nodes)) == sum(p["maxReplicas"] for p in doc["spec"]["pools"])
    assert set(nodes) <= in_partitions
    assert sum(line.get("Default") == "YES" for line in conf_lines(bundle.files["slurm.conf"], "PartitionName")) == 1


@SETTINGS
@given(profile_docs())
def test_render_does_not_mutate_its_input(doc: dict) -> None:
    profile = load(doc)
    before = copy.deepcopy(profile)
    first = render(profile)
    assert profile == before
    # Objects must not share containers across renders (a caller editing one bundle must not edit the next).
    first.objects[-1]["metadata"]["labels"]["x"] = "y"
    assert "x" not in render(profile).objects[-1]["metadata"]["labels"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profile_docs())
def test_generated_profiles_validate_strictly(doc: dict) -> None:
    for obj in render(load(doc)).objects:
        kubevalidate.validate(obj, kubevalidate.minor_serving(obj, "1.29.0"), strict=True)


def test_expand_and_conf_lines_helpers() -> None:
    assert expand("a-[0-2],b-1-7") == ["a-0", "a-1", "a-2", "b-1-7"]
    assert conf_lines("x\nNodeName=a-0 Gres=gpu:2\n", "NodeName") == [{"NodeName": "a-0", "Gres": "gpu:2"}]
