"""Drain-before-replace rollouts and ordered Slurm upgrades against the API stub.

The stub plays the StatefulSet controller (pods carry the revision they were made from; OnDelete keeps
them on it until deleted; a deleted pod comes back on the update revision). FakeSlurm plays slurmctld:
jobs hold nodes until a fake clock passes their end, and it records every command with how many pods
had been deleted by then, so the order drain -> jobs end -> delete -> resume is checked, not assumed.
"""

from __future__ import annotations

import pytest

from conftest import KIND_DEV
from stubcluster import stub_cluster
from test_cli import slurmk8s

from slurmk8s.actions.rollout import roll_pools
from slurmk8s.errors import ClusterError, ProfileError
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render
from slurmk8s.podside import nodestate
from slurmk8s.podside.rollout_core import DRAIN_REASON


class FakeSlurm:
    """sinfo/squeue/scontrol over a dict of nodes; jobs end when the fake clock reaches their end."""

    def __init__(self, stub, nodes=("cpu-0", "cpu-1"), jobs=None, drained=None):
        self.stub = stub
        self.now = 0.0
        self.nodes = list(nodes)
        self.jobs = dict(jobs or {})  # node -> (job id, ends at)
        self.drained = dict(drained or {})  # node -> reason
        self.log: list[tuple[str, str, int]] = []  # (verb, node, pods deleted so far)

    def deleted(self) -> list[str]:
        return [r.name for r in self.stub.calls("DELETE", "/pods/")]

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.jobs = {n: j for n, j in self.jobs.items() if j[1] > self.now}

    def state(self, node: str) -> str:
        if node in self.drained:
            return "draining" if node in self.jobs else "drained"
        return "allocated" if node in self.jobs else "idle"

    def __call__(self, argv: list[str]) -> str:
        if argv[0] == "squeue" and "-w" in argv:  # `up`'s elastic convergence (actions/converge.py)
            return ""
        if argv[0] == "sinfo":  # up's wait (every node), the convergence's and the rollout's (those asked)
            asked = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--nodes=")), self.nodes)
            assert argv == nodestate.command(None if asked is self.nodes else asked), argv
            return "".join(f"{n}|{self.state(n)}|{self.drained.get(n, 'none')}\n" for n in asked)
        if argv[0] == "squeue":
            node = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1]
            self.log.append(("jobs" if node in self.jobs else "no-jobs", node, len(self.deleted())))
            return f"{self.jobs[node][0]}\n" if node in self.jobs else ""
        if argv[:2] == ["scontrol", "update"]:
            node = argv[2].split("=", 1)[1]
            if argv[3] == "state=drain":
                self.drained[node] = argv[4].split("=", 1)[1]
                self.log.append(("drain", node, len(self.deleted())))
            elif argv[3] == "state=resume":
                self.drained.pop(node, None)
                self.log.append(("resume", node, len(self.deleted())))
            return ""
        raise AssertionError(f"unexpected command {argv}")

    def when(self, verb: str, node: str) -> list[int]:
        """Pods deleted before each time `verb` happened to `node`."""
        return [d for v, n, d in self.log if (v, n) == (verb, node)]


def changed_pool_spec(data: dict) -> None:
    data["spec"]["pools"][0]["nodeSelector"] = {"slurmk8s.test/rollout": "yes"}


def set_rollout(**fields):
    def change(data: dict) -> None:
        changed_pool_spec(data)
        data["spec"]["rollout"] = fields
    return change


def roll(kubeconfig: str, profile_path: str, slurm: FakeSlurm, lines: list[str] | None = None, **kwargs):
    profile = read_profile(profile_path)
    out = lines if lines is not None else []
    return roll_pools(stub_cluster(kubeconfig, slurm), render(profile), profile, ready_timeout=60, interval=5, say=out.append,
                      clock=lambda: slurm.now, sleep=slurm.sleep, **kwargs)


def pods_on_update_revision(stub) -> dict[str, bool]:
    sts = stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", "dev-cpu")
    pods = stub.store[("", "", "/api/v1/namespaces/slurm/pods")]
    return {n: p["metadata"]["labels"]["controller-revision-hash"] == sts["status"]["updateRevision"]
            for n, p in sorted(pods.items()) if n.startswith("dev-cpu-")}


def test_a_pod_spec_change_replaces_no_pod_until_the_rollout(stub, up, edited_profile) -> None:
    up(KIND_DEV)
    _, lines = up(edited_profile(KIND_DEV, changed_pool_spec), rollout=False, exec_fn=FakeSlurm(stub))
    assert pods_on_update_revision(stub) == {"dev-cpu-0": False, "dev-cpu-1": False}
    assert not stub.calls("DELETE", "/pods/")
    assert "2 slurmd pod(s) wait for `slurmk8s rollout` (drain, then replace)" in lines
    assert "cluster dev is ready" in lines  # the wait does not wait for OnDelete pods


def test_rollout_drains_waits_for_the_job_then_replaces_one_at_a_time(stub, up, kubeconfig, edited_profile) -> None:
    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, changed_pool_spec)
    up(edited, rollout=False)
    slurm = FakeSlurm(stub, jobs={"cpu-0": ("17", 90)})
    lines: list[str] = []
    outcome = roll(kubeconfig, edited, slurm, lines)
    assert outcome.replaced == ["dev-cpu-0", "dev-cpu-1"]
    assert pods_on_update_revision(stub) == {"dev-cpu-0": True, "dev-cpu-1": True}
    # cpu-0: drained, its job seen running (nothing deleted), then gone, then the pod replaced, then resumed
    assert slurm.when("drain", "cpu-0") == [0]
    assert slurm.when("jobs", "cpu-0") and set(slurm.when("jobs", "cpu-0")) == {0}
    assert slurm.deleted() == ["dev-cpu-0", "dev-cpu-1"]
    assert slurm.when("resume", "cpu-0") == [1]
    # one at a time: cpu-1 is drained only after cpu-0 is back
    assert slurm.when("drain", "cpu-1") == [1] and slurm.when("resume", "cpu-1") == [2]
    assert slurm.now >= 90 and slurm.drained == {}
    assert "rollout: 2 slurmd pod(s) to replace, 1 at a time" in lines


def test_a_batch_drains_together_and_resumes_together(stub, up, kubeconfig, edited_profile) -> None:
    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, set_rollout(maxUnavailable=2))
    up(edited, rollout=False)
    slurm = FakeSlurm(stub, jobs={"cpu-1": ("9", 20)})
    roll(kubeconfig, edited, slurm)
    assert slurm.when("drain", "cpu-0") == [0] and slurm.when("drain", "cpu-1") == [0]
    assert slurm.when("resume", "cpu-0") == [2] and slurm.when("resume", "cpu-1") == [2]


def test_a_job_outliving_drain_timeout_stops_the_rollout_and_kills_nothing(stub, up, kubeconfig,
                                                                           edited_profile) -> None:
    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, set_rollout(drainTimeout=60))
    up(edited, rollout=False)
    slurm = FakeSlurm(stub, jobs={"cpu-0": ("17", 10_000)})
    with pytest.raises(ClusterError, match=r"jobs still run after drainTimeout 60 s: cpu-0 runs job\(s\) 17\. "
                                           r"The node\(s\) stay drained and keep their pods; no job was killed"):
        roll(kubeconfig, edited, slurm)
    assert 60 <= slurm.now < 70  # bounded by the profile's drainTimeout
    assert slurm.deleted() == [] and slurm.drained == {"cpu-0": DRAIN_REASON}
    assert "cpu-0" in slurm.jobs


def test_an_administrators_drain_is_kept(stub, up, kubeconfig, edited_profile) -> None:
    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, changed_pool_spec)
    up(edited, rollout=False)
    slurm = FakeSlurm(stub, drained={"cpu-1": "bad dimm"})
    roll(kubeconfig, edited, slurm)
    assert slurm.deleted() == ["dev-cpu-0", "dev-cpu-1"]
    assert slurm.when("drain", "cpu-1") == [] and slurm.when("resume", "cpu-1") == []
    assert slurm.drained == {"cpu-1": "bad dimm"}


def test_pool_option_limits_the_rollout(stub, up, kubeconfig, edited_profile) -> None:
    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, changed_pool_spec)
    up(edited, rollout=False)
    slurm = FakeSlurm(stub)
    assert roll(kubeconfig, edited, slurm, pool="other").replaced == []
    assert slurm.deleted() == []


def test_up_runs_the_rollout_after_its_wait(stub, up, edited_profile) -> None:
    up(KIND_DEV)
    slurm = FakeSlurm(stub)
    _, lines = up(edited_profile(KIND_DEV, changed_pool_spec), exec_fn=slurm)
    assert slurm.deleted() == ["dev-cpu-0", "dev-cpu-1"]
    assert lines.index("rollout: done, 2 pod(s) replaced") < lines.index("cluster dev is ready")
    assert pods_on_update_revision(stub) == {"dev-cpu-0": True, "dev-cpu-1": True}


def test_the_rollout_command_with_nothing_to_do(stub, kubeconfig) -> None:
    slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait")
    # Nothing is stale: no Slurm command is needed, so the controller exec is never reached.
    run = slurmk8s("rollout", KIND_DEV, "--kubeconfig", kubeconfig)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "rollout: every slurmd pod is on its StatefulSet's current revision"


def set_version(version: str):
    def change(data: dict) -> None:
        data["spec"]["slurm"]["version"] = version
        data["spec"]["slurm"].setdefault("images", {})["registry"] = "localhost/slurmk8s"  # any release: our images
    return change


@pytest.mark.parametrize("live, target, message", [
    ("24.05", "26.05", "spec.slurm.version: Slurm 24.05 -> 26.05 skips 3 release(s); Slurm 26.05 upgrades from at most "
                       "3 releases back: upgrade to 25.11 first"),
    ("26.05", "25.11", "spec.slurm.version: Slurm 26.05 -> 25.11 is a downgrade, which Slurm does not support"),
], ids=["too-far", "downgrade"])
def test_an_unsupported_slurm_step_is_refused_in_one_line(stub, kubeconfig, edited_profile, live, target,
                                                          message) -> None:
    first = slurmk8s("up", edited_profile(KIND_DEV, set_version(live)), "--kubeconfig", kubeconfig, "--no-wait")
    assert first.returncode == 0, first.stderr
    stub.reset_log()
    edited = edited_profile(KIND_DEV, set_version(target))
    run = slurmk8s("up", edited, "--kubeconfig", kubeconfig, "--no-wait")
    assert run.returncode == 2
    assert run.stderr.strip() == f"{edited}: {message}"
    assert not stub.calls("PATCH") and not stub.calls("POST")  # refused before any write


def test_an_upgrade_goes_slurmdbd_then_slurmctld_then_slurmd(stub, up, edited_profile) -> None:
    up(edited_profile(KIND_DEV, set_version("24.11")))
    stub.reset_log()
    slurm = FakeSlurm(stub)
    _, lines = up(edited_profile(KIND_DEV, set_version("26.05")), exec_fn=slurm)
    patches = [r.name for r in stub.calls("PATCH", "/statefulsets/") if r.q("dryRun") != "All"]  # not up's preview
    # first pass: slurmdbd (and its database) only; the controller's and pool's only in the second
    assert patches.index("dev-accounting") < patches.index("dev-controller") < patches.index("dev-cpu")
    assert "dev-controller" not in patches[:patches.index("dev-accounting") + 1]
    assert patches.count("dev-accounting") == 2
    assert "slurm upgrade 24.11 -> 26.05: slurmdbd first" in lines
    # slurmd last: its pods are replaced (drain first) only after the wait for slurmctld
    assert slurm.deleted() == ["dev-cpu-0", "dev-cpu-1"]
    sts = stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", "dev-controller")
    assert sts["metadata"]["annotations"]["slurmk8s.io/slurm-version"] == "26.05"


def test_a_replaced_node_is_resumed_only_once_it_responds_again(stub, up, kubeconfig, edited_profile) -> None:
    """slurmctld still shows the old registration (not responding, '*') until the new slurmd registers."""
    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, set_rollout(maxUnavailable=2))
    up(edited, rollout=False)

    class Registering(FakeSlurm):
        def state(self, node: str) -> str:
            base = super().state(node)
            # after its pod is replaced, the node answers only 20 s later
            replaced = f"dev-{node}" in self.deleted()
            return base + "*" if replaced and self.now < 20 else base
    slurm = Registering(stub)
    roll(kubeconfig, edited, slurm)
    assert slurm.when("resume", "cpu-0") == [2] and slurm.now >= 20


def test_up_moves_a_live_rolling_update_pool_to_on_delete(stub, up, edited_profile) -> None:
    """A pool made before OnDelete carries the API server's defaulted rollingUpdate, which apply leaves in place and
    the API refuses beside OnDelete: up clears it first."""
    def rolling(data: dict) -> None:
        data["spec"]["pools"][0]["replicas"] = 1
    up(edited_profile(KIND_DEV, rolling))
    stored = stub.store[("", "", "/apis/apps/v1/namespaces/slurm/statefulsets")]["dev-cpu"]
    stored["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}  # before OnDelete
    up(KIND_DEV)
    assert stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", "dev-cpu")["spec"]["updateStrategy"] == {
        "type": "OnDelete"}
