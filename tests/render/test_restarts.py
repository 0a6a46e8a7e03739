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


def test_an_option_that_needs_slurmctld_restarted_restarts_it_only_before_23_11():
    old = "ClusterName=dev\nSchedulerParameters=bf_continue,bf_interval=30\n"
    new = old.replace("bf_interval=30", "bf_interval=30,no_backup_scheduling")
    assert restarts.restart_reasons(old, new, restarts.CONTROLLER, "23.02") == ["SchedulerParameters changed"]
    assert restarts.restart_reasons(old, new, restarts.CONTROLLER, "23.11") == []
    assert restarts.restart_reasons(old, new, restarts.SLURMD, "23.02") == []
    other = old.replace("bf_interval=30", "bf_interval=30,bf_busy_nodes")
    assert restarts.restart_reasons(old, other, restarts.CONTROLLER, "23.02") == []


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


# Which pod templates a one-field profile change replaces. A changed template replaces every pod of its
# workload (a drain-first rollout of a whole pool), so only what a running pod cannot take in place may
# reach it: render/restarts.py for slurm.conf keys, and the start-time inputs (users, images, pod spec).
GPU_IB = ROOT / "profiles" / "gpu-ib.yaml"
TOPOLOGY = ROOT / "profiles" / "kind-topology.yaml"
LEGACY = ROOT / "profiles" / "legacy-munge.yaml"  # Slurm 22.05
R = "StatefulSet/research-"
GPU_POOLS = {R + "h100", R + "a100"}
CLIENTS = {R + "login", R + "accounting", "Deployment/research-restapi"}
EVERY_SLURM_POD = GPU_POOLS | CLIENTS | {R + "controller"}


def _pool(spec, name):
    return next(p for p in spec["pools"] if p["name"] == name)


def _config(spec, **keys):
    spec["slurm"].setdefault("config", {}).update(keys)


def _leaf(spec, name):
    return next(c for d in spec["topology"]["domains"] for c in d.get("children", []) if c["name"] == name)


FIELD_CHANGES = [
    # (id, profile, change of spec, templates that change)
    ("maxReplicas", GPU_IB, lambda s: _pool(s, "h100").update(maxReplicas=72), set()),
    ("maxReplicas-down", GPU_IB, lambda s: _pool(s, "a100").update(maxReplicas=8), set()),
    ("replicas", GPU_IB, lambda s: _pool(s, "h100").update(replicas=5), set()),
    ("minReplicas", GPU_IB, lambda s: _pool(s, "h100").update(minReplicas=1), set()),
    ("features", GPU_IB, lambda s: _pool(s, "h100").update(features=["h100", "ib", "nvl"]), set()),
    ("partition-maxTime", GPU_IB, lambda s: s["partitions"][0].update(maxTime="3-00:00:00"), set()),
    ("partition-config", GPU_IB, lambda s: s["partitions"][1]["config"].update(PriorityTier=3), set()),
    ("partition-added", GPU_IB, lambda s: s["partitions"].append({"name": "a100", "pools": ["a100"]}), set()),
    ("qos", GPU_IB, lambda s: s["scheduling"]["qos"].append({"name": "debug", "priority": 5}), set()),
    ("accounts", GPU_IB, lambda s: s["scheduling"]["accounts"].append({"name": "bio", "fairshare": 5}), set()),
    ("account-users", GPU_IB, lambda s: s["scheduling"]["accounts"][1]["users"].append("lin"), set()),
    ("users-defaultAccount", GPU_IB, lambda s: s["scheduling"]["users"][0].update(defaultAccount="physics"), set()),
    ("priority-weights", GPU_IB, lambda s: s["scheduling"]["priority"]["weights"].update(fairshare=5), set()),
    ("power-saving", GPU_IB, lambda s: s.update(powerSaving={"suspendTime": 900}), set()),
    # The login Service is no part of a pod template.
    ("login-service", GPU_IB, lambda s: s["login"]["service"].update(
        annotations={"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}, loadBalancerIP="203.0.113.10",
        loadBalancerSourceRanges=["198.51.100.0/24"], externalTrafficPolicy="Cluster"), set()),
    # Options added to the generator's list-valued keys: reconfigure takes them (render/restarts.py RESTART_OPTIONS).
    ("scheduler-parameters", GPU_IB, lambda s: _config(s, SchedulerParameters="bf_busy_nodes,max_rpc_cnt=150"), set()),
    ("slurmctld-parameters", GPU_IB, lambda s: _config(s, SlurmctldParameters="enable_stepmgr"), set()),
    ("no-backup-scheduling", GPU_IB, lambda s: _config(s, SchedulerParameters="no_backup_scheduling"), set()),
    ("no-backup-scheduling-22.05", LEGACY, lambda s: _config(s, SchedulerParameters="no_backup_scheduling"),
     {"StatefulSet/legacy-controller"}),
    ("scheduler-parameters-22.05", LEGACY, lambda s: _config(s, SchedulerParameters="bf_busy_nodes"), set()),
    # Before 23.11 a changed node set needs slurmctld restarted (render/restarts.py): it and only it.
    ("maxReplicas-22.05", LEGACY, lambda s: _pool(s, "cpu").update(maxReplicas=6), {"StatefulSet/legacy-controller"}),
    ("topology-last-leaf-grows", TOPOLOGY, lambda s: (_leaf(s, "subblock-b1")["slots"].update(cpu=2),
                                                      _pool(s, "cpu").update(maxReplicas=5)), set()),
    # Declared users, groups and keys: login and slurmd reload them (render/k8s/identity.py); a new user restarts
    # the daemons that read users only at start (slurmctld, slurmdbd, slurmrestd), which running jobs survive.
    ("identity-users", GPU_IB, lambda s: s["identity"]["users"].append({"name": "zoe", "uid": 2005}),
     {R + "controller", R + "accounting", "Deployment/research-restapi"}),
    ("identity-ssh-key", GPU_IB, lambda s: s["identity"]["users"][0].setdefault("sshKeys", []).append(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYZ zoe@example.org"), set()),
    # Pod i of a later leaf becomes another Slurm node (its first node moves): a new identity.
    ("topology-first-leaf-grows", TOPOLOGY, lambda s: (_leaf(s, "subblock-a1")["slots"].update(cpu=3),
                                                       _pool(s, "cpu").update(maxReplicas=5)),
     {"StatefulSet/topo-cpu-subblock-a2", "StatefulSet/topo-cpu-subblock-b1"}),
    # What pods read only at start, or their pod spec: meant to restart, and only those pods.
    ("ssh-keys", GPU_IB, lambda s: s["login"].setdefault("authorizedKeys", []).append(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYZ ops@example.org"), {R + "login"}),
    ("gpu-type", GPU_IB, lambda s: _pool(s, "a100")["gpus"].update(type="a100x"), GPU_POOLS),  # gres.conf
    ("tolerations", GPU_IB, lambda s: _pool(s, "a100").update(tolerations=[{"key": "x", "operator": "Exists"}]),
     {R + "a100"}),
    ("pool-health-check", GPU_IB, lambda s: _pool(s, "a100")["healthChecks"][0].update(command="true"), {R + "a100"}),
    ("image-tag", GPU_IB, lambda s: s["slurm"].update(images={"tag": "26.05.9-debian12"}), EVERY_SLURM_POD),
]


def _changed_templates(tmp_path, source, change) -> set[str]:
    before = templates(rendered(tmp_path, source=source))
    after = templates(rendered(tmp_path, lambda p: change(p["spec"]), source))
    assert set(before) == set(after)
    return {ref for ref in before if before[ref] != after[ref]}


@pytest.mark.parametrize(("source", "change", "expected"), [c[1:] for c in FIELD_CHANGES], ids=[c[0] for c in FIELD_CHANGES])
def test_a_profile_field_changes_only_the_pod_templates_that_must_restart(tmp_path, source, change, expected):
    assert _changed_templates(tmp_path, source, change) == expected


# spec.slurm.config keys that the profile lets through, against render/restarts.py's own list.
@pytest.mark.parametrize(("key", "value"), [("MaxJobCount", "20000"), ("MpiDefault", "pmix"),
                                            ("SelectTypeParameters", "CR_Core"), ("SwitchType", "switch/none")],
                         ids=lambda v: v)
def test_a_slurm_config_key_restarts_what_restarts_py_says(tmp_path, key, value):
    daemons = restarts.RESTART_KEYS.get(key.lower(), frozenset())
    expected = (GPU_POOLS if restarts.SLURMD in daemons else set()) | (CLIENTS if restarts.CLIENT in daemons else set())
    if restarts.CONTROLLER in daemons:
        expected.add(R + "controller")
    changed = _changed_templates(tmp_path, GPU_IB, lambda s: s["slurm"].setdefault("config", {}).update({key: value}))
    assert changed == expected
