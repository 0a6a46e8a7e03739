"""Boot a rendered bundle as a real Slurm cluster: one sandbox per pod, the rendered containers inside.

A lab outlives the command that booted it (daemons run in their own sessions); what a
later `lab exec` / `lab down` needs is kept in the lab's one state file (state.py).

The parts, as kind splits its providers: sandbox.py (namespaces), teardown.py (their removal),
volumes.py (mounts), runtime.py (processes, probes, exec, waits), scaleapi.py (the one Kubernetes
API the lab answers), state.py (the state file). This module boots, scales and tears down a whole lab.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from slurmk8s import debian, naming
from slurmk8s.lab import kubelet, runtime, sandbox, teardown
from slurmk8s.lab import rootfs as rootfs_mod
from slurmk8s.lab import state as lab_state
from slurmk8s.lab.adapt import (
    ALWAYS, CLAIMS_IN_MEMORY, Adaptation, adapt_slurm_files, gpu_adaptations, image_adaptations)
from slurmk8s.lab.errors import LabError, LabUnavailable
from slurmk8s.lab.plan import Container, Pod, Probe, max_replicas, pod_for, pods_of, workloads
from slurmk8s.lab.runtime import (  # noqa: F401 (the lab's public API, as before the split)
    CLIENT_PATH, INIT_DEADLINE_S, READY_DEADLINE_S, Clock, exec_in_lab, slurm_client_pod, wait_nodes_idle)
from slurmk8s.lab.scaleapi import NotFound, ScaleAPI, scale_grants
from slurmk8s.lab.state import LAB_ROOT, lab_dir_of, lab_id_of  # noqa: F401
from slurmk8s.lab.volumes import materialise_pod, materialise_secrets, write_hosts
from slurmk8s.render import Bundle

# Boot order = the order `up` waits in; each stage is Ready before the next starts.
STAGES = naming.COMPONENTS
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
PARALLEL_PODS = 8  # pods set up at once in boot: each is a few short processes on a shared machine


@dataclass
class Lab:
    """A booted lab: its pods' sandboxes and where their containers' processes are.

    The scale API thread changes pods and replicas while other threads read them: `pods` is
    replaced, never changed in place, so a reader always holds one whole list; `replicas` is
    each StatefulSet's spec.replicas (what was asked), and scale_of() also gives its
    status.replicas (how many of its pods run now), which catches up only as pods start and stop.
    """

    lab_id: str
    lab_dir: Path
    bundle: Bundle
    images: dict[str, rootfs_mod.LabImage]  # rendered image reference -> what runs it
    adaptations: list[Adaptation]
    pods: list[Pod]
    slurm_files: dict[str, str]
    network: sandbox.LabNetwork | None = None
    api: ScaleAPI | None = None
    clock: Clock = runtime.SYSTEM_CLOCK
    started: float | None = None  # on clock; events are seconds since
    events: list[tuple[float, str]] = field(default_factory=list)  # the boot's timeline

    @property
    def version(self) -> str:
        return self.bundle.version

    # ------------------------------------------------------------ state shared across commands

    def save(self) -> None:
        """Write the lab section of the state file (another process's `lab exec` or `lab down` reads it)."""
        c = self.runtime
        saved = {"lab_id": self.lab_id, "version": self.version, "replicas": dict(self.replicas),
                 "images": {ref: {"ref": i.ref, "id": i.image_id, "path": str(i.path)} for ref, i in self.images.items()},
                 "adaptations": [str(a) for a in self.adaptations],
                 "pods": {p.name: {"component": p.component, "ip": self.network.pods[p.name].ip,
                                   "containers": dict(c.pids.get(p.name, {})),  # copies: other threads
                                   "exec": dict(c.exec_specs.get(p.name, {}))}  # start containers meanwhile
                          for p in self.pods if self.network and p.name in self.network.pods}}
        saved["api"] = getattr(self, "_admin", None)
        saved["supervisor"] = getattr(self, "_supervisor", None)
        self.state_file.put(lab_state.LAB, saved)

    def mark(self, what: str) -> None:
        """One point of the timeline (what `bench/lab.py` prints)."""
        if self.started is None:
            self.started = self.clock.monotonic()
        self.events.append((self.clock.monotonic() - self.started, what))

    def __post_init__(self) -> None:
        self.runtime = runtime.ContainerRuntime(self, self.clock)
        self.state_file = lab_state.StateFile(self.lab_id)  # the network writes it too
        self._scale_lock = threading.Lock()  # one scale at a time, as one StatefulSet controller
        self._pods_lock = threading.Lock()  # writers of self.pods
        # Stable sandbox index (and so IP) per possible pod, pool members up to their ceiling.
        self._index: dict[str, int] = {}
        for workload in workloads(self.bundle):
            for ordinal in range(max_replicas(workload)):
                self._index[naming.pod_name(workload["metadata"]["name"], ordinal)] = len(self._index)
        self.replicas = {w["metadata"]["name"]: w["spec"].get("replicas", 1) for w in workloads(self.bundle)}

    # ------------------------------------------------------------ files

    def pod_dir(self, pod: Pod) -> Path:
        return self.lab_dir / "pods" / pod.name

    def volume_dir(self, pod: Pod, volume: str) -> Path:
        v = next(v for v in pod.volumes if v.name == volume)
        if v.kind == "claim":
            return self.lab_dir / "claims" / v.source
        return self.pod_dir(pod) / "volumes" / volume

    def container_mounts(self, pod: Pod, c: Container) -> list:
        """The container's volumeMounts; configMap, secret and token volumes always read-only, as the kubelet mounts them."""
        kinds = {v.name: v.kind for v in pod.volumes}
        mounts: list = [sandbox.Bind(self.lab_dir / "hosts", "/etc/hosts", readonly=True),  # the kubelet's managed hosts file
                        sandbox.Bind(self.pod_dir(pod) / "shm", "/dev/shm")]  # the pod sandbox's shm, for every container
        for m in c.mounts:
            src = self.volume_dir(pod, m.volume)
            if m.sub_path:
                src = src / m.sub_path
            read_only = m.read_only or kinds[m.volume] in ("configMap", "secret")
            mounts.append(sandbox.Bind(src, m.path, readonly=read_only))
        if pod.service_account_token and self.api:
            mounts.append(sandbox.Bind(self.pod_dir(pod) / "serviceaccount", SA_DIR, readonly=True))
        return mounts

    def identity(self, pod: Pod, c: Container) -> kubelet.Identity:
        """Who the container runs as (kubelet and containerd rules, against its image's passwd and group)."""
        image = self.images[c.image]
        try:
            return kubelet.identity(pod.security, c.security, image.config.user, image.read("/etc/passwd"),
                                    image.read("/etc/group"), _kernel_capabilities())
        except kubelet.SpecError as e:
            raise LabError(f"{pod.name}/{c.name}: the kubelet would refuse it: {e}") from None

    def container_env(self, pod: Pod, c: Container, uid: int = 0) -> dict[str, str]:
        """The image's env, HOSTNAME, the API's address, the container's env; HOME from the image's passwd."""
        image = self.images[c.image]
        env = dict(image.config.env)
        env["HOSTNAME"] = pod.hostname  # containerd sets it in every container
        if self.api:  # the kubelet gives every container the API's address
            env.update({"KUBERNETES_SERVICE_HOST": self.api.address, "KUBERNETES_SERVICE_PORT": str(self.api.port)})
        env.update(dict(c.env))
        for var, secret, key in c.secret_env:
            env[var] = (self.lab_dir / "secrets" / secret / key).read_text()
        env.setdefault("HOME", kubelet.home_of(uid, image.read("/etc/passwd")))  # as runc does
        return env

    # ------------------------------------------------------------ processes (runtime.py)

    def start_container(self, pod: Pod, c: Container) -> subprocess.Popen:
        return self.runtime.start(pod, c)

    def log_path(self, pod: Pod, container: str) -> Path:
        return self.runtime.log_path(pod, container)

    def run_init(self, pod: Pod, c: Container) -> None:
        self.runtime.run_init(pod, c)

    def wait_ready(self, pod: Pod, c: Container, deadline_s: float = READY_DEADLINE_S) -> None:
        self.runtime.wait_ready(pod, c, deadline_s)

    def probe_passes(self, pod: Pod, c: Container, probe: Probe) -> bool:
        return self.runtime.probe_passes(pod, c, probe)

    def start_pod(self, pod: Pod) -> None:
        """Sandbox, volumes, init containers and sidecars, then the containers (not waiting for readiness)."""
        self.prepare_pod(pod)
        self.finish_pod(pod)

    def prepare_pod(self, pod: Pod) -> None:
        """Sandbox, volumes, and the init containers before the first sidecar: nothing that needs another pod.

        A sidecar may (sackd fetches its config from slurmctld), so it waits for finish_pod.
        """
        gpus = max((c.gpus for c in pod.containers), default=0)
        cgroups = [pod.slurm_node] if pod.pool else []
        self.network.add_pod(pod.name, pod.hostname, devices=sandbox.fake_gpus(gpus),
                             index=self._index[pod.name], cgroup_names=cgroups)
        with self._pods_lock:
            if pod not in self.pods:  # in boot order, whichever thread comes first: "first pod" stays the same
                self.pods = sorted(self.pods + [pod], key=self._boot_order)
        materialise_pod(self, pod)
        write_hosts(self)
        for c in pod.init[:_leading_inits(pod)]:
            self.run_init(pod, c)

    def finish_pod(self, pod: Pod) -> None:
        """The init containers from the first sidecar on, then the containers."""
        for c in pod.init[_leading_inits(pod):]:
            self.run_init(pod, c)
        for c in pod.containers:
            self.start_container(pod, c)

    def _boot_order(self, pod: Pod) -> tuple[int, int]:
        return STAGES.index(pod.component) if pod.component in STAGES else len(STAGES), self._index[pod.name]

    def stop_pod(self, pod: Pod, grace_s: float = 30) -> None:
        """Delete a pod as the kubelet would: SIGTERM, grace period, SIGKILL; its name stops resolving."""
        self.network.remove_pod(pod.name, grace_s)
        with self._pods_lock:
            self.pods = [p for p in self.pods if p is not pod]
        self.runtime.forget(pod.name)
        write_hosts(self)
        self.save()

    def scale(self, statefulset: str, replicas: int) -> None:
        """Record spec.replicas, then do what the StatefulSet controller does: start missing members
        in order, stop the highest first; returns once the pods match."""
        workload = next((w for w in workloads(self.bundle) if w["metadata"]["name"] == statefulset), None)
        if workload is None or workload["kind"] != "StatefulSet":
            raise NotFound(statefulset)
        if not 0 <= replicas <= max_replicas(workload):
            raise LabError(f"{statefulset}: {replicas} replicas is outside 0..{max_replicas(workload)} "
                           "(the lab has sandboxes for the pool's maxReplicas only)")
        with self._scale_lock:
            self.replicas[statefulset] = replicas
            # From the pods that run, not from the previous spec: a scale that failed halfway is finished here.
            running = {p.ordinal: p for p in self.pods if p.owner == statefulset}
            for ordinal in range(replicas):
                if ordinal not in running:
                    self.start_pod(pod_for(self.bundle, workload, ordinal))
            for ordinal in sorted((o for o in running if o >= replicas), reverse=True):
                self.stop_pod(running[ordinal])
            self.save()

    def scale_of(self, statefulset: str) -> tuple[int, int]:
        """(spec.replicas, status.replicas) of a StatefulSet; NotFound for one the bundle lacks."""
        if statefulset not in self.replicas:
            raise NotFound(statefulset)
        return self.replicas[statefulset], sum(1 for p in self.pods if p.owner == statefulset)

    def restart_container(self, pod_name: str, container: str) -> None:
        """Kill one container's process and start it again (init containers do not rerun, as in Kubernetes)."""
        pod = self.pod(pod_name)
        self.runtime.restart(pod, next(x for x in pod.containers if x.name == container))

    def pod(self, name: str) -> Pod:
        return next(p for p in self.pods if p.name == name)

    def exec(self, argv: list[str], pod: str | None = None, timeout: float = 60,
             container: str | None = None) -> subprocess.CompletedProcess:
        """Run a command in a pod (default: the first login pod, else the controller), as its container's user."""
        return exec_in_lab(self.lab_id, argv, pod, timeout, container=container)

    def publish_admin_access(self) -> None:
        """Record in the state file (root only) how `slurmk8s scale --lab` reaches the scale API."""
        if self.api:
            self._admin = {"address": self.api.address, "port": self.api.port, "token": self.api.admin_token(),
                           "ca": str(self.api.ca_file)}
        self._supervisor = os.getpid()
        self.save()

    def down(self) -> list[str]:
        if self.api:
            self.api.stop()
        return down(self.lab_id)


def _leading_inits(pod: Pod) -> int:
    """How many init containers come before the first native sidecar."""
    return next((i for i, c in enumerate(pod.init) if c.sidecar), len(pod.init))


def check_lab_version(version: str) -> None:
    """LabUnavailable unless the lab has images of this Slurm release."""
    if version not in debian.SLURM_RELEASES:
        raise LabUnavailable(f"the lab has no Slurm {version} images (it has {', '.join(sorted(debian.SLURM_RELEASES))}); "
                             "render the profile for one of those versions to try it here")


def every_pod(bundle: Bundle) -> list[Pod]:
    """Member 0 of every workload: what its members are made of, running now or not (an elastic pool's)."""
    return [pod_for(bundle, w, 0) for w in workloads(bundle)]


def refuse_unsupported(bundle: Bundle, pods: list[Pod], images: dict[str, rootfs_mod.LabImage]) -> None:
    """Things the lab cannot honour, refused before anything starts."""
    for pod in pods:
        for c in pod.all_containers:
            image = images[c.image].config
            if not kubelet.container_argv(c.command, c.args, image.entrypoint, image.cmd):
                raise LabError(f"{pod.name}/{c.name}: neither the bundle nor image {c.image} gives a command")
    if not any(p.component == naming.CONTROLLER for p in pods):
        raise LabError("the bundle has no slurmctld pod")


# The scale APIs this process serves, by lab id: `down` stops them with the lab.
_SERVED_APIS: dict[str, ScaleAPI] = {}


def boot(bundle: Bundle, cache_dir: Path | None = None, log: Callable[[str], None] = print,
         clock: Clock = runtime.SYSTEM_CLOCK) -> Lab:
    """Boot every pod of the bundle; returns when every stage passed its readiness probes.

    The returned lab's ``events`` are the boot's timeline, in seconds since this call.
    """
    started = clock.monotonic()
    sandbox.preflight()
    check_lab_version(bundle.version)
    lab_id = lab_id_of(bundle)
    down(lab_id)
    pods = pods_of(bundle)
    templates = every_pod(bundle)
    members = {pod_for(bundle, w, i).slurm_node for w in workloads(bundle) for i in range(max_replicas(w))}
    sharing = teardown.labs_sharing_cgroups(lab_id, members - {None})
    if sharing:
        other, nodes = min(sharing.items())
        raise LabError(f"lab {other} is up with Slurm nodes of the same names ({', '.join(nodes)}): two labs would "
                       f"share Slurm's cgroup dirs slurm_<node>; end it first (`slurmk8s lab down` with its profile)")
    images = rootfs_mod.resolve({c.image for p in templates for c in p.all_containers}, bundle.version, cache_dir, log)
    refuse_unsupported(bundle, templates, images)
    slurm_files, changed = adapt_slurm_files(bundle.find("ConfigMap", naming.config_map(bundle.cluster))["data"],
                                             os.cpu_count() or 1, _memory_mib())
    has_claims = any(v.kind == "claim" for p in templates for v in p.volumes)
    adaptations = (list(ALWAYS) + image_adaptations(images.values()) + changed + gpu_adaptations(pods)
                   + ([CLAIMS_IN_MEMORY] if has_claims else []))
    log(f"lab {lab_id}: Slurm {bundle.version}; adaptations:")
    for a in adaptations:
        log(f"  - {a}")
    lab = Lab(lab_id, lab_dir_of(lab_id), bundle, images, adaptations, [], slurm_files, clock=clock, started=started)
    lab.mark("images resolved")
    lab.network = sandbox.LabNetwork(lab_id, lab_dir=lab.lab_dir, state_file=lab.state_file).create()
    if has_claims:  # under the lab dir, so teardown unmounts it
        sandbox.mount_tmpfs(lab.lab_dir / "claims")
    grants = scale_grants(bundle)
    if any(p.service_account_token for p in pods):
        lab.api = ScaleAPI(lab.network.gateway, lab.lab_dir / "api", lab.scale_of, lab.scale, grants)
        lab.api.start()
        _SERVED_APIS[lab_id] = lab.api
    materialise_secrets(lab)
    lab.save()
    lab.mark("sandbox ready (bridge, secrets" + (", scale API)" if lab.api else ")"))
    # As on Kubernetes, every pod's sandbox, volumes and first init containers (MariaDB's
    # install-db, the config copies) are made at once; the daemons then start stage by stage,
    # each stage's pods together, because the lab restarts none that exits for want of the last.
    pool = ThreadPoolExecutor(max_workers=PARALLEL_PODS, thread_name_prefix=f"{lab_id}-pod")
    try:
        prepared = {p.name: pool.submit(lab.prepare_pod, p) for p in pods}
        for stage in STAGES:
            stage_pods = [p for p in pods if p.component == stage]
            for pod in stage_pods:
                prepared[pod.name].result()
            for started in [pool.submit(lab.finish_pod, p) for p in stage_pods]:
                started.result()
            for pod in stage_pods:
                for c in pod.containers:
                    lab.wait_ready(pod, c)
        wait_nodes_idle(lab)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # no thread starts anything once the lab is torn down
        api = _SERVED_APIS.pop(lab_id, None)
        if api:
            api.stop()
        raise
    pool.shutdown(wait=True)
    return lab


def load_state(lab_id: str) -> dict:
    """What a running lab recorded for other processes (pods, containers, exec, api, supervisor)."""
    return lab_state.load_lab(lab_id)


def down(lab_id: str, keep_logs: Path | None = None) -> list[str]:
    """Stop everything of the lab and remove its files; idempotent. Returns what is left (empty = clean).

    keep_logs: a directory to copy every container's log into first (pod/container.log), so a
    failed run can be read after the lab is gone.
    """
    _stop_supervisor(lab_id)
    api = _SERVED_APIS.pop(lab_id, None)
    if api is not None:  # its socket on the lab's gateway would outlive the bridge and block the next lab there
        api.stop()
    left = teardown.teardown(lab_id)
    if keep_logs is not None:
        save_logs(lab_id, keep_logs)
    if not left:
        shutil.rmtree(lab_dir_of(lab_id), ignore_errors=True)
    return left


def save_logs(lab_id: str, target: Path) -> list[Path]:
    """Copy the lab's container logs to target/<pod>/<container>.log; returns the copies."""
    pods = lab_dir_of(lab_id) / "pods"
    copies = []
    for log in sorted(pods.glob("*/*.log")) if pods.is_dir() else []:
        copy = target / log.parent.name / log.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, copy)
        copies.append(copy)
    return copies


def _stop_supervisor(lab_id: str, deadline_s: float = 60) -> None:
    """SIGTERM the `lab up` supervisor of this lab (not ourselves) and wait for it to finish its teardown."""
    try:
        saved = lab_state.read_section(lab_id, lab_state.LAB, legacy_lab_dir=lab_dir_of(lab_id))
    except (OSError, ValueError):
        return
    pid = (saved or {}).get("supervisor")
    if not pid or pid == os.getpid() or not runtime.alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    try:
        runtime.wait_until(lambda: not runtime.alive(pid), deadline_s, f"lab {lab_id}'s supervisor {pid} to end")
    except LabError:
        pass  # teardown goes on: it kills what the supervisor left


def _kernel_capabilities() -> tuple[str, ...]:
    """The capabilities the lab itself holds: "all" for a privileged container, as containerd takes its own."""
    status = Path("/proc/self/status").read_text()
    held = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapPrm:")), 16)
    return tuple(name for bit, name in enumerate(kubelet.CAPABILITIES) if held >> bit & 1)


def _memory_mib() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0
