"""`up` converges whatever Slurm (or an unfinished `slurmk8s scale`) did to an elastic pool, never killing a job.

The API stub holds the StatefulSets and serves statefulsets/scale as power.py uses it; FakeSlurm answers
the Slurm commands `up` runs in the controller, from the pods the stub runs.
"""

from __future__ import annotations

from slurmk8s.actions.reconfigure import SEEN_DIGEST, files_digest

from pathlib import Path

import pytest

from conftest import KIND_DEV
from slurmk8s.actions.scale import DRAIN_REASON
from slurmk8s.errors import ClusterError
from slurmk8s.kube.wait import SINFO_NODES
from slurmk8s.podside import nodestate

APPS = "/apis/apps/v1/namespaces/slurm"
CONFIGMAPS = "/api/v1/namespaces/slurm/configmaps"
PODS = "/api/v1/namespaces/slurm/pods"
SCALED_OBJECTS = "/apis/keda.sh/v1alpha1/namespaces/slurm/scaledobjects"


class FakeSlurm:
    """slurmctld as `up` sees it: nodes of dev-cpu's pods register; drains, reasons and jobs are kept here."""

    def __init__(self, stub, drained: dict[str, str] | None = None, jobs: dict[str, str] | None = None):
        self.stub = stub
        self.drained = dict(drained or {})  # node -> reason
        self.jobs = dict(jobs or {})  # node -> "jobid STATE"
        self.commands: list[list[str]] = []

    def running(self) -> set[str]:
        return {f"cpu-{n.rsplit('-', 1)[1]}" for n in self.stub.names(PODS) if n.startswith("dev-cpu-")}

    def state(self, node: str) -> str:
        base = "drained" if node in self.drained else "idle"
        return base if node in self.running() else base + "~"

    def __call__(self, argv: list[str]) -> str:
        self.commands.append(argv)
        if argv == SEEN_DIGEST:  # the controller's mounted config: the applied ConfigMap, refreshed at once
            name = next(n for n in self.stub.names(CONFIGMAPS) if n.endswith("-slurm-config"))
            return files_digest(self.stub.get(CONFIGMAPS, name)["data"]) + "  -\n"
        if argv == ["scontrol", "reconfigure"]:
            return ""
        if argv == SINFO_NODES:
            return "".join(f"{n}|{'drained' if n in self.drained else 'idle'}|{self.drained.get(n, 'none')}\n"
                           for n in sorted(self.running()))
        if argv[0] == "sinfo":  # scale's and the rollout's: the nodes asked
            nodes = next(a for a in argv if a.startswith("--nodes=")).split("=", 1)[1].split(",")
            assert argv == nodestate.command(nodes), argv
            return "".join(f"{n}|{self.state(n)}|{self.drained.get(n, 'none')}\n" for n in nodes)
        if argv[:2] == ["scontrol", "update"]:
            nodes, state = argv[2].split("=", 1)[1].split(","), argv[3].split("=", 1)[1]
            for n in nodes:
                if state == "drain":
                    self.drained[n] = argv[4].split("=", 1)[1]
                elif state == "resume":
                    self.drained.pop(n, None)
            return ""
        if argv[0] == "squeue" and any(a.startswith("--nodelist=") for a in argv):  # the rollout's
            node = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1]
            return f"{self.jobs[node].split()[0]}\n" if node in self.jobs else ""
        if argv[0] == "squeue":
            return "".join(f"{self.jobs[n]}\n" for n in argv[3].split(",") if n in self.jobs)
        return ""

    def updates(self) -> list[list[str]]:
        return [c for c in self.commands if c[:2] == ["scontrol", "update"]]


def power_saving_scales(kubeconfig, replicas: int) -> None:
    """What Slurm's Resume/SuspendProgram do: patch statefulsets/scale of the pool."""
    from slurmk8s.kube import scale
    from slurmk8s.kube.client import Access, connect
    scale.set_replicas(connect(Access(kubeconfig)), "slurm", "dev-cpu", replicas)


def replicas(stub) -> int:
    return stub.get(f"{APPS}/statefulsets", "dev-cpu")["spec"]["replicas"]


def pool(**fields):
    return lambda p: p["spec"]["pools"][0].update(**fields)


def test_up_after_power_saving_scaled_the_pool_to_zero_waits_for_zero(stub, up, kubeconfig):
    up(KIND_DEV)
    power_saving_scales(kubeconfig, 0)
    plan, lines = up(KIND_DEV, exec_fn=FakeSlurm(stub), timeout=8)
    assert replicas(stub) == 0
    assert "pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 0/0, login 1/1" in lines
    assert "cluster dev is ready" in lines
    assert "StatefulSet/dev-cpu" not in {c.ref for c in plan.changes if c.action == "configured"}


def test_status_of_a_pool_power_saving_resized_is_healthy_and_says_slurm_sizes_it(stub, up, kubeconfig):
    from slurmk8s.kube.client import Access, connect
    from slurmk8s.kube.inspect import cluster_status
    from slurmk8s.render import render
    from slurmk8s.profile.files import read_profile
    up(KIND_DEV)
    power_saving_scales(kubeconfig, 3)
    status = cluster_status(connect(Access(kubeconfig)), render(read_profile(KIND_DEV)), None, "dev-controller-0")
    assert status.problems == ()
    assert {o.ref: o.state for o in status.objects}["StatefulSet/dev-cpu"] == "3 of 0..4 running, Slurm-managed"


def test_up_raises_a_pool_below_a_raised_min_replicas_before_applying(stub, up, edited_profile):
    up(KIND_DEV)  # 2 run
    slurm = FakeSlurm(stub)
    stub.reset_log()
    plan, lines = up(edited_profile(KIND_DEV, pool(replicas=3, minReplicas=3)), exec_fn=slurm, timeout=8)
    assert replicas(stub) == 3
    assert "pool cpu: minReplicas is 3 but 2 ran: started cpu-2" in lines
    assert nodestate.command(["cpu-2"]) in slurm.commands  # not while Slurm powers it down
    # through the scale subresource, as power saving does: the apply then sends the same value (no field conflict)
    writes = [r for r in stub.requests if r.method == "PATCH" and "/statefulsets/dev-cpu" in r.path
              and r.q("dryRun") != "All"]  # up's restart preview is a dry run
    assert [(r.path.rsplit("/", 1)[1], (r.body or {}).get("spec", {}).get("replicas")) for r in writes] == [
        ("scale", 3), ("dev-cpu", 3)]
    assert "pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 3/3, login 1/1" in lines


def test_up_after_lowering_max_drains_the_nodes_above_it_then_shrinks_before_applying(stub, up, kubeconfig,
                                                                                       edited_profile):
    up(KIND_DEV)
    power_saving_scales(kubeconfig, 4)  # a burst: Slurm resumed cpu-2 and cpu-3
    slurm = FakeSlurm(stub)
    stub.reset_log()
    _, lines = up(edited_profile(KIND_DEV, pool(replicas=1, maxReplicas=2)), exec_fn=slurm, timeout=8)
    assert replicas(stub) == 2
    assert slurm.updates()[0] == ["scontrol", "update", "nodename=cpu-2,cpu-3", "state=drain", f"reason={DRAIN_REASON}"]
    assert ["squeue", "-h", "-w", "cpu-2,cpu-3", "-o", "%i %T"] in slurm.commands
    # the pods went before the slurm.conf that drops their nodes was written
    writes = [r for r in stub.requests if r.method == "PATCH" and r.q("dryRun") != "All"]
    scaled = next(i for i, r in enumerate(writes) if r.path.endswith("/statefulsets/dev-cpu/scale"))
    config = next(i for i, r in enumerate(writes) if r.path.endswith("/configmaps/dev-slurm-config"))
    assert scaled < config
    assert "pool cpu: maxReplicas is 2 but 4 run: removing cpu-2,cpu-3 first" in lines
    assert "pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 2/2, login 1/1" in lines


def test_up_after_lowering_max_never_kills_a_job_it_refuses_and_applies_nothing(stub, up, kubeconfig,
                                                                                 edited_profile):
    up(KIND_DEV)
    power_saving_scales(kubeconfig, 4)
    slurm = FakeSlurm(stub, jobs={"cpu-3": "41 RUNNING"})
    stub.reset_log()
    lower = edited_profile(KIND_DEV, pool(replicas=1, maxReplicas=2))
    with pytest.raises(ClusterError) as refused:
        up(lower, exec_fn=slurm, timeout=1)
    assert str(refused.value) == ("pool cpu: jobs still running on cpu-2,cpu-3 after 1 s (41 RUNNING); "
                                  "the nodes stay drained and the pool keeps 4 replicas; "
                                  "nothing was applied: run up again once they end")
    assert replicas(stub) == 4
    assert [r.path for r in stub.requests if r.method in ("PATCH", "POST", "DELETE") and r.q("dryRun") != "All"] == []
    # The job ends: the next up finishes the job it started.
    slurm.jobs.clear()
    up(lower, exec_fn=slurm, timeout=8)
    assert replicas(stub) == 2


def test_dry_run_says_which_nodes_a_lowered_max_would_drain(stub, up, kubeconfig, edited_profile):
    up(KIND_DEV)
    power_saving_scales(kubeconfig, 4)
    slurm = FakeSlurm(stub)
    _, lines = up(edited_profile(KIND_DEV, pool(replicas=1, maxReplicas=3)), exec_fn=slurm, dry_run=True)
    assert "pool cpu: maxReplicas is 3 but 4 run: would drain cpu-3, wait for their jobs, then remove their pods" in lines
    assert (replicas(stub), slurm.commands) == (4, [])


def test_diff_says_what_up_would_do_to_a_pool_outside_a_changed_range(stub, up, kubeconfig, edited_profile):
    from slurmk8s.actions.diff import run_diff
    from slurmk8s.kube.kubecluster import KubeCluster
    up(KIND_DEV)
    power_saving_scales(kubeconfig, 4)
    stub.reset_log()
    lines: list[str] = []
    plan = run_diff(edited_profile(KIND_DEV, pool(replicas=1, maxReplicas=3)), KubeCluster(kubeconfig), echo=lines.append)
    assert "pool cpu: maxReplicas is 3 but 4 run: would drain cpu-3, wait for their jobs, then remove their pods" in lines
    assert plan.changed and replicas(stub) == 4
    assert [r for r in stub.requests if "/scale" in r.path] == []
    lines.clear()
    run_diff(edited_profile(KIND_DEV, pool(replicas=4, minReplicas=4, maxReplicas=5)), KubeCluster(kubeconfig),
             echo=lines.append)
    assert not [line for line in lines if line.startswith("pool cpu:")]  # 4 run: inside 4..5


def test_a_pool_dropped_from_the_profile_is_drained_and_emptied_before_prune_deletes_it(stub, up, kubeconfig,
                                                                                       edited_profile):
    def add_big(p):
        p["spec"]["pools"].append({"name": "big", "replicas": 2, "minReplicas": 0, "maxReplicas": 2, "cpus": 1,
                                   "memory": "1Gi"})
        p["spec"]["partitions"][0]["pools"].append("big")
    two_pools = edited_profile(KIND_DEV, add_big)
    up(two_pools)
    slurm = FakeSlurm(stub, jobs={"big-1": "77 RUNNING"})
    stub.reset_log()
    with pytest.raises(ClusterError, match=r"^pool big: jobs still running on big-0,big-1 after 1 s \(77 RUNNING\); "
                                           r".*; nothing was applied: run up again once they end$"):
        up(KIND_DEV, exec_fn=slurm, timeout=1)
    assert stub.get(f"{APPS}/statefulsets", "dev-big")["spec"]["replicas"] == 2  # its job runs on
    assert [r.path for r in stub.requests if r.method in ("PATCH", "POST", "DELETE") and r.q("dryRun") != "All"] == []
    slurm.jobs.clear()
    stub.reset_log()
    plan, lines = up(KIND_DEV, exec_fn=slurm, timeout=8)
    assert "StatefulSet/dev-big left the profile: removing big-[0-1] first" in lines
    assert ["scontrol", "update", "nodename=big-0,big-1", "state=drain", f"reason={DRAIN_REASON}"] in slurm.commands
    emptied = next(i for i, r in enumerate(stub.requests) if r.method == "PATCH" and r.path.endswith("/dev-big/scale"))
    deleted = next(i for i, r in enumerate(stub.requests) if r.method == "DELETE" and r.path.endswith("/dev-big"))
    assert emptied < deleted
    assert "StatefulSet/dev-big" in [c.ref for c in plan.changes if c.action == "pruned"]


def test_topology_added_to_a_pool_moves_its_nodes_to_the_leaf_statefulset_without_killing_a_job(stub, up,
                                                                                             edited_profile):
    up(KIND_DEV)  # dev-cpu runs cpu-0 and cpu-1
    leaf = edited_profile(KIND_DEV, lambda p: p["spec"].update(topology={"plugin": "tree", "domains": [
        {"name": "r1", "nodeLabels": {"example.com/rack": "r1"}, "slots": {"cpu": 4}}]}))
    slurm = FakeSlurm(stub)
    plan, lines = up(leaf, exec_fn=slurm, timeout=8)
    assert "StatefulSet/dev-cpu left the profile: removing cpu-[0-1] first" in lines
    assert "StatefulSet/dev-cpu" in [c.ref for c in plan.changes if c.action == "pruned"]
    assert stub.get(f"{APPS}/statefulsets", "dev-cpu-r1")["spec"]["replicas"] == 2
    # the leaf's pods took the nodes over drained; up resumed them
    assert "pool cpu: cpu-0,cpu-1 left drained by slurmk8s; resumed" in lines
    assert slurm.drained == {}


def test_up_resumes_only_the_drains_an_unfinished_scale_down_left(stub, up, kubeconfig):
    up(KIND_DEV)
    power_saving_scales(kubeconfig, 3)
    # `scale dev cpu 1` drained cpu-1 and cpu-2 and timed out; cpu-3's drain is someone else's.
    slurm = FakeSlurm(stub, drained={"cpu-1": DRAIN_REASON, "cpu-2": DRAIN_REASON, "cpu-3": "disk swap"})
    _, lines = up(KIND_DEV, exec_fn=slurm, timeout=8)
    assert slurm.drained == {"cpu-3": "disk swap"}
    assert slurm.updates() == [["scontrol", "update", "nodename=cpu-1,cpu-2", "state=resume"]]
    assert "pool cpu: cpu-1,cpu-2 left drained by slurmk8s; resumed" in lines
    assert replicas(stub) == 3


def test_up_hands_a_drained_node_whose_pod_is_gone_back_to_power_saving(stub, up, kubeconfig):
    up(KIND_DEV)
    # scale lowered the replicas, then died before it handed cpu-1 back
    power_saving_scales(kubeconfig, 1)
    slurm = FakeSlurm(stub, drained={"cpu-1": DRAIN_REASON})
    up(KIND_DEV, exec_fn=slurm, timeout=8)
    assert slurm.updates() == [["scontrol", "update", "nodename=cpu-1", "state=power_down_force"],
                               ["scontrol", "update", "nodename=cpu-1", "state=resume"]]
    assert slurm.drained == {}


def test_per_leaf_scaled_objects_target_real_statefulsets_and_are_pruned_and_deleted(stub, up, kubeconfig,
                                                                                     edited_profile):
    from slurmk8s.actions.down import run_down
    from slurmk8s.kube.kubecluster import KubeCluster
    topology = str(Path(KIND_DEV).with_name("kind-topology.yaml"))
    keda = {"serverAddress": "http://prom:9090", "query": "sum(slurm_partition_jobs_pending)", "threshold": "1"}
    # a KEDA trigger needs a metric source: Slurm's own metrics (the Service only, no monitor CRD)
    metrics = {"enabled": True, "monitor": "none"}
    with_keda = edited_profile(topology, lambda p: (pool(keda=keda)(p), p["spec"].update(metrics=metrics)))
    without_keda = edited_profile(topology, lambda p: p["spec"].update(metrics=metrics))
    up(with_keda)
    leaves = ["topo-cpu-subblock-a1", "topo-cpu-subblock-a2", "topo-cpu-subblock-b1"]
    assert stub.names(SCALED_OBJECTS) == leaves
    assert [stub.get(SCALED_OBJECTS, n)["spec"]["scaleTargetRef"]["name"] for n in leaves] == leaves
    assert set(leaves) <= set(stub.names(f"{APPS}/statefulsets"))
    plan, _ = up(without_keda)  # keda dropped from the profile
    assert sorted(c.ref for c in plan.changes if c.action == "pruned") == [f"ScaledObject/{n}" for n in leaves]
    assert stub.names(SCALED_OBJECTS) == []
    up(with_keda)
    run_down(with_keda, KubeCluster(kubeconfig), wait=False, echo=lambda line: None)
    assert stub.names(SCALED_OBJECTS) == []
