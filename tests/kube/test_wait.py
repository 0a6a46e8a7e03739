"""Waiting until usable: pod readiness through the stub, Slurm registration through a fake controller exec.

The stub serves no websocket exec, so the `sinfo` side is a function the tests pass in.
"""

from __future__ import annotations

import copy
import io
import re

import pytest

from apistub import make_pod
from conftest import KIND_DEV
from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ClusterError
from slurmk8s.kube.wait import SINFO_NODES, UNHEALABLE_AFTER, Waiter, never_fits, unregistered
from slurmk8s.podside import nodestate
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
    answers = iter(["cpu-0|idle|none\ncpu-1|unknown*|none\n", "cpu-0|idle|none\ncpu-1|idle|none\ncpu-2|unknown*|none\n"])
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
        waiter(kubeconfig, not_ready_cluster, lambda c: "cpu-0|idle|none\ncpu-1|down*|none\n", FakeTime(), timeout=10).wait()


def test_exec_failures_while_the_controller_starts_are_retried(stub, kubeconfig, not_ready_cluster):
    make_ready(stub, not_ready_cluster)
    calls = []

    def flaky(command):
        calls.append(command)
        if len(calls) < 3:
            raise ClusterError("exec: slurm_load_partitions: Unable to contact slurm controller")
        return "cpu-0|idle|none\ncpu-1|mixed|none\n"
    waiter(kubeconfig, not_ready_cluster, flaky, FakeTime()).wait()
    assert len(calls) == 3


@pytest.mark.parametrize(("sinfo", "expected"), [
    ("cpu-0|idle|none\ncpu-1|allocated|none\n", {}),
    ("cpu-0|idle$|none\ncpu-1|mixed-|none\n", {}),
    ("cpu-0|idle~|none\ncpu-1|idle#|none\n", {"cpu-0": "idle~", "cpu-1": "idle#"}),
    ("cpu-0|idle*|none\ncpu-1|idle|none\n", {"cpu-0": "idle*"}),
    ("cpu-0|unknown|none\n", {"cpu-0": "unknown", "cpu-1": "not listed by sinfo"}),
    ("cpu-0|drained|none\ncpu-1|future|none\n", {"cpu-1": "future"}),
], ids=["idle-alloc", "maintenance-planned-suffix", "powered-off", "not-responding", "missing-node", "future"])
def test_which_nodes_count_as_registered(sinfo, expected):
    assert unregistered(["cpu-0", "cpu-1"], nodestate.parse(sinfo)) == expected


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
    sinfo_answers = iter(["cpu-0|idle|none\nslurmk8s-sbs-worker2|unknown*|none\n", "cpu-0|idle|none\nslurmk8s-sbs-worker2|idle|none\n"])
    lines: list[str] = []
    fake = FakeTime(on_sleep=ready_later)
    waiter(kubeconfig, bundle, lambda command: next(sinfo_answers), fake, lines=lines).wait()
    assert lines[0].endswith("worker 1/2, login 1/1")  # the pool's pod Ready, the DaemonSet's not yet
    assert lines[-2:] == ["slurm: waiting for slurmk8s-sbs-worker2 (unknown*)",
                          "slurm: all 2 running node(s) registered with slurmctld"]


# ---- conditions that waiting does not heal end the wait within UNHEALABLE_AFTER (issue 32) ----------

SLINKY_SLURMCTLD = "ghcr.io/slinkyproject/slurmctld:26.05-ubuntu24.04"


def lagging_pod(stub, bundle, workload: str, *, waiting: tuple[str, str] | None = None, init: bool = False,
                unschedulable: str = "", image: str = SLINKY_SLURMCTLD) -> dict:
    """Everything Ready but `workload`, whose pod 0 waits (a container, an init container) or is not scheduled."""
    make_ready(stub, bundle)
    sts = stub.store[("", "", APPS + "/statefulsets")][workload]
    sts["status"] = {"observedGeneration": 1, "readyReplicas": 0, "updatedReplicas": 1}
    pod = make_pod(f"{workload}-0", sts["spec"]["template"]["metadata"]["labels"], ready=False,
                   unschedulable=unschedulable)
    pod["spec"] = {"initContainers": [{"name": "setup", "image": image}],
                   "containers": [{"name": "slurmctld", "image": image}]}
    if waiting:
        group, name = ("initContainerStatuses", "setup") if init else ("containerStatuses", "slurmctld")
        pod["status"][group] = [{"name": name, "ready": False, "image": image, "restartCount": 0,
                                 "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}}}]
    return stub.seed(PODS, pod)


def set_waiting(stub, pod: str, reason: str, message: str) -> None:
    status = stub.store[("", "", PODS)][pod]["status"]
    status["containerStatuses"][0]["state"] = {"waiting": {"reason": reason, "message": message}}


PULL_NO_HOST = (f'failed to pull and unpack image "{SLINKY_SLURMCTLD}": failed to resolve reference '
                f'"{SLINKY_SLURMCTLD}": failed to do request: Head "https://ghcr.io/v2/slinkyproject/slurmctld/'
                'manifests/26.05-ubuntu24.04": dial tcp: lookup ghcr.io: no such host')


def fail_fast(kubeconfig, bundle, fake: FakeTime, timeout: float = 600, progress=None) -> list[str]:
    """The wait's error lines; it must end long before its timeout."""
    with pytest.raises(ClusterError) as caught:
        waiter(kubeconfig, bundle, lambda c: "", fake, timeout=timeout, lines=progress).wait()
    assert fake.now < timeout
    return str(caught.value).splitlines()


def test_an_unpullable_image_ends_the_wait_within_the_bound_with_what_to_do(stub, kubeconfig, not_ready_cluster):
    bundle = not_ready_cluster
    lagging_pod(stub, bundle, "dev-controller", waiting=("ErrImagePull", PULL_NO_HOST))
    # the kubelet alternates ErrImagePull and a back-off whose message does not repeat the cause
    fake = FakeTime(on_sleep=lambda n: set_waiting(stub, "dev-controller-0", *(
        ("ImagePullBackOff", f'Back-off pulling image "{SLINKY_SLURMCTLD}"') if n % 2 else ("ErrImagePull", PULL_NO_HOST))))
    progress: list[str] = []
    lines = fail_fast(kubeconfig, bundle, fake, progress=progress)
    # meanwhile the progress says which pod does not start
    assert progress == ["pods ready: mariadb 1/1, accounting 1/1, controller 0/1, worker 2/2, login 1/1; "
                        "cannot start: dev-controller-0 (ErrImagePull)"]
    assert fake.now <= UNHEALABLE_AFTER + 5  # first seen at 0; one interval (5 s here) after the grace
    assert lines[0] == "pods cannot start, and waiting will not help (seen for 30 s):"
    assert lines[1] == f"  pod dev-controller-0 container slurmctld: ErrImagePull: {PULL_NO_HOST}"
    assert lines[2] == (f"  images: {SLINKY_SLURMCTLD} cannot be pulled here; build them with `slurmk8s images "
                        "build` and set spec.slurm.images (on kind: `slurmk8s up PROFILE --images local`), "
                        "see docs/images.md")
    assert lines[3].startswith("  the objects stay as applied")


def test_a_back_off_says_why_through_the_pods_events(stub, kubeconfig, not_ready_cluster):
    """ImagePullBackOff's own message may not carry the cause: the kubelet's Failed event does."""
    bundle = not_ready_cluster
    lagging_pod(stub, bundle, "dev-controller",
                waiting=("ImagePullBackOff", f'Back-off pulling image "{SLINKY_SLURMCTLD}"'))
    stub.seed("/api/v1/namespaces/slurm/events", {
        "kind": "Event", "metadata": {"name": "e1"}, "involvedObject": {"name": "dev-controller-0"},
        "reason": "Failed", "lastTimestamp": "2026-01-01T00:00:02Z",
        "message": f'Failed to pull image "{SLINKY_SLURMCTLD}": rpc error: code = NotFound desc = {SLINKY_SLURMCTLD}: not found'})
    lines = fail_fast(kubeconfig, bundle, FakeTime())
    assert lines[1].startswith(f'  pod dev-controller-0 container slurmctld: ImagePullBackOff: Back-off pulling image '
                               f'"{SLINKY_SLURMCTLD}"; last event: Failed: Failed to pull image')
    assert lines[1].endswith(": not found")


@pytest.mark.parametrize(("reason", "message", "hint"), [
    ("CreateContainerConfigError", "couldn't find key password in Secret slurm/site-db", "  the pod names a Secret"),
    ("CreateContainerConfigError", 'configmap "site-extra" not found', "  the pod names a Secret"),
    ("CreateContainerConfigError", "container has runAsNonRoot and image will run as root (pod: "
                                   '"dev-controller-0_slurm(1)", container: setup)', "  the container's settings"),
    ("InvalidImageName", 'Failed to apply default image tag "ghcr.io/x/Bad:tag": couldn\'t parse image name', "  images: "),
    ("ErrImagePull", "failed to pull and unpack image: 401 Unauthorized", "  images: "),
    ("ImagePullBackOff", f'Back-off pulling image "{SLINKY_SLURMCTLD}": ErrImagePull: {PULL_NO_HOST}', "  images: "),
    ("RegistryUnavailable", "image pull failed for x because the registry is unavailable: lookup ghcr.io: no such host",
     "  images: "),
    ("ErrImageNeverPull", 'Container image "localhost/slurmk8s/slurmctld:26.05-debian14" is not present with pull '
                          "policy of Never", "  images: "),
], ids=["missing-secret-key", "missing-configmap", "run-as-non-root", "invalid-image-name", "unauthorized", "back-off-1.34-with-cause", "registry-unavailable",
    "never-pull"])
def test_container_conditions_that_do_not_heal(stub, kubeconfig, not_ready_cluster, reason, message, hint):
    lagging_pod(stub, not_ready_cluster, "dev-controller", waiting=(reason, message), init=True)
    fake = FakeTime()
    lines = fail_fast(kubeconfig, not_ready_cluster, fake)
    assert fake.now <= UNHEALABLE_AFTER + 5
    assert lines[1] == f"  pod dev-controller-0 container setup: {reason}: {message}"
    assert lines[2].startswith(hint)


NEVER_MATCH = ("0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
               "3 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: "
               "4 Preemption is not helpful for scheduling.")


def test_a_pod_no_node_can_ever_take_ends_the_wait(stub, kubeconfig, not_ready_cluster):
    lagging_pod(stub, not_ready_cluster, "dev-controller", unschedulable=NEVER_MATCH)
    fake = FakeTime()
    lines = fail_fast(kubeconfig, not_ready_cluster, fake)
    assert fake.now <= UNHEALABLE_AFTER + 5
    assert lines[1] == f"  pod dev-controller-0: Unschedulable: {NEVER_MATCH}"
    assert lines[2].startswith("  no node can ever run this pod: label or untaint nodes")


@pytest.mark.parametrize(("message", "forever"), [
    (NEVER_MATCH, True),
    ("0/3 nodes are available: 3 node(s) had volume node affinity conflict.", True),
    ("0/3 nodes are available: 3 node(s) had untolerated taint {site.example/gpu: true}.", True),
    ("0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
     "3 Insufficient cpu. preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, "
     "3 No preemption victims found for incoming pod.", False),
    ("0/2 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/not-ready: }.", False),
    ("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.", False),
    ("0/3 nodes are available: 3 node(s) were unschedulable.", False),
    ("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.", False),
    ("0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod ports.", False),
    ("", False),
], ids=["selector-and-control-plane", "volume-pinned", "site-taint", "insufficient-cpu-heals-on-scale-down",
        "node-not-ready-yet", "anti-affinity", "cordoned", "unbound-claim", "ports", "no-message"])
def test_which_scheduler_messages_never_heal(message, forever):
    assert never_fits(message) is forever


@pytest.mark.parametrize(("waiting", "unschedulable"), [
    (("ContainerCreating", ""), ""),
    (("PodInitializing", ""), ""),
    (("ErrImagePull", "failed to pull and unpack image: dial tcp 198.19.0.9:443: i/o timeout"), ""),
    (("ImagePullBackOff", 'Back-off pulling image "x"'), ""),  # and no event says why
    (("CrashLoopBackOff", "back-off 40s restarting failed container"), ""),
    (None, "0/4 nodes are available: 4 Insufficient cpu."),
    (None, "0/2 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."),
], ids=["pulling", "init-running", "pull-timeout", "back-off-without-cause", "crash-loop", "insufficient-cpu",
        "node-not-ready"])
def test_transient_states_keep_waiting_until_ready(stub, kubeconfig, not_ready_cluster, waiting, unschedulable):
    bundle = not_ready_cluster
    lagging_pod(stub, bundle, "dev-controller", waiting=waiting, unschedulable=unschedulable)

    def heal(sleeps: int) -> None:
        if sleeps == 40:  # 200 s: far past the grace
            make_ready(stub, bundle)
    fake = FakeTime(on_sleep=heal)
    waiter(kubeconfig, bundle, lambda c: "cpu-0|idle|none\ncpu-1|idle|none\n", fake, timeout=600).wait()
    assert fake.now >= 200


def test_a_condition_that_heals_within_the_grace_starts_the_count_afresh(stub, kubeconfig, not_ready_cluster):
    """A Secret created a moment after `up` began: its pod waited 25 s, creating, then 25 s again; never 30 s in a row."""
    bundle = not_ready_cluster
    missing_key = ("CreateContainerConfigError", "couldn't find key password in Secret slurm/site-db")
    lagging_pod(stub, bundle, "dev-controller", waiting=missing_key)

    def flap(sleeps: int) -> None:  # interval 5 s: sleeps 1-4 still missing, 5 creating, 6-10 missing, then Ready
        if sleeps == 5:
            set_waiting(stub, "dev-controller-0", "ContainerCreating", "")
        elif sleeps == 6:
            set_waiting(stub, "dev-controller-0", *missing_key)
        elif sleeps == 10:
            make_ready(stub, bundle)
    fake = FakeTime(on_sleep=flap)
    waiter(kubeconfig, bundle, lambda c: "cpu-0|idle|none\ncpu-1|idle|none\n", fake, timeout=600).wait()
    assert fake.sleeps == 10


def test_every_poll_reports_to_a_live_line(stub, kubeconfig, not_ready_cluster):
    """every_poll: the same line again at each poll, so a live line can redraw its clock."""
    bundle = not_ready_cluster
    fake = FakeTime(on_sleep=lambda n: make_ready(stub, bundle) if n == 3 else None)
    from slurmk8s.kube.client import Access, connect
    lines: list[str] = []
    Waiter(connect(Access(kubeconfig)), bundle, None, timeout=60, interval=5, progress=lines.append,
           clock=fake.clock, sleep=fake.sleep, every_poll=True).wait()
    assert lines == ["pods ready: mariadb 0/1, accounting 0/1, controller 0/1, worker 0/2, login 0/1"] * 3 + [
        "pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 2/2, login 1/1"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "log"])
def test_ups_wait_shows_a_live_line_on_a_terminal_and_timestamped_lines_otherwise(stub, kubeconfig, up, terminal):
    from slurmk8s.actions.up import wait_live
    from stubcluster import stub_cluster
    up(KIND_DEV)
    stream = Terminal() if terminal else io.StringIO()
    wait_live(stub_cluster(kubeconfig, lambda argv: "cpu-0|idle|none\ncpu-1|idle|none\n"), render(read_profile(KIND_DEV)), 60,
              stream)
    ready = re.escape("pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 2/2, login 1/1")
    registered = re.escape("slurm: all 2 running node(s) registered with slurmctld")
    if terminal:
        # three redraws of one line, each cut to the terminal's width (80 columns when it has none)
        live, registering, after = stream.getvalue().split("\r\x1b[K")[1:]
        whole = "pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 2/2, login 1/1 (since "
        assert len(live) <= 79 and whole.startswith(live[:len(whole)]) and live.startswith(whole[:60]), repr(live)
        assert re.fullmatch(rf"{registered} \(since \d\d:\d\d:\d\d, [0-9hms]+\)", registering), repr(registering)
        assert re.fullmatch(rf"{registered} \(after \d+ s\)\n", after), repr(after)
    else:
        stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
        waited = r"( \(waiting [0-9hms]+\))?"  # progress.py says how long once the wait has run a while
        assert re.fullmatch(rf"{stamp} {ready}{waited}\n{stamp} {registered}{waited}\n{stamp} {registered} \(after \d+ s\)\n",
                            stream.getvalue()), stream.getvalue()


# ---- `up --images PREFIX`: the images `slurmk8s images build` made, without editing the profile ----------

def test_up_images_local_runs_what_images_build_tags(stub, up):
    _, lines = up(KIND_DEV, images="local")
    assert "  images: localhost/slurmk8s/<image>:26.05-debian14 (--images local)" in lines
    used = sorted({c["image"] for sts in stub.store[("", "", APPS + "/statefulsets")].values()
                   for group in ("initContainers", "containers") for c in sts["spec"]["template"]["spec"].get(group, [])})
    assert used == [f"localhost/slurmk8s/{image}:26.05-debian14" for image in ("login", "mariadb", "slurmctld",
                                                                                "slurmd", "slurmdbd")]


@pytest.mark.parametrize(("images", "version", "message"), [
    ("Not A Prefix", "26.05", "--images: registry 'Not A Prefix' is not an image name prefix"),
    ("local", "25.05", "--images local: `slurmk8s images build` makes Slurm 22.05, 24.11, 26.05; the profile runs 25.05"),
], ids=["bad-prefix", "series-not-built-here"])
def test_up_images_refuses_what_images_build_cannot_have_made(tmp_path, images, version, message):
    import os
    import subprocess
    import sys
    from pathlib import Path
    profile = tmp_path / "p.yaml"
    profile.write_text(Path(KIND_DEV).read_text().replace('version: "26.05"', f'version: "{version}"'))
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "up", str(profile), "--images", images,
                          "--kubeconfig", str(tmp_path / "none")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and message in run.stderr.strip(), run.stderr


def test_several_unpullable_images_are_named_in_one_hint(stub, kubeconfig, not_ready_cluster):
    bundle = not_ready_cluster
    lagging_pod(stub, bundle, "dev-controller", waiting=("ErrImagePull", PULL_NO_HOST))
    other = copy.deepcopy(stub.store[("", "", PODS)]["dev-controller-0"])
    other["metadata"] = {"name": "dev-login-0", "labels": other["metadata"]["labels"]}
    other["status"]["containerStatuses"][0]["image"] = "mariadb:11.4"
    other["spec"]["containers"][0]["image"] = "mariadb:11.4"
    stub.seed(PODS, other)
    lines = fail_fast(kubeconfig, bundle, FakeTime())
    assert [line for line in lines if line.startswith("  images: ")] == [
        f"  images: {SLINKY_SLURMCTLD}, mariadb:11.4 cannot be pulled here; build them with `slurmk8s images build` "
        "and set spec.slurm.images (on kind: `slurmk8s up PROFILE --images local`), see docs/images.md"]
