"""`scale POOL N` on a pool split over topology leaves: per-leaf targets, drain exactly the nodes that go."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from slurmk8s.actions.interface import PoolCluster
from slurmk8s.actions.scale import pool_range, scale_pool
from slurmk8s.errors import ClusterError, UsageError
from slurmk8s.profile.loader import load_profile
from slurmk8s.render import render
from tests.fakepool import FakePoolCluster

DOC = {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
       "spec": {"pools": [{"name": "cpu", "replicas": 3, "minReplicas": 1, "maxReplicas": 6, "cpus": 1, "memory": "1Gi"}],
                "topology": {"plugin": "tree", "domains": [
                    {"name": "r1", "nodeLabels": {"example.com/rack": "r1"}, "slots": {"cpu": 2}},
                    {"name": "r2", "nodeLabels": {"example.com/rack": "r2"}, "slots": {"cpu": 4}}]}}}


@pytest.fixture
def profile():
    return load_profile(json.dumps(DOC).encode())


@pytest.fixture
def bundle(profile):
    return render(profile)


def test_the_fake_serves_the_pool_interface():
    assert isinstance(FakePoolCluster({}, cluster="t"), PoolCluster)


def test_split_pool_range_is_the_sum_of_its_leaves(profile, bundle):
    assert pool_range(profile, "cpu") == ("t-cpu-r1", 1, 6)
    with pytest.raises(UsageError, match=r"pool cpu: 7 is outside minReplicas..maxReplicas \(1..6\)"):
        scale_pool(profile, bundle, "cpu", 7, FakePoolCluster({}, cluster="t"))


def test_scale_up_fills_leaves_in_node_order(profile, bundle):
    cluster = FakePoolCluster({"t-cpu-r1": 2, "t-cpu-r2": 1}, cluster="t")
    assert scale_pool(profile, bundle, "cpu", 5, cluster, log=lambda line: None) == 3
    assert cluster.replicas == {"t-cpu-r1": 2, "t-cpu-r2": 3}
    sinfo = ["sinfo", "--noheader", "--Node", "--nodes=cpu-0,cpu-1,cpu-2,cpu-3,cpu-4", "--format=%N|%T|%E"]
    assert cluster.commands == [sinfo, sinfo]  # none powering down, then none drained


def test_scale_takes_the_pool_from_the_profile_not_from_annotations_render_wrote(profile, bundle):
    """The rendered StatefulSets' range annotations are for reviewers and the lab; scale keeps the model."""
    bare = dataclasses.replace(bundle, objects=tuple(
        {**o, "metadata": {**o["metadata"], "annotations": {}}} if o["kind"] == "StatefulSet" else o
        for o in bundle.objects))
    cluster = FakePoolCluster({"t-cpu-r1": 2, "t-cpu-r2": 1}, cluster="t")
    assert scale_pool(profile, bare, "cpu", 5, cluster, log=lambda line: None) == 3
    assert cluster.replicas == {"t-cpu-r1": 2, "t-cpu-r2": 3}


def test_scale_up_waits_while_slurm_powers_the_nodes_down_and_reads_replicas_after(profile, bundle):
    # Slurm is suspending cpu-2 (its SuspendProgram will take r2 down to 0): growing to 4 waits for that first.
    cluster = FakePoolCluster({"t-cpu-r1": 2, "t-cpu-r2": 1}, powering_down=("cpu-2",), polls=2, cluster="t",
                              after_power_down=lambda replicas: replicas.update({"t-cpu-r2": 0}))
    lines: list[str] = []
    assert scale_pool(profile, bundle, "cpu", 4, cluster, log=lines.append, poll_s=0) == 2
    assert cluster.replicas == {"t-cpu-r1": 2, "t-cpu-r2": 2}
    assert len(cluster.queries()) == 4  # powering down twice, then not; then the drained nodes' query
    assert lines == ["pool cpu: waiting for Slurm to finish powering down cpu-2", "pool cpu: 2 -> 4 replicas"]


def test_scale_up_gives_up_when_slurm_keeps_powering_down(profile, bundle):
    cluster = FakePoolCluster({"t-cpu-r1": 1, "t-cpu-r2": 0}, powering_down=("cpu-1",), polls=10**6, cluster="t")
    with pytest.raises(ClusterError, match=r"pool cpu: Slurm is still powering down cpu-1 after 0 s; nothing was scaled"):
        scale_pool(profile, bundle, "cpu", 2, cluster, log=lambda line: None, timeout_s=0, poll_s=0)
    assert cluster.replicas == {"t-cpu-r1": 1, "t-cpu-r2": 0}


def test_scale_down_drains_exactly_the_nodes_above_n_in_every_leaf(profile, bundle):
    # Power saving resumed cpu-5 (pod 3 of r2) while r1 is short: the live state is not contiguous.
    cluster = FakePoolCluster({"t-cpu-r1": 1, "t-cpu-r2": 4}, cluster="t")
    assert scale_pool(profile, bundle, "cpu", 3, cluster, log=lambda line: None, poll_s=0) == 5
    assert cluster.replicas == {"t-cpu-r1": 2, "t-cpu-r2": 1}
    sinfo = ["sinfo", "--noheader", "--Node", "--nodes=cpu-0,cpu-1,cpu-2", "--format=%N|%T|%E"]
    assert cluster.commands[:2] == [sinfo, sinfo]  # none powering down, then none drained
    assert cluster.commands[2][:3] == ["scontrol", "update", "nodename=cpu-3,cpu-4,cpu-5"]
    assert cluster.commands[2][3] == "state=drain"


def test_power_program_maps_each_node_to_its_leaf_statefulset(bundle, monkeypatch, tmp_path):
    """The rendered ResumeProgram resumes per segment: cpu-1 is pod 1 of r1, cpu-5 pod 3 of r2."""
    data = bundle.find("ConfigMap", "t-power")["data"]
    for name, text in data.items():  # the ConfigMap's directory: power.py imports its API client from it
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "kubeapi", raising=False)
    namespace: dict = {"__file__": str(tmp_path / "power.py"), "__name__": "power"}
    exec(compile(data["power.py"], "power.py", "exec"), namespace)
    config = json.loads(bundle.find("ConfigMap", "t-power")["data"]["pools.json"])
    config["namespace"] = "t-ns"  # main() reads it from the service account's namespace file
    assert namespace["by_segment"](config, ["cpu-1", "cpu-5", "cpu-2", "other-1"]) == {("cpu", 0): [1], ("cpu", 1): [0, 3]}
    live = {"t-cpu-r1": 1, "t-cpu-r2": 0}
    calls = []

    def api(method, path, body=None):
        sts = path.split("/")[-2]
        calls.append((method, sts, body))
        if body:
            live[sts] = body["spec"]["replicas"]
        return {"spec": {"replicas": live[sts]}}

    class Clock:  # time as power.py sees it: starts where the program was called, moves only by sleep
        now = namespace["CALLED"]

        def monotonic(self):
            return self.now

        def sleep(self, seconds):
            calls.append(("sleep", seconds, self.now))
            self.now += seconds

    monkeypatch.setitem(namespace, "api", api)
    monkeypatch.setitem(namespace, "time", Clock())
    namespace["resume"](config, ["cpu-1", "cpu-5"])
    assert live == {"t-cpu-r1": 2, "t-cpu-r2": 4}
    # No replica is added sooner than BOOT_MARGIN_S after slurmctld called the program: once waited, not twice.
    margin = namespace["BOOT_MARGIN_S"]
    assert margin >= 2
    patches = [i for i, c in enumerate(calls) if c[0] == "PATCH"]
    assert calls[patches[0] - 1][:2] == ("sleep", margin) and calls[patches[1] - 1][:2] == ("sleep", 0.0), calls
