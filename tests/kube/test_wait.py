"""Waiting until usable: pod readiness through the stub, Slurm registration through a fake controller exec.

The stub serves no websocket exec, so the `sinfo` side is a function the tests pass in.
"""

from __future__ import annotations

import pytest

from apistub import make_pod
from conftest import KIND_DEV
from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ClusterError
from slurmk8s.kube.wait import SINFO_NODES, Waiter, parse_sinfo_nodes, unregistered
from slurmk8s.render import render

APPS = "/apis/apps/v1/namespaces/slurm"
PODS = "/api/v1/namespaces/slurm/pods"


class FakeTime:
    """A clock that moves only when the waiter sleeps."""

    def __init__(self, on_sleep=None):
        self.now = 0.0
        self.on_sleep = on_sleep or (lambda n: None)
        self.sleeps = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.sleeps)


@pytest.fixture
def not_ready_cluster(stub, up):
    """kind-dev applied, with every workload reporting 0 ready and no pods."""
    stub.auto_ready = False
    up(KIND_DEV)
    for name in stub.names(APPS + "/statefulsets"):
        stub.store[("", "", APPS + "/statefulsets")][name]["status"] = {"observedGeneration": 1}
    return render(read_profile(KIND_DEV))


def make_ready(stub, bundle):
    """Every workload Ready with its pods, as the stub's auto_ready would."""
    for sts in bundle.of_kind("StatefulSet"):
        n = sts["spec"]["replicas"]
        stub.store[("", "", APPS + "/statefulsets")][sts["metadata"]["name"]]["status"] = {
            "observedGeneration": 1, "readyReplicas": n, "updatedReplicas": n}
        for i in range(n):
            stub.seed(PODS, make_pod(f"{sts['metadata']['name']}-{i}", sts["spec"]["template"]["metadata"]["labels"], True))


def waiter(kubeconfig, bundle, exec_fn, fake, timeout=60, lines=None):
    from slurmk8s.kube.client import Access, connect
    return Waiter(connect(Access(kubeconfig)), bundle, exec_fn, timeout=timeout, interval=5,
                  progress=(lines if lines is not None else []).append, clock=fake.clock, sleep=fake.sleep)


def test_waits_for_pods_then_for_every_running_node_in_slurm(stub, kubeconfig, not_ready_cluster):
    bundle = not_ready_cluster
    answers = iter(["cpu-0 idle\ncpu-1 unknown*\n", "cpu-0 idle\ncpu-1 idle\ncpu-2 unknown*\n"])
    commands = []

    def sinfo(command):
        commands.append(command)
        return next(answers)
    fake = FakeTime(on_sleep=lambda n: make_ready(stub, bundle) if n == 2 else None)
    lines: list[str] = []
    waiter(kubeconfig, bundle, sinfo, fake, lines=lines).wait()
    assert lines == [
        "pods ready: mariadb 0/1, accounting 0/1, controller 0/1, worker 0/2, login 0/1",
        "pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 2/2, login 1/1",
        "slurm: waiting for cpu-1 (unknown*)",
        "slurm: all 2 running node(s) registered with slurmctld",
    ]
    assert commands == [SINFO_NODES, SINFO_NODES]
    assert fake.sleeps == 3


def test_timeout_names_the_pod_and_why(stub, kubeconfig, not_ready_cluster):
    bundle = not_ready_cluster
    make_ready(stub, bundle)
    sts = stub.store[("", "", APPS + "/statefulsets")]["dev-controller"]
    sts["status"] = {"observedGeneration": 1, "readyReplicas": 0, "updatedReplicas": 1}
    labels = sts["spec"]["template"]["metadata"]["labels"]
    stub.seed(PODS, make_pod("dev-controller-0", labels, ready=False,
                             waiting=("ImagePullBackOff", 'Back-off pulling image "ghcr.io/x/slurmctld:26.05"')))
    stub.seed("/api/v1/namespaces/slurm/events", {"kind": "Event", "metadata": {"name": "e1"},
              "involvedObject": {"name": "dev-controller-0"}, "reason": "Failed", "lastTimestamp": "2026-01-01T00:00:02Z",
              "message": "Failed to pull image: not found"})
    stub.seed("/api/v1/namespaces/slurm/events", {"kind": "Event", "metadata": {"name": "e2"},
              "involvedObject": {"name": "dev-cpu-0"}, "reason": "Other", "message": "about another pod"})
    fake = FakeTime()
    with pytest.raises(ClusterError) as caught:
        waiter(kubeconfig, bundle, lambda c: "", fake, timeout=12).wait()
    assert str(caught.value).splitlines() == [
        "timed out after 12 s waiting for StatefulSet/dev-controller (0/1 ready)",
        '  pod dev-controller-0 not Ready: container main waiting: ImagePullBackOff Back-off pulling image '
        '"ghcr.io/x/slurmctld:26.05"; last events: Failed: Failed to pull image: not found',
    ]
    assert fake.now >= 12


def test_timeout_names_unschedulable_pods_and_missing_ones(stub, kubeconfig, not_ready_cluster):
    bundle = not_ready_cluster
    make_ready(stub, bundle)
    sts = stub.store[("", "", APPS + "/statefulsets")]["dev-cpu"]
    sts["status"] = {"observedGeneration": 1, "readyReplicas": 0, "updatedReplicas": 0}
    stub.store[("", "", PODS)].pop("dev-cpu-1")
    stub.seed(PODS, make_pod("dev-cpu-0", sts["spec"]["template"]["metadata"]["labels"], ready=False,
                             unschedulable="0/4 nodes are available: 4 Insufficient cpu."))
    with pytest.raises(ClusterError) as caught:
        waiter(kubeconfig, bundle, lambda c: "", FakeTime(), timeout=5).wait()
    lines = str(caught.value).splitlines()
    assert lines[1] == "  pod dev-cpu-0 not Ready: not scheduled: Unschedulable: 0/4 nodes are available: 4 Insufficient cpu."
    assert lines[2] == "  StatefulSet/dev-cpu has 1 of 2 pods"


def test_timeout_when_slurm_never_hears_from_a_node(stub, kubeconfig, not_ready_cluster):
    make_ready(stub, not_ready_cluster)
    with pytest.raises(ClusterError, match=r"slurmctld does not know every running node: cpu-1 \(down\*\)$"):
        waiter(kubeconfig, not_ready_cluster, lambda c: "cpu-0 idle\ncpu-1 down*\n", FakeTime(), timeout=10).wait()


def test_exec_failures_while_the_controller_starts_are_retried(stub, kubeconfig, not_ready_cluster):
    make_ready(stub, not_ready_cluster)
    calls = []

    def flaky(command):
        calls.append(command)
        if len(calls) < 3:
            raise ClusterError("exec: slurm_load_partitions: Unable to contact slurm controller")
        return "cpu-0 idle\ncpu-1 mixed\n"
    waiter(kubeconfig, not_ready_cluster, flaky, FakeTime()).wait()
    assert len(calls) == 3


@pytest.mark.parametrize(("sinfo", "expected"), [
    ("cpu-0 idle\ncpu-1 allocated\n", {}),
    ("cpu-0 idle$\ncpu-1 mixed-\n", {}),
    ("cpu-0 idle~\ncpu-1 idle#\n", {"cpu-0": "idle~", "cpu-1": "idle#"}),
    ("cpu-0 idle*\ncpu-1 idle\n", {"cpu-0": "idle*"}),
    ("cpu-0 unknown\n", {"cpu-0": "unknown", "cpu-1": "not listed by sinfo"}),
    ("cpu-0 drained\ncpu-1 future\n", {"cpu-1": "future"}),
], ids=["idle-alloc", "maintenance-planned-suffix", "powered-off", "not-responding", "missing-node", "future"])
def test_which_nodes_count_as_registered(sinfo, expected):
    assert unregistered(["cpu-0", "cpu-1"], parse_sinfo_nodes(sinfo)) == expected


SBS_POD = str(KIND_DEV).replace("kind-dev.yaml", "side-by-side-pod.yaml")


def test_a_side_by_side_daemonset_is_awaited_by_its_live_counts_and_its_node_in_slurm(stub, kubeconfig, up):
    """A DaemonSet has no replicas: its pods are as many as the nodes it selects (status), and its
    slurmd's Slurm node is the Kubernetes node the pod runs on."""
    stub.auto_ready = False
    up(SBS_POD)
    bundle = render(read_profile(SBS_POD))
    daemonsets = stub.store[("", "", APPS + "/daemonsets")]
    (name,) = daemonsets
    make_ready(stub, bundle)
    daemonsets[name]["status"] = {"observedGeneration": 1, "desiredNumberScheduled": 1, "numberReady": 0,
                                  "updatedNumberScheduled": 1}
    labels = bundle.of_kind("DaemonSet")[0]["spec"]["template"]["metadata"]["labels"]
    pod = make_pod(f"{name}-x7k2p", labels, False)
    pod["spec"]["nodeName"] = "slurmk8s-sbs-worker2"
    stub.seed(PODS, pod)

    def ready_later(sleeps: int) -> None:
        if sleeps == 2:
            daemonsets[name]["status"]["numberReady"] = 1
            stub.store[("", "", PODS)][pod["metadata"]["name"]]["status"]["conditions"][0]["status"] = "True"
    sinfo_answers = iter(["cpu-0 idle\nslurmk8s-sbs-worker2 unknown*\n", "cpu-0 idle\nslurmk8s-sbs-worker2 idle\n"])
    lines: list[str] = []
    fake = FakeTime(on_sleep=ready_later)
    waiter(kubeconfig, bundle, lambda command: next(sinfo_answers), fake, lines=lines).wait()
    assert lines[0].endswith("worker 1/2, login 1/1")  # the pool's pod Ready, the DaemonSet's not yet
    assert lines[-2:] == ["slurm: waiting for slurmk8s-sbs-worker2 (unknown*)",
                          "slurm: all 2 running node(s) registered with slurmctld"]
