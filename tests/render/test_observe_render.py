"""spec.metrics and spec.healthChecks rendered: Slurm's keys, the Service, monitors, policy, dashboard,
and the health check script's drain/resume logic run against stand-in sinfo/scontrol."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from crdschema import validate_custom_resource
from slurmk8s.actions.render import render_file
from slurmk8s.profile.loader import load_profile
from slurmk8s.profile.observe import METRIC_PATHS, exported_metrics
from slurmk8s.render import render
from slurmk8s.render.k8s.health import render_health_script

ROOT = Path(__file__).resolve().parents[2]
GPU_IB = ROOT / "profiles/gpu-ib.yaml"

BASE = """\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: obs}
spec:
  metrics: {enabled: true, monitor: MONITOR, scraperNamespace: prom, labels: {release: kps}}
  healthChecks: {enabled: true}
  pools:
    - {name: cpu, replicas: 1, cpus: 2, memory: 2Gi}
    - name: gpu
      replicas: 1
      cpus: 2
      memory: 2Gi
      gpus: {count: 2}
      healthChecks: [{name: nfs, command: "test -d /nfs"}]
"""


def bundle_of(monitor: str = "ServiceMonitor", text: str = BASE):
    return render(load_profile(text.replace("MONITOR", monitor).encode()))


def test_gpu_ib_exports_the_metric_its_keda_trigger_queries():
    bundle = render_file(GPU_IB)
    assert "\nMetricsType=metrics/openmetrics\n" in bundle.files["slurm.conf"]
    trigger = bundle.of_kind("ScaledObject")[0]["spec"]["triggers"][0]["metadata"]["query"]
    assert "slurm_partition_jobs_pending" in trigger and 'slurm_cluster="research"' in trigger
    monitor = bundle.find("ServiceMonitor", "research-metrics")
    assert [e["path"] for e in monitor["spec"]["endpoints"]] == list(METRIC_PATHS)
    # the relabelling gives every series the slurm_cluster label the trigger selects on
    assert {r["replacement"] for e in monitor["spec"]["endpoints"] for r in e["relabelings"]} == {"research"}


@pytest.mark.parametrize("monitor", ["ServiceMonitor", "PodMonitor"])
def test_monitors_validate_strictly_and_reach_slurmctlds_port(monitor):
    bundle = bundle_of(monitor)
    obj = bundle.find(monitor, "obs-metrics")
    assert validate_custom_resource(obj) == []
    assert obj["metadata"]["labels"]["release"] == "kps"
    service = bundle.find("Service", "obs-metrics")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 6817, "targetPort": 6817, "protocol": "TCP"}]
    controller = bundle.find("StatefulSet", "obs-controller")
    pod_labels = controller["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    if monitor == "ServiceMonitor":
        assert obj["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert {e["port"] for e in obj["spec"]["endpoints"]} == {"metrics"}
    else:
        assert obj["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        ports = {p["name"] for c in controller["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        assert {e["port"] for e in obj["spec"]["podMetricsEndpoints"]} <= ports


def test_a_monitor_outside_its_schema_fails():
    obj = bundle_of().find("ServiceMonitor", "obs-metrics")
    obj["spec"]["endpoints"][0]["pth"] = "/metrics"
    assert any("pth" in e for e in validate_custom_resource(obj))


def test_monitor_none_renders_the_service_only():
    bundle = bundle_of("none")
    assert bundle.of_kind("ServiceMonitor") == bundle.of_kind("PodMonitor") == []
    assert bundle.find("Service", "obs-metrics")


def test_the_scrapers_namespace_is_admitted_to_slurmctlds_port_only():
    policy = bundle_of().find("NetworkPolicy", "obs-metrics")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/instance": "obs",
                                                            "app.kubernetes.io/component": "controller"}
    assert policy["spec"]["ingress"] == [{
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prom"}}}],
        "ports": [{"protocol": "TCP", "port": 6817}]}]


def test_metrics_off_renders_nothing_of_them():
    bundle = bundle_of(text=BASE.replace("enabled: true, monitor", "enabled: false, monitor")
                       .replace(", monitor: MONITOR, scraperNamespace: prom, labels: {release: kps}", ""))
    assert "MetricsType" not in bundle.files["slurm.conf"]
    assert not [o for o in bundle.objects if o["metadata"]["name"] == "obs-metrics"]


def test_the_dashboard_queries_only_the_clusters_series():
    text = BASE.replace("labels: {release: kps}", "labels: {release: kps}, dashboard: true")
    cm = bundle_of(text=text).find("ConfigMap", "obs-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(cm["data"]["slurm-obs.json"])
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert exprs and all('slurm_cluster="obs"' in e for e in exprs)
    # every metric a panel queries is one slurmctld 26.05 serves (profile/openmetrics.json, from the lab)
    named = {m for e in exprs for m in re.findall(r"\b(slurm_[a-z0-9_]+)\{", e)}
    assert named and named <= exported_metrics(), named - exported_metrics()
    assert {p["title"] for p in board["panels"]} >= {"Queue by partition", "Scheduler cycle", "GPU allocation"}


def test_each_pool_mounts_its_own_health_script():
    bundle = bundle_of()
    conf = bundle.files["slurm.conf"]
    assert "\nHealthCheckProgram=/opt/slurmk8s/health/check\nHealthCheckInterval=60\n" in conf
    scripts = bundle.find("ConfigMap", "obs-health")["data"]
    assert sorted(scripts) == ["cpu.sh", "gpu.sh", "kubeapi.py"]  # the cordon check's API client (drainOnCordon)
    assert "GPU_COUNT=2" in scripts["gpu.sh"] and "GPU_COUNT=0" in scripts["cpu.sh"]
    assert "test -d /nfs" in scripts["gpu.sh"] and "test -d /nfs" not in scripts["cpu.sh"]
    for pool in ("cpu", "gpu"):
        pod = bundle.find("StatefulSet", f"obs-{pool}")["spec"]["template"]["spec"]
        volume = next(v for v in pod["volumes"] if v["name"] == "health")
        assert volume["configMap"]["items"] == [{"key": f"{pool}.sh", "path": "check"}]
        slurmd = next(c for c in pod["containers"] if c["name"] == "slurmd")
        assert {"name": "health", "mountPath": "/opt/slurmk8s/health", "readOnly": True} in slurmd["volumeMounts"]


def test_changing_a_pools_check_rolls_that_pool_only():
    def hashes(text):
        b = bundle_of(text=text)
        return {p: b.find("StatefulSet", f"obs-{p}")["spec"]["template"]["metadata"]["annotations"]
                ["slurmk8s.io/health-hash"] for p in ("cpu", "gpu")}
    before, after = hashes(BASE), hashes(BASE.replace("test -d /nfs", "test -d /scratch"))
    assert before["cpu"] == after["cpu"] and before["gpu"] != after["gpu"]


# --- the script itself, with stand-ins for sinfo and scontrol ---------------------------------------

def run_script(tmp_path: Path, pool: str, node_state: str, reason: str, fail_marker: bool) -> list[str]:
    """Run a pool's rendered script with fake Slurm commands; the scontrol calls it made."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    calls.write_text("")
    (bin_dir / "sinfo").write_text(
        "#!/bin/sh\ncase \"$*\" in *--format=%N\\|%T\\|%E*) echo 'gpu-0|" + node_state + "|" + reason + "' ;; *) exit 1 ;; esac\n")
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {calls}\n")
    for f in ("sinfo", "scontrol"):
        os.chmod(bin_dir / f, 0o755)
    profile = load_profile(BASE.replace("MONITOR", "none")
                           .replace("test -d /nfs", f"test ! -e {tmp_path}/broken").encode())
    script = render_health_script(profile, profile.pool(pool))
    # This machine has neither the pod's mounts nor GPUs: check what it does have.
    script = script.replace("MOUNTS='/etc/slurm /var/spool/slurmd /dev/shm'", "MOUNTS='/proc'")
    script = script.replace("DISK_PATHS='/var/spool/slurmd /tmp'", f"DISK_PATHS='{tmp_path}'")
    script = script.replace("GPU_COUNT=2", "GPU_COUNT=0").replace("MIN_FREE_KIB=1048576", "MIN_FREE_KIB=1")
    if fail_marker:
        (tmp_path / "broken").touch()
    done = subprocess.run(["sh", "-c", script], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURMD_NODENAME": "gpu-0"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines()


def test_a_failing_check_drains_naming_it(tmp_path):
    assert run_script(tmp_path, "gpu", "idle", "none", fail_marker=True) == [
        "update nodename=gpu-0 state=drain reason=slurmk8s-health: check nfs failed"]


def test_a_passing_check_resumes_only_its_own_drain(tmp_path):
    assert run_script(tmp_path, "gpu", "drained", "slurmk8s-health: check nfs failed", fail_marker=False) == [
        "update nodename=gpu-0 state=resume"]
    assert run_script(tmp_path, "gpu", "drained", "admin: bad fan", fail_marker=False) == []
    assert run_script(tmp_path, "gpu", "idle", "none", fail_marker=False) == []


def test_an_admins_drain_is_not_taken_over(tmp_path):
    assert run_script(tmp_path, "gpu", "drained", "admin: bad fan", fail_marker=True) == []


def test_the_disk_floor_drains(tmp_path):
    profile = load_profile(BASE.replace("MONITOR", "none").encode())
    script = render_health_script(profile, profile.pool("cpu"))
    script = script.replace("MOUNTS='/etc/slurm /var/spool/slurmd /dev/shm'", "MOUNTS='/proc'")
    script = script.replace("DISK_PATHS='/var/spool/slurmd /tmp'", f"DISK_PATHS='{tmp_path}'")
    script = script.replace("MIN_FREE_KIB=1048576", f"MIN_FREE_KIB={2**50}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'cpu-0|idle|none'\n")
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" > {tmp_path}/calls\n")
    for f in ("sinfo", "scontrol"):
        os.chmod(bin_dir / f, 0o755)
    subprocess.run(["sh", "-c", script], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURMD_NODENAME": "cpu-0"},
                   check=True, capture_output=True, timeout=30)
    call = (tmp_path / "calls").read_text()
    assert call.startswith(f"update nodename=cpu-0 state=drain reason=slurmk8s-health: {tmp_path} has ")
    assert "MiB free, needs" in call
