"""The rollout driver (podside/rollout_core.py) on side-by-side DaemonSets: their pods are replaced drain-first like pool
pods, each node's new pod (another name, made by the DaemonSet controller) waited for before the node resumes."""

from __future__ import annotations

from pathlib import Path

from slurmk8s.actions.render import render_file
from slurmk8s.podside.rollout_core import (
    DS_GENERATION_ANNOTATION, DS_GENERATION_LABEL, Effects, Settings, run_rollout, stale_pods,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_side_by_side_daemonsets_are_on_delete() -> None:
    bundle = render_file(ROOT / "profiles" / "side-by-side-pod.yaml")
    daemonsets = bundle.of_kind("DaemonSet")
    assert daemonsets and all(d["spec"]["updateStrategy"] == {"type": "OnDelete"} for d in daemonsets)


class DaemonSetWorld:
    """One shared DaemonSet on two nodes, played as the DaemonSet controller plays it: a deleted pod comes back
    under a new name, on the template generation of the moment, Ready one poll later; jobs end on a fake clock."""

    def __init__(self, jobs: dict[str, float]):
        self.now = 0.0
        self.generation = "2"
        self.ds = {"metadata": {"name": "sbs-shared-kind", "annotations": {DS_GENERATION_ANNOTATION: "2"},
                                "labels": {"app.kubernetes.io/component": "worker", "slurmk8s.io/shape": "kind"}},
                   "spec": {"updateStrategy": {"type": "OnDelete"}}}
        self.pods = {f"sbs-shared-kind-{x}": self.pod(f"sbs-shared-kind-{x}", node, "1", ready=True)
                     for x, node in (("aaaaa", "node-a"), ("bbbbb", "node-b"))}
        self.jobs = dict(jobs)  # node -> ends at
        self.drained: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []
        self.made = 0

    def pod(self, name: str, node: str, generation: str, ready: bool) -> dict:
        return {"metadata": {"name": name, "labels": {DS_GENERATION_LABEL: generation},
                             "ownerReferences": [{"kind": "DaemonSet", "name": "sbs-shared-kind"}]},
                "spec": {"nodeName": node},
                "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}

    def delete_pod(self, name: str) -> None:
        assert not self.jobs.get(self.pods[name]["spec"]["nodeName"]), f"{name} deleted while a job runs"
        node = self.pods.pop(name)["spec"]["nodeName"]
        self.log.append(("delete", node))
        self.made += 1
        self.pods[f"sbs-shared-kind-new{self.made}"] = self.pod(f"sbs-shared-kind-new{self.made}", node,
                                                                self.generation, ready=False)

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.jobs = {n: end for n, end in self.jobs.items() if end > self.now}
        for pod in self.pods.values():
            pod["status"]["conditions"][0]["status"] = "True"

    def slurm(self, argv: list[str]) -> str:
        if argv[0] == "sinfo":
            nodes = next(a for a in argv if a.startswith("--nodes=")).split("=", 1)[1].split(",")
            state = lambda n: ("draining" if n in self.jobs else "drained") if n in self.drained else "idle"  # noqa: E731
            return "".join(f"{n}|{state(n)}|{self.drained.get(n, 'none')}\n" for n in nodes)
        if argv[0] == "squeue":
            node = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1]
            return "7\n" if node in self.jobs else ""
        node, verb = argv[2].split("=", 1)[1], argv[3]
        self.log.append((verb, node))
        if verb == "state=drain":
            self.drained[node] = argv[4].split("=", 1)[1]
        else:
            self.drained.pop(node, None)
        return ""

    def effects(self) -> Effects:
        return Effects(statefulsets=lambda: [self.ds], pods=lambda: list(self.pods.values()),
                       delete_pod=self.delete_pod, slurm=self.slurm, clock=lambda: self.now, sleep=self.sleep)


def test_pods_on_the_template_generation_wait_for_nothing() -> None:
    world = DaemonSetWorld({})
    world.ds["metadata"]["annotations"][DS_GENERATION_ANNOTATION] = "1"
    assert stale_pods([world.ds], list(world.pods.values())) == []
    # and a rollout of one pool leaves the shared nodes alone
    world.ds["metadata"]["annotations"][DS_GENERATION_ANNOTATION] = "2"
    assert stale_pods([world.ds], list(world.pods.values()), pool="cpu") == []


def test_a_changed_template_replaces_each_shared_node_drain_first_one_at_a_time() -> None:
    world = DaemonSetWorld({"node-a": 40})
    outcome = run_rollout(world.effects(), Settings(max_unavailable=1, drain_timeout=600, ready_timeout=120, interval=5))
    assert outcome.replaced == ["sbs-shared-kind-aaaaa", "sbs-shared-kind-bbbbb"]
    assert outcome.resumed == ["node-a", "node-b"]
    # node-a: drained, its job left to end (the delete asserts none runs), replaced, resumed; then node-b
    assert world.log == [("state=drain", "node-a"), ("delete", "node-a"), ("state=resume", "node-a"),
                         ("state=drain", "node-b"), ("delete", "node-b"), ("state=resume", "node-b")]
    assert world.now >= 40 and world.drained == {}
    assert all(p["metadata"]["labels"][DS_GENERATION_LABEL] == "2" for p in world.pods.values())


def test_an_administrators_drain_stays_on_a_shared_node() -> None:
    world = DaemonSetWorld({})
    world.drained["node-b"] = "admin: fan"
    run_rollout(world.effects(), Settings(max_unavailable=2, drain_timeout=600, ready_timeout=120, interval=5))
    assert ("state=drain", "node-b") not in world.log and ("state=resume", "node-b") not in world.log
    assert world.drained == {"node-b": "admin: fan"}
    assert world.log[:2] == [("state=drain", "node-a"), ("delete", "node-a")]
