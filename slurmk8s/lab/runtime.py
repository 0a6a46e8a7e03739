"""The lab's runtime: each container's process, init containers, probes, restarts, exec, and waiting.

What containerd and the kubelet's prober do for a pod, on top of sandbox.py's namespaces
(a container is one process started in its pod's sandbox). Waits take a ``Clock`` so that a
test can run them on a fake one, without sleeping.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from slurmk8s import naming
from slurmk8s.lab import kubelet, sandbox
from slurmk8s.lab import state as lab_state
from slurmk8s.lab.errors import LabError
from slurmk8s.lab.plan import Container, Pod, Probe

if TYPE_CHECKING:
    from slurmk8s.lab.lifecycle import Lab

INIT_DEADLINE_S = 60
READY_DEADLINE_S = 60
CLIENT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
POLL_S = 0.1


class Clock(Protocol):
    """Where waits read the time and how they pause."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The machine's monotonic clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


def wait_until(predicate: Callable[[], object], deadline_s: float, what: str,
               proc: subprocess.Popen | None = None, log_path: str | Path | Sequence[str | Path] | None = None,
               interval: float = POLL_S, clock: Clock = SYSTEM_CLOCK):
    """Poll ``predicate`` until truthy (returns its value) or the deadline passes on ``clock``.

    Fails fast when ``proc`` has exited. The LabError names ``what`` and carries the last
    lines of ``log_path`` (one path or several) and the predicate's last exception.
    """
    end = clock.monotonic() + deadline_s
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # a poll that errors is "not ready yet"; kept for the message
            last_error = e
        died = proc is not None and proc.poll() is not None
        if died or clock.monotonic() >= end:
            head = (f"{what}: process {proc.pid} exited with code {proc.returncode} before it was ready"
                    if died else f"{what}: not ready after {deadline_s:g} s")
            raise LabError(head + _failure_details(last_error, log_path))
        clock.sleep(min(interval, max(0.0, end - clock.monotonic())))


def _failure_details(error: BaseException | None, log_path) -> str:
    parts = []
    if error is not None:
        parts.append(f"last check failed: {error}")
    paths = [] if log_path is None else [log_path] if isinstance(log_path, (str, Path)) else list(log_path)
    for path in paths:
        text = sandbox.tail(path)
        parts.append(f"last lines of {path}:\n{text}" if text else f"{path}: empty or missing")
    return "".join("\n" + p for p in parts)


def tcp_open(ip: str, port: int, timeout_s: float = 0.5) -> bool:
    """A tcpSocket probe: something accepts on ip:port."""
    try:
        with socket.create_connection((ip, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def alive(pid: int) -> bool:
    """pid runs and is not a zombie."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


class ContainerRuntime:
    """The processes of one lab's containers, keyed by (pod, container); what `lab exec` needs is saved with the lab."""

    def __init__(self, lab: Lab, clock: Clock = SYSTEM_CLOCK):
        self.lab = lab
        self.clock = clock
        self.procs: dict[tuple[str, str], subprocess.Popen] = {}
        self.pids: dict[str, dict[str, int]] = {}
        self.exec_specs: dict[str, dict[str, dict]] = {}  # pod -> container -> its identity and env

    def log_path(self, pod: Pod, container: str) -> Path:
        return self.lab.pod_dir(pod) / f"{container}.log"

    def start(self, pod: Pod, c: Container) -> subprocess.Popen:
        """Start one container as a runtime would: its image's files under a fresh writable layer, as its user."""
        lab = self.lab
        box = lab.network.pods[pod.name]
        image = lab.images[c.image]
        who = lab.identity(pod, c)
        env = lab.container_env(pod, c, who.uid)
        argv = kubelet.container_argv(c.command, c.args, image.config.entrypoint, image.config.cmd)
        proc = box.start(argv, env, lab.container_mounts(pod, c), rootfs=image.path,
                         workdir=c.working_dir or image.config.workdir or "/",
                         stdout_path=self.log_path(pod, c.name),
                         layer=lab.pod_dir(pod) / "layers" / c.name, identity=who.to_spec(),
                         unprivileged=not who.privileged)
        self.procs[(pod.name, c.name)] = proc
        self.pids.setdefault(pod.name, {})[c.name] = proc.pid
        self.exec_specs.setdefault(pod.name, {})[c.name] = {"identity": who.to_spec(), "env": env}
        lab.save()
        lab.mark(f"{pod.name}/{c.name} started")
        return proc

    def run_init(self, pod: Pod, c: Container) -> None:
        """An init container runs to completion; a native sidecar keeps running once its startupProbe passes."""
        proc = self.start(pod, c)
        if c.sidecar:
            if c.startup_exec:
                box = self.lab.network.pods[pod.name]
                wait_until(lambda: box.exec_in(c.startup_exec, proc=proc, timeout=5).returncode == 0,
                           READY_DEADLINE_S, f"{pod.name}/{c.name} startup probe", proc=proc,
                           log_path=self.log_path(pod, c.name), clock=self.clock)
            return
        try:
            code = proc.wait(timeout=INIT_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise LabError(f"{pod.name}: init container {c.name} still running after {INIT_DEADLINE_S} s:\n"
                           f"{sandbox.tail(self.log_path(pod, c.name))}") from None
        if code != 0:
            raise LabError(f"{pod.name}: init container {c.name} exited {code}:\n{sandbox.tail(self.log_path(pod, c.name))}")

    def wait_ready(self, pod: Pod, c: Container, deadline_s: float = READY_DEADLINE_S) -> None:
        """The rendered readinessProbe passes (see ``probe_passes``)."""
        if c.readiness is None:
            return
        wait_until(lambda: self.probe_passes(pod, c, c.readiness), deadline_s, f"{pod.name}/{c.name} readiness probe",
                   proc=self.procs[(pod.name, c.name)], log_path=self.log_path(pod, c.name),
                   interval=0.5 if c.readiness.command else POLL_S, clock=self.clock)
        self.lab.mark(f"{pod.name}/{c.name} ready")

    def probe_passes(self, pod: Pod, c: Container, probe: Probe) -> bool:
        """One run of a rendered probe as the kubelet runs it: an exec in the container as its user,
        exit 0 within timeoutSeconds; an HTTP GET or a TCP connect from the host's side of the bridge,
        a 2xx/3xx answer or an accepted connection within timeoutSeconds."""
        box = self.lab.network.pods[pod.name]
        if probe.command:
            try:
                return box.exec_in(probe.command, proc=self.procs[(pod.name, c.name)],
                                   timeout=probe.timeout_s).returncode == 0
            except LabError:  # timed out: the kubelet counts it as a failure
                return False
        if probe.path:
            try:
                with urllib.request.urlopen(f"http://{box.ip}:{probe.port}{probe.path}", timeout=probe.timeout_s) as r:
                    return 200 <= r.status < 400
            except (OSError, http.client.HTTPException):  # HTTPError (4xx/5xx) and timeouts included
                return False
        return tcp_open(box.ip, probe.port, probe.timeout_s)

    def restart(self, pod: Pod, c: Container) -> None:
        """Kill one container's process and start it again (init containers do not rerun, as in Kubernetes)."""
        proc = self.procs[(pod.name, c.name)]
        # As the kubelet does: SIGTERM, then SIGKILL after the grace period.
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        self.start(pod, c)
        self.wait_ready(pod, c)

    def forget(self, pod_name: str) -> None:
        """A stopped pod's containers."""
        self.pids.pop(pod_name, None)
        self.exec_specs.pop(pod_name, None)


def slurm_client_pod(lab_section: dict) -> str:
    """Where Slurm commands run by default: the first login pod with a container, else the controller."""
    pods = lab_section["pods"]
    for component in (naming.LOGIN, naming.CONTROLLER):
        for name, p in sorted(pods.items()):
            if p["component"] == component and p["containers"]:
                return name
    raise LabError("the lab has no login or controller pod to run commands in")


def exec_in_lab(lab_id: str, argv: list[str], pod: str | None = None, timeout: float = 60,
                input: str | None = None, container: str | None = None) -> subprocess.CompletedProcess:
    """Run argv in a running lab container as kubectl exec would (works from any process).

    ``container`` defaults to the pod's last running one.
    """
    saved = lab_state.load_lab(lab_id)
    name = pod or slurm_client_pod(saved)
    if name not in saved["pods"]:
        raise LabError(f"lab {lab_id} has no pod {name} (pods: {', '.join(sorted(saved['pods']))})")
    pids = saved["pods"][name]["containers"]
    live = [(c, pid) for c, pid in pids.items() if alive(pid) and container in (None, c)]
    if not live:
        raise LabError(f"{name}: {'no container' if container is None else f'container {container}'} is not running"
                       f" (containers: {', '.join(pids) or 'none'})")
    container, pid = live[-1]
    # as kubectl exec: the container's user, groups, capabilities and env
    how = saved["pods"][name].get("exec", {}).get(container, {})
    return sandbox.run_entered(pid, argv, how.get("env") or {"PATH": CLIENT_PATH}, how.get("identity"), timeout,
                               input, name)


def wait_nodes_idle(lab: Lab, deadline_s: float = 60, clock: Clock | None = None) -> None:
    """Every running pool member registered and idle in Slurm."""
    workers = [p for p in lab.pods if p.component == naming.WORKER]
    expected = {p.slurm_node for p in workers}
    if not expected:
        return

    def idle() -> bool:
        out = lab.exec(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=15)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return all(states.get(n, "").rstrip("*") == "idle" for n in expected)

    ctl = next(p for p in lab.pods if p.component == naming.CONTROLLER)
    wait_until(idle, deadline_s, f"pool members {', '.join(sorted(expected))} idle in Slurm",
               log_path=[lab.log_path(ctl, "slurmctld")] + [lab.log_path(w, "slurmd") for w in workers],
               clock=clock or lab.runtime.clock)
    lab.mark("nodes registered and idle")
