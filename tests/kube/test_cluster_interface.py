"""Actions reach a cluster only through the client they are given (actions/interface.py), as helm's actions
hold a kube.Interface: Kubernetes serves all of it, the lab its pool part, and a fake can stand in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import GPU_IB, KIND_DEV

from slurmk8s.actions.accounts import run_accounts_apply
from slurmk8s.actions.interface import Cluster, PoolCluster, connect
from slurmk8s.errors import ClusterError
from slurmk8s.kube.kubecluster import KubeCluster
from slurmk8s.lab.access import LabCluster
from slurmk8s.profile.files import read_profile
from slurmk8s.podside.sacctmgr import fresh_tree
from tests.fakepool import FakePoolCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "render"))
from test_accounts import FakeSacctmgr  # noqa: E402


def test_kubernetes_serves_the_whole_interface_and_the_lab_only_its_pool_part(kubeconfig):
    assert isinstance(KubeCluster(kubeconfig), Cluster)
    assert isinstance(LabCluster(), PoolCluster) and not isinstance(LabCluster(), Cluster)


def test_the_factory_builds_the_client_the_flags_ask_for_and_connects_on_first_use(tmp_path):
    assert isinstance(connect(lab=True), LabCluster)
    missing = str(tmp_path / "no-such-kubeconfig")
    cluster = connect(missing, timeout=3600, workers=16)  # no file is read yet: bad input is refused first
    assert isinstance(cluster, KubeCluster) and (cluster.timeout, cluster.pool_size) == (60, 32)
    with pytest.raises(ClusterError, match=f"^kubeconfig {missing}: no such file$"):
        cluster.source


class SlurmOnlyCluster:
    """A cluster with no Kubernetes behind it: Slurm answers from a fake sacctmgr; any other request fails."""

    source, host = "fake context", "https://fake:6443"

    def __init__(self, db: FakeSacctmgr):
        self.db, self.asked = db, []

    def slurm(self, bundle, argv: list[str]) -> str:
        self.asked.append(bundle.cluster)
        code, out, err = self.db.run(argv)
        if code:
            raise ClusterError(err)
        return out

    def __getattr__(self, name: str):
        raise AssertionError(f"accounts apply asked the cluster for {name}")


def test_an_action_runs_against_a_fake_cluster_without_any_api():
    profile = read_profile(GPU_IB)
    cluster = SlurmOnlyCluster(FakeSacctmgr(fresh_tree(profile.name)))
    lines: list[str] = []
    done = run_accounts_apply(GPU_IB, cluster, echo=lines.append)
    assert done == cluster.db.commands and done
    assert lines[0] == "cluster research in namespace hpc (fake context, https://fake:6443)"
    assert set(cluster.asked) == {"research"}  # every command went to the profile's own controller


def test_up_and_scale_read_and_render_the_profile_once(up, monkeypatch):
    """The model read and rendered at the start is the one every later step uses (no second load, no re-parse)."""
    import slurmk8s.actions.up
    import slurmk8s.profile.files
    import slurmk8s.render
    from slurmk8s.actions.scale import run_scale

    calls: list[str] = []
    read, render = slurmk8s.profile.files.read_profile, slurmk8s.render.render
    # Counted wherever a module imported them (at its top: each holds its own reference).
    for module in [m for name, m in sys.modules.items() if name.startswith("slurmk8s.")]:
        if getattr(module, "read_profile", None) is read:
            monkeypatch.setattr(module, "read_profile", lambda path, namespace=None: calls.append("read") or read(path, namespace))
        if getattr(module, "render", None) is render:
            monkeypatch.setattr(module, "render", lambda profile: calls.append("render") or render(profile))
    _, lines = up(KIND_DEV, exec_fn=lambda command: "cpu-0|idle|none\ncpu-1|idle|none\n", timeout=60)
    assert "cluster dev is ready" in lines, lines[-3:]  # every step ran, the wait and the accounts included
    assert calls == ["read", "render"]
    calls.clear()
    assert isinstance(FakePoolCluster({}), PoolCluster)
    cluster = FakePoolCluster({"dev-cpu": 1}, cluster="dev")
    assert run_scale(KIND_DEV, "cpu", 2, cluster, echo=lambda line: None) == 1
    assert calls == ["read", "render"] and cluster.replicas == {"dev-cpu": 2}
