"""Side-by-side fencing, as properties over node shapes and splits.

The rendered Slurm side (slurm.conf NodeName line, gres.conf, the systemd slice and scope)
and the rendered kubelet side (KubeletConfiguration fragment, device-plugin patch) are read
back from the generated text and must never overlap nor together exceed the node.
"""

from __future__ import annotations

import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmk8s.errors import ProfileError
from slurmk8s.profile.loader import load_profile
from slurmk8s.profile.sidebyside import format_cpulist, parse_cpulist
from slurmk8s.render import render

MIB = 1024 * 1024


@st.composite
def shapes(draw):
    """A node (CPU ids, maybe sparse; memory; GPUs) and a split that the fence check accepts."""
    n = draw(st.integers(3, 96))
    offset = draw(st.integers(0, 8))
    cpus = [offset + i for i in range(n)]
    owner = draw(st.lists(st.sampled_from(["slurm", "system", "kube"]), min_size=n, max_size=n))
    # each side at least one CPU
    owner[0], owner[1], owner[2] = "system", "slurm", "kube"
    owner = draw(st.permutations(owner))
    side = {k: [c for c, o in zip(cpus, owner) if o == k] for k in ("slurm", "system", "kube")}
    memory_gib = draw(st.integers(4, 512))
    system_mib = draw(st.integers(256, memory_gib * 1024 // 4))
    slurm_mib = draw(st.integers(512, memory_gib * 1024 - system_mib - 1))
    gpus = list(range(draw(st.integers(0, 8))))
    slurm_gpus = sorted(draw(st.sets(st.sampled_from(gpus))) if gpus else [])
    return {
        "name": "s",
        "nodes": ["n-1", "n-2"],
        "cpus": format_cpulist(cpus),
        "memory": f"{memory_gib}Gi",
        "gpus": gpus,
        "system": {"cpus": format_cpulist(side["system"]), "memory": f"{system_mib}Mi"},
        "slurm": {"cpus": format_cpulist(side["slurm"]), "memory": f"{slurm_mib}Mi", "gpus": slurm_gpus},
    }


def profile_text(shape: dict) -> bytes:
    doc = {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "p"},
           "spec": {"pools": [{"name": "cpu", "replicas": 1, "cpus": 1, "memory": "1Gi"}],
                    "sideBySide": {"mode": "host", "shapes": [shape]}}}
    return yaml.safe_dump(doc).encode()


def key(text: str, name: str) -> str:
    m = re.search(rf"^{name}=(\S+)", text, re.M)
    assert m, f"{name}= missing"
    return m.group(1)


def read_sides(files: dict[str, str]) -> dict[str, object]:
    """What each side was told, read back from the rendered text."""
    d = "hosts/s"
    node = re.search(r"^NodeName=n-1,n-2 .*$", files["slurm.conf"], re.M).group(0)
    conf = dict(kv.split("=", 1) for kv in node.split())
    slice_ = files[f"{d}/systemd/slurm.slice"]
    scope = files[f"{d}/systemd/slurmstepd.scope.d/slurmk8s.conf"]
    kubelet = yaml.safe_load(files[f"{d}/kubelet-config.yaml"])
    gres = files.get(f"{d}/gres.conf", "")
    m = re.search(r"File=/dev/nvidia(?:\[([0-9,-]+)\]|([0-9]+))", gres)
    gres_gpus = set(parse_cpulist(m.group(1) or m.group(2))) if m else set()
    plugin = files.get(f"{d}/nvidia-device-plugin.yaml")
    kube_gpus: set[int] = set()
    if plugin:
        value = yaml.safe_load(plugin)["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"]
        kube_gpus = set() if value == "none" else {int(g) for g in value.split(",")}
    return {
        "slurm_cpus": set(parse_cpulist(key(slice_, "AllowedCPUs"))),
        "scope_cpus": set(parse_cpulist(key(scope, "AllowedCPUs"))),
        "slurm_conf_cpus": int(conf["CPUs"]),
        "cpu_spec_list": set(parse_cpulist(conf["CpuSpecList"])) if "CpuSpecList" in conf else set(),
        "real_memory_mib": int(conf["RealMemory"]),
        "mem_spec_mib": int(conf["MemSpecLimit"]),
        "gres_count": int(conf["Gres"].rsplit(":", 1)[1]) if "Gres" in conf else 0,
        "slice_bytes": int(key(slice_, "MemoryMax")),
        "scope_bytes": int(key(scope, "MemoryMax")),
        "denied_by_slice": {int(g) for g in re.findall(r"^DeviceAllow=/dev/nvidia([0-9]+) ", slice_, re.M)},
        "device_policy": "DevicePolicy=closed" in slice_,
        "gres_gpus": gres_gpus,
        "kubelet_reserved": set(parse_cpulist(kubelet["reservedSystemCPUs"])),
        "kubelet_reserved_mib": _mib(kubelet["systemReserved"]["memory"]),
        "kube_gpus": kube_gpus,
    }


def _mib(q: str) -> int:
    return int(q[:-2]) * {"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}[q[-2:]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes())
def test_slurm_side_and_kubelet_side_never_overlap_nor_exceed_the_node(shape: dict) -> None:
    bundle = render(load_profile(profile_text(shape)))
    sides = read_sides(bundle.files)
    node_cpus = set(parse_cpulist(shape["cpus"]))
    node_mib = _mib(shape["memory"])
    system_cpus = set(parse_cpulist(shape["system"]["cpus"]))
    kube_pod_cpus = node_cpus - sides["kubelet_reserved"]
    # CPUs: Slurm's slice, its jobs' scope and Slurm's own count agree; the kubelet's pods get none of them.
    assert sides["scope_cpus"] == sides["slurm_cpus"]
    # slurm.conf declares the whole node and takes everything not Slurm's away as CpuSpecList.
    assert sides["slurm_conf_cpus"] == len(node_cpus)
    assert sides["cpu_spec_list"] == node_cpus - sides["slurm_cpus"]
    assert sides["slurm_cpus"] <= node_cpus
    assert not sides["slurm_cpus"] & kube_pod_cpus
    assert not system_cpus & (sides["slurm_cpus"] | kube_pod_cpus)
    assert kube_pod_cpus, "Kubernetes must keep at least one CPU"
    # Memory: Slurm's RealMemory is its slice; jobs' scope holds RealMemory minus MemSpecLimit;
    # with the kubelet's allocatable and the system reserve it fits the node.
    assert sides["real_memory_mib"] * MIB == sides["slice_bytes"]
    assert sides["scope_bytes"] == (sides["real_memory_mib"] - sides["mem_spec_mib"]) * MIB
    kube_allocatable_mib = node_mib - sides["kubelet_reserved_mib"]
    system_mib = _mib(shape["system"]["memory"])
    assert sides["real_memory_mib"] + kube_allocatable_mib + system_mib <= node_mib
    # GPUs: gres.conf and the device plugin split the node's GPUs; Slurm's slice denies Kubernetes' GPUs.
    node_gpus = set(shape["gpus"])
    assert not sides["gres_gpus"] & sides["kube_gpus"]
    assert sides["gres_gpus"] | sides["kube_gpus"] <= node_gpus
    assert sides["gres_count"] == len(sides["gres_gpus"])
    if sides["kube_gpus"]:
        assert sides["device_policy"] and sides["denied_by_slice"] == sides["gres_gpus"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes(), st.data())
def test_any_cpu_given_to_two_sides_is_refused_and_named(shape: dict, data: st.DataObject) -> None:
    slurm = parse_cpulist(shape["slurm"]["cpus"])
    stolen = data.draw(st.sampled_from(slurm))
    system = sorted(set(parse_cpulist(shape["system"]["cpus"])) | {stolen})
    shape = {**shape, "system": {**shape["system"], "cpus": format_cpulist(system)}}
    try:
        load_profile(profile_text(shape), "p.yaml")
    except ProfileError as e:
        assert f"shape 's': CPUs {stolen} are both Slurm's and the system reserve's" in str(e)
    else:
        raise AssertionError(f"CPU {stolen} in both Slurm's share and the system reserve was accepted")


def test_the_reader_sees_an_overlap_when_there_is_one() -> None:
    """Guard: a kubelet fragment that leaves Slurm's CPUs to pods is caught by the same reading."""
    shape = {"name": "s", "nodes": ["n-1", "n-2"], "cpus": "0-7", "memory": "16Gi", "gpus": [],
             "system": {"cpus": "0", "memory": "1Gi"}, "slurm": {"cpus": "1-3", "memory": "4Gi", "gpus": []}}
    files = dict(render(load_profile(profile_text(shape))).files)
    files["hosts/s/kubelet-config.yaml"] = files["hosts/s/kubelet-config.yaml"].replace('"0-3"', '"0"')
    sides = read_sides(files)
    assert sides["slurm_cpus"] & (set(range(8)) - sides["kubelet_reserved"]) == {1, 2, 3}
