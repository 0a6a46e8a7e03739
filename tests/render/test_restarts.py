"""The config-hash split: a pod template changes only for what needs its daemon restarted."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from slurmk8s import naming
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render, restarts

ROOT = Path(__file__).resolve().parents[2]
KIND_DEV = ROOT / "profiles" / "kind-dev.yaml"
TEMPLATE_KINDS = ("StatefulSet", "DaemonSet", "Deployment")


def rendered(tmp_path: Path, change=None, source: Path = KIND_DEV):
    """The bundle of source after change(profile dict)."""
    data = yaml.safe_load(source.read_text())
    if change:
        change(data)
    path = tmp_path / f"p{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return render(read_profile(str(path)))


def templates(bundle) -> dict[str, dict]:
    return {f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"] for o in bundle.objects
            if o["kind"] in TEMPLATE_KINDS}


def slurm_conf(bundle) -> str:
    return bundle.find("ConfigMap", naming.config_map(bundle.cluster))["data"]["slurm.conf"]


def test_a_partition_maxtime_edit_changes_slurm_conf_and_no_pod_template(tmp_path):
    before = rendered(tmp_path)
    after = rendered(tmp_path, lambda p: p["spec"]["partitions"][0].update(maxTime="02:00:00"))
    assert "MaxTime=01:00:00" in slurm_conf(before) and "MaxTime=02:00:00" in slurm_conf(after)
    assert templates(after) == templates(before)


def test_scheduling_weights_and_node_features_are_taken_in_place(tmp_path):
    before = rendered(tmp_path)
    after = rendered(tmp_path, lambda p: (p["spec"]["pools"][0].update(features=["fast"]),
                                          p["spec"].setdefault("scheduling", {}).update(scheduler={"interval": 60})))
    assert slurm_conf(after) != slurm_conf(before)
    assert templates(after) == templates(before)


def test_an_auth_type_edit_restarts_slurmd_controller_and_clients(tmp_path):
    images = {"registry": "registry.example.org/hpc", "tag": "26.05-munge"}  # images with munged
    before = rendered(tmp_path, lambda p: p["spec"]["slurm"].update(images=images))
    after = rendered(tmp_path, lambda p: p["spec"]["slurm"].update(images=images, auth="munge"))
    changed = {ref for ref, t in templates(after).items() if t != templates(before)[ref]}
    assert {"StatefulSet/dev-cpu", "StatefulSet/dev-controller", "StatefulSet/dev-login"} <= changed
    hash_of = lambda b, ref: templates(b)[ref]["metadata"]["annotations"][naming.ANNOTATION_CONFIG_HASH]
    assert hash_of(after, "StatefulSet/dev-cpu") != hash_of(before, "StatefulSet/dev-cpu")


@pytest.mark.parametrize(("key", "daemons"), [
    ("AuthType", {restarts.CONTROLLER, restarts.SLURMD, restarts.CLIENT}),
    ("SlurmdPort", {restarts.CONTROLLER, restarts.SLURMD}),
    ("TaskPlugin", {restarts.SLURMD}),
    ("SelectTypeParameters", {restarts.CONTROLLER}),
    ("MaxJobCount", set()),
], ids=lambda v: v if isinstance(v, str) else "")
def test_restart_reasons_name_the_key_for_exactly_the_daemons_it_restarts(key, daemons):
    old = f"ClusterName=dev\n{key}=a\nPartitionName=debug Nodes=cpu-[0-1] MaxTime=01:00:00\n"
    new = old.replace(f"{key}=a", f"{key}=b")
    for daemon in (restarts.CONTROLLER, restarts.SLURMD, restarts.CLIENT):
        want = [f"{key} changed"] if daemon in daemons else []
        assert restarts.restart_reasons(old, new, daemon, "26.05") == want, daemon


def test_a_new_node_restarts_slurmctld_only_before_23_11(tmp_path):
    old = "ClusterName=dev\nNodeName=cpu-[0-3] CPUs=2\n"
    new = "ClusterName=dev\nNodeName=cpu-[0-7] CPUs=2\n"
    assert restarts.restart_reasons(old, new, restarts.CONTROLLER, "22.05") == [f"{restarts.NODE_SET} changed"]
    assert restarts.restart_reasons(old, new, restarts.CONTROLLER, "24.11") == []
    assert restarts.restart_reasons(old, new, restarts.SLURMD, "22.05") == []


def test_slurmd_pods_hold_no_slurm_files_and_start_configless(tmp_path):
    bundle = rendered(tmp_path)
    sts = bundle.find("StatefulSet", "dev-cpu")
    pod = sts["spec"]["template"]["spec"]
    assert "slurm-config" not in {v["name"] for v in pod["volumes"]}
    slurmd = pod["containers"][0]
    assert slurmd["command"][:4] == ["slurmd", "-D", "-b", "--conf-server"]
    assert slurmd["command"][4] == "dev-controller-0.dev-controller:6817" or slurmd["command"][4].startswith(
        "dev-controller-0.")
    assert "enable_configless" in [line for line in slurm_conf(bundle).splitlines()
                                   if line.startswith("SlurmctldParameters=")][0]
    # the preStop hook waits for jobs within the grace period, which comes from one constant
    from slurmk8s.render.k8s.slurmd import GRACE_SECONDS, STOP_MARGIN_SECONDS
    assert pod["terminationGracePeriodSeconds"] == GRACE_SECONDS
    assert f"+ {GRACE_SECONDS - STOP_MARGIN_SECONDS} ))" in slurmd["lifecycle"]["preStop"]["exec"]["command"][2]


def test_the_controller_reads_the_live_configmap_through_links(tmp_path):
    pod = rendered(tmp_path).find("StatefulSet", "dev-controller")["spec"]["template"]["spec"]
    slurmctld = pod["containers"][0]
    assert {"name": "slurm-config", "mountPath": "/mnt/slurm-config", "readOnly": True} in slurmctld["volumeMounts"]
    script = pod["initContainers"][0]["command"][2]
    assert "ln -sfn /mnt/slurm-config/$f /etc/slurm/$f" in script and "cp /mnt/slurm-config" not in script
