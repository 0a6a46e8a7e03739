"""Boot a rendered bundle as a real Slurm cluster: one sandbox per pod, the rendered containers inside.

A lab outlives the command that booted it (daemons run in their own sessions); what a
later `lab exec` / `lab down` needs is kept in <lab dir>/lab.json.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from slurmk8s import debian, material, naming
from slurmk8s.lab import kubelet, sandbox
from slurmk8s.lab import rootfs as rootfs_mod
from slurmk8s.lab.adapt import ALWAYS, Adaptation, adapt_slurm_files, gpu_adaptations, image_adaptations
from slurmk8s.lab.errors import LabError, LabUnavailable
from slurmk8s.lab.plan import Container, Pod, Probe, Volume, dns_names, max_replicas, pod_for, pods_of, workloads
from slurmk8s.lab.scaleapi import ScaleAPI, scale_grants
from slurmk8s.render import Bundle

LAB_ROOT = Path("/var/lib/slurmk8s/labs")
# Boot order = the order `up` waits in; each stage is Ready before the next starts.
STAGES = naming.COMPONENTS
INIT_DEADLINE_S = 60
READY_DEADLINE_S = 60
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
CLIENT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def lab_id_of(bundle: Bundle) -> str:
    """One lab per cluster name on a machine."""
    return f"lab-{bundle.cluster}"[:40]


def lab_dir_of(lab_id: str) -> Path:
    return LAB_ROOT / lab_id


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

    @property
    def version(self) -> str:
        return self.bundle.version

    # ------------------------------------------------------------ state shared across commands

    def save(self) -> None:
        state = {"lab_id": self.lab_id, "version": self.version, "replicas": self.replicas,
                 "images": {ref: {"ref": i.ref, "id": i.image_id, "path": str(i.path)} for ref, i in self.images.items()},
                 "adaptations": [str(a) for a in self.adaptations],
                 "pods": {p.name: {"component": p.component, "ip": self.network.pods[p.name].ip,
                                   "containers": self._pids.get(p.name, {}),
                                   "exec": self._exec.get(p.name, {})}
                          for p in self.pods if self.network and p.name in self.network.pods}}
        state["api"] = getattr(self, "_admin", None)
        state["supervisor"] = getattr(self, "_supervisor", None)
        # Atomic: `lab exec` in another process, or the scale API thread, may read it meanwhile.
        tmp = self.lab_dir / f"lab.json.{threading.get_ident()}"
        tmp.touch(mode=0o600)
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.lab_dir / "lab.json")

    def __post_init__(self) -> None:
        self._pids: dict[str, dict[str, int]] = {}
        self._exec: dict[str, dict[str, dict]] = {}  # pod -> container -> its identity and env, for exec
        self._procs: dict[tuple[str, str], subprocess.Popen] = {}
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

    # ------------------------------------------------------------ processes

    def start_container(self, pod: Pod, c: Container) -> subprocess.Popen:
        """Start one container as a runtime would: its image's files under a fresh writable layer, as its user."""
        box = self.network.pods[pod.name]
        image = self.images[c.image]
        who = self.identity(pod, c)
        env = self.container_env(pod, c, who.uid)
        argv = kubelet.container_argv(c.command, c.args, image.config.entrypoint, image.config.cmd)
        proc = box.start(argv, env, self.container_mounts(pod, c), rootfs=image.path,
                         workdir=c.working_dir or image.config.workdir or "/",
                         stdout_path=self.pod_dir(pod) / f"{c.name}.log",
                         layer=self.pod_dir(pod) / "layers" / c.name, identity=who.to_spec(),
                         unprivileged=not who.privileged)
        self._procs[(pod.name, c.name)] = proc
        self._pids.setdefault(pod.name, {})[c.name] = proc.pid
        self._exec.setdefault(pod.name, {})[c.name] = {"identity": who.to_spec(), "env": env}
        self.save()
        return proc

    def log_path(self, pod: Pod, container: str) -> Path:
        return self.pod_dir(pod) / f"{container}.log"

    def run_init(self, pod: Pod, c: Container) -> None:
        """An init container runs to completion; a native sidecar keeps running once its startupProbe passes."""
        proc = self.start_container(pod, c)
        if c.sidecar:
            if c.startup_exec:
                box = self.network.pods[pod.name]
                sandbox.wait_until(lambda: box.exec_in(c.startup_exec, proc=proc, timeout=5).returncode == 0,
                                   READY_DEADLINE_S, f"{pod.name}/{c.name} startup probe", proc=proc,
                                   log_path=self.log_path(pod, c.name))
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
        sandbox.wait_until(lambda: self.probe_passes(pod, c, c.readiness), deadline_s,
                           f"{pod.name}/{c.name} readiness probe", proc=self._procs[(pod.name, c.name)],
                           log_path=self.log_path(pod, c.name), interval=0.5 if c.readiness.command else 0.1)

    def probe_passes(self, pod: Pod, c: Container, probe: Probe) -> bool:
        """One run of a rendered probe as the kubelet runs it: an exec in the container as its user,
        exit 0 within timeoutSeconds; an HTTP GET or a TCP connect from the host's side of the bridge,
        a 2xx/3xx answer or an accepted connection within timeoutSeconds."""
        ip = self.network.pods[pod.name].ip
        if probe.command:
            try:
                return self.network.pods[pod.name].exec_in(probe.command, proc=self._procs[(pod.name, c.name)],
                                                           timeout=probe.timeout_s).returncode == 0
            except LabError:  # timed out: the kubelet counts it as a failure
                return False
        if probe.path:
            try:
                with urllib.request.urlopen(f"http://{ip}:{probe.port}{probe.path}", timeout=probe.timeout_s) as r:
                    return 200 <= r.status < 400
            except (OSError, http.client.HTTPException):  # HTTPError (4xx/5xx) and timeouts included
                return False
        return _tcp_open(ip, probe.port, probe.timeout_s)

    def start_pod(self, pod: Pod) -> None:
        """Sandbox, volumes, init containers and sidecars, then the containers (not waiting for readiness)."""
        gpus = max((c.gpus for c in pod.containers), default=0)
        cgroups = [pod.slurm_node] if pod.pool else []
        self.network.add_pod(pod.name, pod.hostname, devices=sandbox.fake_gpus(gpus),
                             index=self._index[pod.name], cgroup_names=cgroups)
        with self._pods_lock:
            if pod not in self.pods:
                self.pods = self.pods + [pod]
        materialise_pod(self, pod)
        write_hosts(self)
        for c in pod.init:
            self.run_init(pod, c)
        for c in pod.containers:
            self.start_container(pod, c)

    def stop_pod(self, pod: Pod, grace_s: float = 30) -> None:
        """Delete a pod as the kubelet would: SIGTERM, grace period, SIGKILL; its name stops resolving."""
        self.network.remove_pod(pod.name, grace_s)
        with self._pods_lock:
            self.pods = [p for p in self.pods if p is not pod]
        self._pids.pop(pod.name, None)
        self._exec.pop(pod.name, None)
        write_hosts(self)
        self.save()

    def scale(self, statefulset: str, replicas: int) -> None:
        """Record spec.replicas, then do what the StatefulSet controller does: start missing members
        in order, stop the highest first; returns once the pods match."""
        workload = next((w for w in workloads(self.bundle) if w["metadata"]["name"] == statefulset), None)
        if workload is None or workload["kind"] != "StatefulSet":
            raise KeyError(statefulset)
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
        """(spec.replicas, status.replicas) of a StatefulSet; KeyError for one the bundle lacks."""
        return self.replicas[statefulset], sum(1 for p in self.pods if p.owner == statefulset)

    def restart_container(self, pod_name: str, container: str) -> None:
        """Kill one container's process and start it again (init containers do not rerun, as in Kubernetes)."""
        pod = self.pod(pod_name)
        c = next(x for x in pod.containers if x.name == container)
        proc = self._procs[(pod_name, container)]
        # As the kubelet does: SIGTERM, then SIGKILL after the grace period.
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        self.start_container(pod, c)
        self.wait_ready(pod, c)

    def pod(self, name: str) -> Pod:
        return next(p for p in self.pods if p.name == name)

    def exec(self, argv: list[str], pod: str | None = None, timeout: float = 60,
             container: str | None = None) -> subprocess.CompletedProcess:
        """Run a command in a pod (default: the first login pod, else the controller), as its container's user."""
        return exec_in_lab(self.lab_id, argv, pod, timeout, container=container)

    def publish_admin_access(self) -> None:
        """Record in lab.json (root only) how `slurmk8s scale --lab` reaches the scale API."""
        if self.api:
            self._admin = {"address": self.api.address, "port": self.api.port, "token": self.api.admin_token(),
                           "ca": str(self.api.ca_file)}
        self._supervisor = os.getpid()
        self.save()

    def down(self) -> list[str]:
        if self.api:
            self.api.stop()
        return down(self.lab_id)


def _tcp_open(ip: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _write_file(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)


def materialise_secrets(lab: Lab) -> None:
    """The bundle's Secrets with fresh material, as `up` would create them."""
    for s in lab.bundle.secrets:
        _write_file(lab.lab_dir / "secrets" / s.name / s.key, material.generate(s.kind), 0o600)


def materialise_pod(lab: Lab, pod: Pod) -> None:
    """A pod's volumes as a kubelet sets them up: modes, owners and fsGroup; claims as local-path makes them.

    Every volume but a claim starts empty with the pod, and so does the token volume.
    """
    config_maps = {o["metadata"]["name"]: dict(o["data"]) for o in lab.bundle.of_kind("ConfigMap")}
    config_maps[naming.config_map(lab.bundle.cluster)] = lab.slurm_files
    fs_group = pod.security.fs_group
    for v in pod.volumes:
        target = lab.volume_dir(pod, v.name)
        if v.kind == "claim":
            # kind's local-path provisioner: `mkdir -m 0777` on the node, a hostPath volume: no fsGroup change
            if not target.exists():
                target.mkdir(parents=True)
                os.chmod(target, kubelet.EMPTY_DIR_MODE)
            continue
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        if v.kind == "emptyDir":
            os.chmod(target, kubelet.MEMORY_DIR_MODE if v.medium == "Memory" else kubelet.EMPTY_DIR_MODE)
            apply_fs_group(target, fs_group, read_only=False)
            continue
        payload = _volume_payload(lab, pod, v, config_maps)
        # a configMap sits on a disk emptyDir, a secret on a Memory one
        write_projection(target, payload, kubelet.EMPTY_DIR_MODE if v.kind == "configMap" else kubelet.MEMORY_DIR_MODE)
        apply_fs_group(target, fs_group, read_only=True)
    shutil.rmtree(lab.pod_dir(pod) / "layers", ignore_errors=True)
    shm = lab.pod_dir(pod) / "shm"  # the sandbox's /dev/shm: a tmpfs of 64 MiB, 1777, on containerd
    shutil.rmtree(shm, ignore_errors=True)
    shm.mkdir(parents=True)
    os.chmod(shm, kubelet.MEMORY_DIR_MODE)
    if pod.service_account_token and lab.api:
        sa = lab.pod_dir(pod) / "serviceaccount"
        if sa.exists():
            shutil.rmtree(sa)
        sa.mkdir(parents=True)
        account = next(c["spec"]["template"]["spec"].get("serviceAccountName", "default")
                       for c in workloads(lab.bundle) if c["metadata"]["name"] == pod.owner)
        owner = kubelet.fs_user(pod.security, [c.security for c in pod.all_containers])
        mode, uid = kubelet.token_file(kubelet.PROJECTED_DEFAULT_MODE, owner, fs_group)
        write_projection(sa, {
            "token": (lab.api.token_for(pod.namespace, account).encode(), mode, uid),
            "ca.crt": (lab.api.ca_file.read_bytes(), kubelet.PROJECTED_DEFAULT_MODE, None),
            "namespace": (pod.namespace.encode(), kubelet.PROJECTED_DEFAULT_MODE, None),
        }, kubelet.MEMORY_DIR_MODE)
        apply_fs_group(sa, fs_group, read_only=True)


def _volume_payload(lab: Lab, pod: Pod, v: Volume, config_maps: dict[str, dict[str, str]]) -> dict:
    """path -> (data, mode, owner) of a configMap or secret volume (MakePayload: items, or every key)."""
    if v.kind == "configMap":
        data = {k: text.encode() for k, text in config_maps[v.source].items()}
    else:
        folder = lab.lab_dir / "secrets" / v.source
        if not folder.is_dir():
            raise LabError(f"{pod.name}: volume {v.name} needs Secret {v.source}, which nothing creates")
        data = {f.name: f.read_bytes() for f in folder.iterdir()}
    items = v.items or tuple((k, k, None) for k in data)
    return {path: (data[key], v.mode if mode is None else mode, None) for key, path, mode in items}


def write_projection(target: Path, payload: dict[str, tuple[bytes, int, int | None]], root_mode: int) -> None:
    """The atomic writer's layout: files in ..<timestamp> (0755), ..data -> it, one symlink per top-level name."""
    os.chmod(target, root_mode)
    stamp = Path(tempfile.mkdtemp(prefix=time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()), dir=target))
    os.chmod(stamp, kubelet.DATA_DIR_MODE)
    for path, (data, mode, owner) in sorted(payload.items()):
        file = stamp / path
        for parent in reversed(file.relative_to(stamp).parents[:-1]):
            if not (stamp / parent).exists():
                (stamp / parent).mkdir()
                os.chmod(stamp / parent, kubelet.NESTED_DIR_MODE)
        file.write_bytes(data)
        os.chmod(file, mode)
        if owner is not None:
            os.chown(file, owner, -1)
    (target / "..data").symlink_to(stamp.name)
    for top in sorted({p.split("/", 1)[0] for p in payload}):
        (target / top).symlink_to(f"..data/{top}")


def apply_fs_group(root: Path, fs_group: int | None, read_only: bool) -> None:
    """changeFilePermission over a whole volume: group fsGroup, group rw (ro) bits, setgid dirs; symlinks only chowned."""
    if fs_group is None:
        return
    _fs_group_one(root, fs_group, read_only)
    for dirpath, dirnames, filenames in os.walk(root):  # symlinked dirs are listed, not followed
        for name in dirnames + filenames:
            _fs_group_one(Path(dirpath, name), fs_group, read_only)


def _fs_group_one(path: Path, fs_group: int, read_only: bool) -> None:
    st = os.lstat(path)
    os.lchown(path, -1, fs_group)
    if stat.S_ISLNK(st.st_mode):
        return
    os.chmod(path, kubelet.fs_group_mode(stat.S_IMODE(st.st_mode), stat.S_ISDIR(st.st_mode), read_only))


def write_hosts(lab: Lab) -> None:
    """/etc/hosts of every pod: the DNS names of the pods that run now (rewritten in place: bind mounts pin the inode)."""
    names = dns_names(lab.bundle, lab.pods)
    lines = ["127.0.0.1 localhost"]
    lines += [f"{lab.network.pods[p.name].ip} {' '.join(names[p.name])}" for p in lab.pods if p.name in lab.network.pods]
    if lab.api:  # cluster DNS for the API Service
        lines.append(f"{lab.api.address} kubernetes kubernetes.default kubernetes.default.svc "
                     f"kubernetes.default.svc.{lab.bundle.cluster_domain}")
    path = lab.lab_dir / "hosts"
    if not path.exists():
        path.touch()
    with open(path, "r+") as fh:
        fh.write("\n".join(lines) + "\n")
        fh.truncate()


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


def boot(bundle: Bundle, cache_dir: Path | None = None, log: Callable[[str], None] = print) -> Lab:
    """Boot every pod of the bundle; returns when every stage passed its readiness probes."""
    sandbox.preflight()
    check_lab_version(bundle.version)
    lab_id = lab_id_of(bundle)
    down(lab_id)
    pods = pods_of(bundle)
    templates = every_pod(bundle)
    members = {pod_for(bundle, w, i).slurm_node for w in workloads(bundle) for i in range(max_replicas(w))}
    sharing = sandbox.labs_sharing_cgroups(lab_id, members - {None})
    if sharing:
        other, nodes = min(sharing.items())
        raise LabError(f"lab {other} is up with Slurm nodes of the same names ({', '.join(nodes)}): two labs would "
                       f"share Slurm's cgroup dirs slurm_<node>; end it first (`slurmk8s lab down` with its profile)")
    images = rootfs_mod.resolve({c.image for p in templates for c in p.all_containers}, bundle.version, cache_dir, log)
    refuse_unsupported(bundle, templates, images)
    slurm_files, changed = adapt_slurm_files(bundle.find("ConfigMap", naming.config_map(bundle.cluster))["data"],
                                             os.cpu_count() or 1, _memory_mib())
    adaptations = list(ALWAYS) + image_adaptations(images.values()) + changed + gpu_adaptations(pods)
    log(f"lab {lab_id}: Slurm {bundle.version}; adaptations:")
    for a in adaptations:
        log(f"  - {a}")
    lab = Lab(lab_id, lab_dir_of(lab_id), bundle, images, adaptations, [], slurm_files)
    lab.network = sandbox.LabNetwork(lab_id, lab_dir=lab.lab_dir).create()
    grants = scale_grants(bundle)
    if any(p.service_account_token for p in pods):
        lab.api = ScaleAPI(lab.network.gateway, lab.lab_dir / "api", lab.scale_of, lab.scale, grants)
        lab.api.start()
        _SERVED_APIS[lab_id] = lab.api
    materialise_secrets(lab)
    lab.save()
    try:
        for stage in STAGES:
            stage_pods = [p for p in pods if p.component == stage]
            for pod in stage_pods:
                lab.start_pod(pod)
            for pod in stage_pods:
                for c in pod.containers:
                    lab.wait_ready(pod, c)
        wait_nodes_idle(lab)
    except BaseException:
        api = _SERVED_APIS.pop(lab_id, None)
        if api:
            api.stop()
        raise
    return lab


def slurm_client_pod(state: dict) -> str:
    pods = state["pods"]
    for component in (naming.LOGIN, naming.CONTROLLER):
        for name, p in sorted(pods.items()):
            if p["component"] == component and p["containers"]:
                return name
    raise LabError("the lab has no login or controller pod to run commands in")


def load_state(lab_id: str) -> dict:
    path = lab_dir_of(lab_id) / "lab.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise LabError(f"no lab {lab_id} is running (start one with `slurmk8s lab up`)") from None


def exec_in_lab(lab_id: str, argv: list[str], pod: str | None = None, timeout: float = 60,
                input: str | None = None, container: str | None = None) -> subprocess.CompletedProcess:
    """Run argv in a running lab container as kubectl exec would (works from any process).

    ``container`` defaults to the pod's last running one.
    """
    state = load_state(lab_id)
    name = pod or slurm_client_pod(state)
    if name not in state["pods"]:
        raise LabError(f"lab {lab_id} has no pod {name} (pods: {', '.join(sorted(state['pods']))})")
    pids = state["pods"][name]["containers"]
    live = [(c, pid) for c, pid in pids.items() if _alive(pid) and container in (None, c)]
    if not live:
        raise LabError(f"{name}: {'no container' if container is None else f'container {container}'} is not running"
                       f" (containers: {', '.join(pids) or 'none'})")
    container, pid = live[-1]
    # as kubectl exec: the container's user, groups, capabilities and env
    how = state["pods"][name].get("exec", {}).get(container, {})
    return sandbox.run_entered(pid, argv, how.get("env") or {"PATH": CLIENT_PATH}, how.get("identity"), timeout,
                               input, name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def wait_nodes_idle(lab: Lab, deadline_s: float = 60) -> None:
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
    sandbox.wait_until(idle, deadline_s, f"pool members {', '.join(sorted(expected))} idle in Slurm",
                       log_path=[lab.log_path(ctl, "slurmctld")] + [lab.log_path(w, "slurmd") for w in workers])


def down(lab_id: str, keep_logs: Path | None = None) -> list[str]:
    """Stop everything of the lab and remove its files; idempotent. Returns what is left (empty = clean).

    keep_logs: a directory to copy every container's log into first (pod/container.log), so a
    failed run can be read after the lab is gone.
    """
    _stop_supervisor(lab_id)
    api = _SERVED_APIS.pop(lab_id, None)
    if api is not None:  # its socket on the lab's gateway would outlive the bridge and block the next lab there
        api.stop()
    left = sandbox.teardown(lab_id)
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
        pid = json.loads((lab_dir_of(lab_id) / "lab.json").read_text()).get("supervisor")
    except (OSError, ValueError):
        return
    if not pid or pid == os.getpid() or not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + deadline_s
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.1)


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
