"""A kustomize `namespace:` overlay gives a working cluster (issue 16): DNS and power saving follow the pod's namespace.

dnsConfig and RBAC subjects are data kustomize can move or the runtime can correct; what used to stay
behind (the search domains naming the rendered namespace, the power program's namespace) now follows
the namespace each pod runs in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from apiserver import API_NAME, make_cert
from slurmk8s import naming
from slurmk8s.actions.render import build_tree, render_file
from slurmk8s.output.plain import write_tree
from slurmk8s.render.k8s.common import follow_namespace_script

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
GPU_IB = ROOT / "profiles" / "gpu-ib.yaml"  # namespace hpc, elastic pools, a backup controller


def kubelet_resolv_conf(pod_namespace: str, pod_spec: dict, domain: str = "cluster.local") -> str:
    """resolv.conf as the kubelet writes it for dnsPolicy ClusterFirst plus the pod's dnsConfig."""
    searches = [f"{pod_namespace}.svc.{domain}", f"svc.{domain}", domain] + pod_spec["dnsConfig"]["searches"]
    return f"search {' '.join(searches)}\nnameserver 10.96.0.10\noptions ndots:5\n"


def run_follow_namespace(profile, resolv: Path, namespace: str) -> None:
    script = "\n".join(["set -eu"] + follow_namespace_script(profile, str(resolv))) + "\n"
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            run = subprocess.run([shell, "-c", script], env={**os.environ, "POD_NAMESPACE": namespace},
                                 capture_output=True, text=True, timeout=30)
            assert run.returncode == 0, run.stderr
            return
    pytest.fail("no POSIX shell to run the init script with")


def test_every_slurm_pod_gets_its_namespace_from_the_downward_api() -> None:
    bundle = render_file(GPU_IB)
    for obj in bundle.objects:
        if obj["kind"] not in naming.WORKLOAD_KINDS:
            continue
        spec = obj["spec"]["template"]["spec"]
        if "dnsConfig" not in spec:
            continue
        init = next(c for c in spec["initContainers"] if c["name"] == "init-config")
        assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in init["env"]
        assert "$POD_NAMESPACE" in init["command"][2], obj["metadata"]["name"]


def test_the_init_script_points_the_search_domains_at_the_pods_namespace(tmp_path: Path) -> None:
    from slurmk8s.profile.files import read_profile
    profile = read_profile(str(GPU_IB))
    pod = render_file(GPU_IB).find("StatefulSet", "research-controller")["spec"]["template"]["spec"]
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(kubelet_resolv_conf("hpc-prod", pod))
    run_follow_namespace(profile, resolv, "hpc-prod")
    search = resolv.read_text().splitlines()[0].split()[1:]
    assert search == ["hpc-prod.svc.cluster.local", "svc.cluster.local", "cluster.local",
                      "research-slurmd.hpc-prod.svc.cluster.local", "research-controller.hpc-prod.svc.cluster.local",
                      "research-login-pods.hpc-prod.svc.cluster.local"]
    assert resolv.read_text().splitlines()[1:] == ["nameserver 10.96.0.10", "options ndots:5"]


def test_in_the_rendered_namespace_the_file_is_not_written(tmp_path: Path) -> None:
    from slurmk8s.profile.files import read_profile
    profile = read_profile(str(GPU_IB))
    pod = render_file(GPU_IB).find("StatefulSet", "research-controller")["spec"]["template"]["spec"]
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(kubelet_resolv_conf("hpc", pod))
    os.utime(resolv, (1_000_000_000, 1_000_000_000))
    run_follow_namespace(profile, resolv, "hpc")
    assert resolv.stat().st_mtime == 1_000_000_000  # untouched: nothing to correct


def test_the_cluster_domain_comes_from_the_profile(tmp_path: Path) -> None:
    from slurmk8s.profile.files import read_profile
    path = tmp_path / "p.yaml"
    path.write_text(GPU_IB.read_text().replace("spec:\n", "spec:\n  clusterDomain: corp.example\n", 1))
    profile = read_profile(str(path))
    pod = render_file(path).find("StatefulSet", "research-controller")["spec"]["template"]["spec"]
    assert pod["dnsConfig"]["searches"][0] == "research-slurmd.hpc.svc.corp.example"
    assert "cluster.local" not in json.dumps(pod)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(kubelet_resolv_conf("other", pod, "corp.example"))
    run_follow_namespace(profile, resolv, "other")
    assert "research-slurmd.other.svc.corp.example" in resolv.read_text().split()


def test_the_power_program_scales_in_the_namespace_its_pod_runs_in(tmp_path: Path, monkeypatch) -> None:
    bundle = render_file(GPU_IB)
    power = bundle.find("ConfigMap", "research-power")["data"]
    assert "namespace" not in json.loads(power["pools.json"])
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "namespace").write_text("hpc-prod")
    (sa / "ca.crt").write_bytes(make_cert(tmp_path, [API_NAME])[0].read_bytes())
    for name, text in power.items():  # the ConfigMap's directory: power.py imports its API client from it
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "kubeapi", raising=False)
    program: dict = {"__file__": str(tmp_path / "power.py"), "__name__": "power"}
    exec(compile(power["power.py"], "power.py", "exec"), program)
    calls = []
    monkeypatch.setattr(program["kubeapi"], "SA_DIR", str(sa))
    monkeypatch.setitem(program, "HERE", str(tmp_path))
    monkeypatch.setitem(program, "expand", lambda hostlist: ["a100-3"])
    monkeypatch.setitem(program, "BOOT_MARGIN_S", 0.0)  # the pause before a scale-up (tested in test_topology_scale)
    monkeypatch.setitem(program, "api", lambda method, path, body=None: calls.append((method, path)) or
                        {"spec": {"replicas": 2}})
    program["main"](["power.py", "resume", "a100-3"])
    assert calls[0] == ("GET", "/apis/apps/v1/namespaces/hpc-prod/statefulsets/research-a100/scale")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not on PATH (needed for `kubectl kustomize`)")
def pod_spec_of(obj: dict) -> dict:
    """The pod spec of a workload, Job or CronJob ({} for other kinds)."""
    spec = obj.get("spec", {})
    if obj["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    return spec.get("template", {}).get("spec", {})


def test_a_namespace_overlay_leaves_nothing_in_the_old_namespace(tmp_path: Path) -> None:
    """Every object, RBAC subject and (after the init script) search domain ends up in the overlay's namespace."""
    from slurmk8s.profile.files import read_profile
    write_tree(build_tree(render_file(GPU_IB), "kustomize"), tmp_path / "base")
    (tmp_path / "prod").mkdir()
    (tmp_path / "prod" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: hpc-prod\nresources: [../base]\n")
    run = subprocess.run([KUBECTL, "kustomize", str(tmp_path / "prod")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    objects = [d for d in yaml.safe_load_all(run.stdout) if d]
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == ["hpc-prod"]
    # Cluster-scoped (the node reader of the cordon check): no namespace, and the rendered one stays in
    # their names (docs/gitops.md: one cluster of a name per base).
    cluster_scoped = [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert sorted(o["metadata"]["name"] for o in cluster_scoped) == ["slurmk8s-hpc-research-nodes"] * 2
    objects = [o for o in objects if o not in cluster_scoped]
    for obj in cluster_scoped:
        for subject in obj.get("subjects", []):
            assert subject["namespace"] == "hpc-prod"
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "hpc-prod", obj["metadata"]["name"]
        for subject in obj.get("subjects", []):
            assert subject["namespace"] == "hpc-prod"
    profile = read_profile(str(GPU_IB))
    for obj in objects:
        spec = pod_spec_of(obj)
        if "dnsConfig" in spec:
            resolv = tmp_path / "resolv.conf"
            resolv.write_text(kubelet_resolv_conf("hpc-prod", spec))
            run_follow_namespace(profile, resolv, "hpc-prod")
            assert ".hpc.svc." not in resolv.read_text(), obj["metadata"]["name"]
    # What is left naming the rendered namespace: only the dnsConfig entries the init script corrects.
    rest = [o for o in objects if o["kind"] != "Namespace"]
    for obj in rest:
        pod_spec_of(obj).pop("dnsConfig", None)
    assert '"hpc"' not in json.dumps(rest) and ".hpc." not in json.dumps(rest)


def test_the_lab_gives_init_containers_their_namespace() -> None:
    """The lab runs the rendered env: a downward-API value is the pod's own (here, the rendered namespace)."""
    from slurmk8s.lab.plan import pods_of
    bundle = render_file(GPU_IB)
    pod = next(p for p in pods_of(bundle) if p.name == "research-controller-0")
    init = next(c for c in pod.init if c.name == "init-config")
    assert ("POD_NAMESPACE", "hpc") in init.env
