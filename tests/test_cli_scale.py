"""`scale` after a scale-down that failed half-way (F11/N18): the nodes its own drain left DRAINED come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakepool import FakePoolCluster
from slurmk8s.actions.scale import DRAIN_REASON, scale_pool
from slurmk8s.errors import ClusterError
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render

KIND_DEV = Path(__file__).resolve().parents[1] / "profiles" / "kind-dev.yaml"


class SqueueFails(FakePoolCluster):
    """squeue cannot be run (slurmctld restarting, an exec refused) while `failing` is set."""

    failing = True

    def slurm(self, bundle, argv):
        out = super().slurm(bundle, argv)
        if argv[0] == "scontrol" and "state=drain" in argv:
            self.drained.update({n: DRAIN_REASON for n in argv[2].removeprefix("nodename=").split(",")})
        if argv[0] == "squeue" and self.failing:
            raise ClusterError("exec 'squeue' in pod slurm/dev-controller-0: exit status 1: slurm_load_jobs error")
        return out


@pytest.fixture(scope="module")
def dev():
    profile = read_profile(KIND_DEV)
    return profile, render(profile)


def test_a_failed_scale_down_says_which_nodes_stay_drained_and_scaling_up_resumes_them(dev) -> None:
    profile, bundle = dev
    cluster = SqueueFails({"dev-cpu": 4}, cluster="dev")
    with pytest.raises(ClusterError) as failed:
        scale_pool(profile, bundle, "cpu", 1, cluster, log=lambda line: None, poll_s=0)
    assert str(failed.value) == (
        "exec 'squeue' in pod slurm/dev-controller-0: exit status 1: slurm_load_jobs error; the pool keeps 4 "
        "replicas and cpu-1,cpu-2,cpu-3 stay DRAINED (reason \"slurmk8s scale: pod will be removed\"): "
        "`slurmk8s scale PROFILE cpu 4` resumes them, or `scontrol update nodename=cpu-1,cpu-2,cpu-3 state=resume`")
    assert cluster.replicas == {"dev-cpu": 4} and set(cluster.drained) == {"cpu-1", "cpu-2", "cpu-3"}
    cluster.failing = False
    cluster.drained["cpu-0"] = "bad DIMM (admin)"  # an administrator's drain stays
    lines: list[str] = []
    assert scale_pool(profile, bundle, "cpu", 4, cluster, log=lines.append, poll_s=0) == 4
    assert ["scontrol", "update", "nodename=cpu-1,cpu-2,cpu-3", "state=resume"] in cluster.commands
    assert cluster.drained == {"cpu-0": "bad DIMM (admin)"}
    assert lines == ["pool cpu: cpu-1,cpu-2,cpu-3 left drained by an earlier scale-down; resumed",
                     "pool cpu: 4 -> 4 replicas"]


def test_scaling_to_a_count_between_resumes_only_the_nodes_that_stay(dev) -> None:
    profile, bundle = dev
    cluster = FakePoolCluster({"dev-cpu": 4}, cluster="dev", drained={n: DRAIN_REASON for n in ("cpu-1", "cpu-2", "cpu-3")})
    scale_pool(profile, bundle, "cpu", 2, cluster, log=lambda line: None, poll_s=0)
    resumes = [c for c in cluster.commands if c[-1] == "state=resume"]
    assert resumes[0] == ["scontrol", "update", "nodename=cpu-1", "state=resume"]  # cpu-2, cpu-3 go: drained anew
    assert cluster.replicas == {"dev-cpu": 2}
