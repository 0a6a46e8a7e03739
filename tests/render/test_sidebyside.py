"""Side-by-side outputs agree with each other: slurm.conf, the host files, the pod-mode DaemonSet, `fence`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from slurmk8s import naming
from slurmk8s.profile.files import read_profile
from slurmk8s.profile.sidebyside import format_cpulist, parse_cpulist
from slurmk8s.quantity import to_mib
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "profiles/side-by-side.yaml"
POD = ROOT / "profiles/side-by-side-pod.yaml"


def test_each_shapes_node_line_is_the_one_in_slurm_conf_and_its_nodes_are_in_the_shared_partition() -> None:
    profile = read_profile(HOST)
    bundle = render(profile)
    conf = bundle.files["slurm.conf"]
    for shape in profile.side_by_side.shapes:
        review = bundle.files[f"hosts/{shape.name}/slurm-nodes.conf"]
        line = next(x for x in review.splitlines() if x.startswith("NodeName="))
        assert line in conf.splitlines()
    part = re.search(r"^PartitionName=shared Nodes=(\S+)", conf, re.M).group(1).split(",")
    assert sorted(part) == sorted(n for s in profile.side_by_side.shapes for n in s.nodes)
    assert "SuspendExcNodes" not in conf or all(n in conf for n in part)


def test_gres_conf_of_a_shape_lists_only_slurms_gpus() -> None:
    bundle = render(read_profile(HOST))
    assert "File=/dev/nvidia[0-3]" in bundle.files["hosts/dgx/gres.conf"]
    assert "hosts/epyc/gres.conf" not in bundle.files  # no GPUs for Slurm there
    plugin = bundle.files["hosts/dgx/nvidia-device-plugin.yaml"]
    assert 'value: "4,5,6,7"' in plugin


def test_pod_mode_daemonset_is_guaranteed_and_equals_slurms_node_definition() -> None:
    profile = read_profile(POD)
    bundle = render(profile)
    ds = bundle.of_kind("DaemonSet")
    assert len(ds) == len(profile.side_by_side.shapes) == 1
    pod = ds[0]["spec"]["template"]["spec"]
    for c in pod["containers"] + pod.get("initContainers", []):
        assert c["resources"]["requests"] == c["resources"]["limits"], c["name"]
    slurmd = pod["containers"][0]["resources"]["limits"]
    node = re.search(r"^NodeName=slurmk8s-sbs-worker2 .*$", bundle.files["slurm.conf"], re.M).group(0)
    # the whole node is declared; the CPUs that are not the pod's are CpuSpecList
    cpus = int(re.search(r" CPUs=(\d+) ", node).group(1))
    spec = re.search(r" CpuSpecList=(\S+) ", node).group(1)
    assert cpus - len(parse_cpulist(spec)) == int(slurmd["cpu"]) and slurmd["cpu"].isdigit()
    assert f'"$have" != "{format_cpulist(profile.side_by_side.shapes[0].slurm.cpus)}"' in pod["containers"][0]["command"][2]
    assert f"RealMemory={to_mib(slurmd['memory'])} " in node
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"][0]["values"] == ["slurmk8s-sbs-worker2"]
    assert not any(k.startswith("hosts/kind/systemd") for k in bundle.files)  # no slice: slurmd is a pod


def test_profiles_without_side_by_side_render_no_host_files_and_no_daemonset() -> None:
    bundle = render(read_profile(ROOT / "profiles/kind-dev.yaml"))
    assert not [k for k in bundle.files if k.startswith("hosts/")]
    assert bundle.of_kind("DaemonSet") == []


def test_fence_command_prints_one_table_per_shape() -> None:
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "fence", str(HOST)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    assert out[0] == "cluster shared: side-by-side mode host, partition shared"
    assert "shape dgx: nodes dgx-01,dgx-02" in out and "shape epyc: nodes epyc-01,epyc-02,epyc-03" in out
    rows = {line.split()[0]: line.split() for line in out if line.startswith("  ")}
    assert rows["slurm"][1] == "1-31" and rows["kubernetes"][1] == "33-63"  # the last table: epyc


def test_fence_command_refuses_a_double_booked_profile_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(HOST.read_text().replace('kubernetes: {cpus: "33-63"', 'kubernetes: {cpus: "30-63"'))
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "fence", str(bad)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    at = f"{bad}:39:28: spec.sideBySide.shapes[1].kubernetes.cpus: shape 'epyc': "
    assert run.stderr.splitlines() == [at + "CPUs 30-31 are both Slurm's and Kubernetes'",
                                       at + "CPUs 32 are both the system reserve's and Kubernetes'"]


def test_pod_mode_keeps_every_other_slurm_pod_off_the_shared_nodes_but_not_the_shared_slurmd() -> None:
    profile = read_profile(POD)
    shared = sorted(n for s in profile.side_by_side.shapes for n in s.nodes)
    for obj in render(profile).objects:
        if obj["kind"] not in naming.WORKLOAD_KINDS:
            continue
        preferred = (obj["spec"]["template"]["spec"].get("affinity", {}).get("nodeAffinity", {})
                     .get("preferredDuringSchedulingIgnoredDuringExecution", []))
        avoided = [term["preference"]["matchExpressions"][0]["values"] for term in preferred
                   if term["preference"]["matchExpressions"][0]["operator"] == "NotIn"]
        assert avoided == ([] if obj["kind"] == "DaemonSet" else [shared]), obj["metadata"]["name"]


def test_host_mode_and_no_side_by_side_prefer_no_nodes() -> None:
    for path in (HOST, ROOT / "profiles/kind-dev.yaml"):
        for obj in render(read_profile(path)).objects:
            if obj["kind"] in naming.WORKLOAD_KINDS:
                assert "preferredDuringSchedulingIgnoredDuringExecution" not in str(obj), obj["metadata"]["name"]


def test_pod_mode_may_leave_kubernetes_only_the_system_cpus(tmp_path: Path) -> None:
    """On a 2-CPU node: CPU 0 reserved (Kubernetes' pods share it with the system), CPU 1 Slurm's."""
    text = POD.read_text().replace('cpus: "0-3"', 'cpus: "0-1"').replace('slurm: {cpus: "1-2", memory: 2Gi}',
                                                                        'slurm: {cpus: "1", memory: 2Gi}')
    small = tmp_path / "small.yaml"
    small.write_text(text)
    conf = render(read_profile(small)).files["slurm.conf"]
    assert re.search(r"^NodeName=slurmk8s-sbs-worker2 .* CPUs=2 .*CpuSpecList=0 ", conf, re.M)
    host = tmp_path / "host.yaml"
    host.write_text(text.replace("mode: pod", "mode: host"))
    refused = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "validate", str(host)], capture_output=True, text=True)
    assert refused.returncode == 2 and "Kubernetes needs at least one" in refused.stderr
